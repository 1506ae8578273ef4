"""Latency in words: the milliseconds shown, and why an item failed (or was not judged)."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from ..latency import DecisionFacts, HostFactor, Judgement, LatencyOutcome, findings_json
from ..results import Operators, record
from ._operators import operators_text
from ._text import aligned


def fmt_ms(seconds: float) -> str:
    """``0.0203 ms``, ``7.21 ms``, ``10.0 ms``, ``151 ms``: three significant digits."""
    value = seconds * 1e3
    return f"{value:.0f} ms" if value >= 100 else f"{value:#.3g} ms"


def ms(value: float | None) -> str:
    """A time the results file keeps in milliseconds ("-" where there is none)."""
    return "-" if value is None else fmt_ms(value / 1e3)


def _fmt_ratio(r: Any) -> str:
    return f"×{r.value:.2f} [{r.low:.2f}–{r.high:.2f}]"


def _plain(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


def explain_latency(outcome: LatencyOutcome, update_cmd: str, enrich_cmd: str = "") -> str:
    """Why a latency item failed (or was not judged), with every number needed to believe it: its
    concluding attempt's judgements against ``outcome.baseline``, as a table."""
    a, baseline, attempts = outcome.assessment, outcome.baseline, outcome.assessments
    assert a is not None and baseline is not None
    stats = ", ".join(sorted({j.statistic for js in a.judgements.values() for j in js}))
    if a.verdict == "contended":
        lead = (
            f"latency not judged: the machine was busy (other processes used "
            f"{a.attempt.contention:.0%} of the CPUs, more than {outcome.max_contention:.0%}) in "
            f"every one of {attempts} attempts, and the model measured slower than the golden "
            "allows"
        )
    elif a.verdict == "inconclusive":
        lead = (
            f"latency inconclusive: {stats} beyond the tolerance absolutely, in {attempts} "
            "attempts, but the reference workload could not tell whether this host or the model "
            "is slower"
        )
    else:
        lead = (
            f"latency regression: {stats} beyond the tolerance in every one of {attempts} "
            "attempts, both absolutely and relative to the reference workload"
        )
    rows: list[tuple[str, ...]] = [
        ("measurement", "stat", "golden", "now", "now/golden", "normalised", "tolerance", "")
    ]
    rows += [
        (
            name,
            j.statistic,
            fmt_ms(j.golden),
            fmt_ms(j.now),
            _fmt_ratio(j.ratio),
            _fmt_ratio(j.normalised) if j.normalised else "-",
            f"≤×{j.tolerance:g}",
            {"regression": "✗", "faster": "faster", "inconclusive": "?"}.get(j.outcome, ""),
        )
        for name, js in a.judgements.items()
        for j in js
    ]
    lines = [lead, "", *aligned(rows, indent="  ")]
    ref_now = float(np.median(a.attempt.block_medians))
    ref_golden = float(np.median(baseline.reference_blocks))
    lines.append("")
    if a.host is not None:
        h = a.host
        lines.append(
            f"  reference workload p50: {fmt_ms(ref_golden)} at recording "
            f"({h.blocks_golden} blocks), {fmt_ms(ref_now)} now ({h.blocks_now} blocks, "
            f"slowest/fastest ×{a.attempt.reference_drift:.2f}): host "
            f"{_fmt_ratio(h)}"
        )
        if not a.host_may_excuse:
            lines.append(
                f"  the golden's reference ran under other software ({baseline.reference} → "
                f"{a.attempt.reference}): it may not excuse a slowdown"
            )
    else:
        lines.append(
            "  reference workload differs from the golden's "
            f"({baseline.reference} → {a.attempt.reference}): judged on absolute ratios only"
        )
    if a.attempt.contention is not None:
        lines.append(
            f"  other processes used {a.attempt.contention:.0%} of the CPUs meanwhile "
            f"(at recording: {_pct(baseline.contention)})"
        )
    lines.append("  [low–high]: one-sided 95% bootstrap bounds of the ratio")
    if outcome.changes:
        lines.append("")
        lines.append("  changed since the golden:")
        for name, (old, new) in outcome.changes.items():
            lines.append(f"    {name}: {_plain(old)} → {_plain(new)}")
    if outcome.operators is not None:  # a regression's: which operators took the added time
        lines.append("")
        ops = record(Operators, findings_json(outcome.operators))
        lines += operators_text(ops, enrich_cmd, update_cmd)
    lines.append("")
    exact = "" if baseline.exact else " (recorded with other settings on this machine)"
    lines.append(f"  golden: {outcome.golden_shown}{exact}, recorded {baseline.recorded}")
    if a.verdict == "contended":
        lines.append("  rerun on a quiet machine (or raise mlrepro_latency_max_contention)")
    elif a.verdict == "inconclusive":
        lines += [
            "  to settle it, measure again alone on this host (more reference blocks narrow the "
            "bounds):",
            f"    {update_cmd.replace(' --mlrepro-update', ' -p no:xdist')}",
            "  or, if this host is a reference machine of its own, record its golden:",
            f"    {update_cmd}",
        ]
    else:
        lines += ["  if the change is intended, record a new golden:", f"    {update_cmd}"]
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "unknown" if value is None or not math.isfinite(value) else f"{value:.0%}"


def latency_outcome_text(
    outcome: LatencyOutcome, update_cmd: str, where: str, enrich_cmd: str = ""
) -> str:
    """The text of a latency item that did not pass (``where``: the manifest as shown, the device
    and the batch; ``enrich_cmd``: the command that adds to its golden what it lacks)."""
    reason = outcome.reason
    if reason == "golden invalid":
        return f"{outcome.message}\n(only --mlrepro-update replaces it: {update_cmd})"
    if reason == "no golden":
        f = outcome.key or {}
        gpu = f", {f['gpu']}" if f.get("gpu") else ""
        return (
            f"no latency golden for this machine and settings ({f.get('cpu')}, "
            f"{f.get('usable_cpus')} CPUs{gpu}, {f.get('framework')} "
            f"{f.get('framework_version')}, threads "
            f"{f.get('intra_op_threads')}/{f.get('inter_op_threads')}): no "
            f"{outcome.golden_file}; record one with\n  {update_cmd}"
        )
    if reason == "busy":
        return (
            f"latency {outcome.verdict}: the machine was busy in every attempt (other processes "
            f"used at least {outcome.least_contention:.0%} of the CPUs, more than "
            f"mlrepro_latency_max_contention = {outcome.max_contention:g}); rerun on a quiet "
            "machine"
        )
    if reason in ("regression", "contended", "inconclusive"):
        text = explain_latency(outcome, update_cmd, enrich_cmd)
        return f"{where}: {text}" if reason == "regression" else text
    return outcome.message  # unavailable, error: the error's own text


def _host(host: HostFactor) -> str:
    direction = "slower" if host.value >= 1 else "faster"
    return f"this host runs the reference {_fmt_ratio(host)} {direction} than the recording host"


def latency_decided_by(decision: DecisionFacts | None) -> str:
    """In words, which ratio decided a latency verdict, so that a normalised ratio far from 1
    beside ``pass`` is not misread as a missed regression. None: nothing to compare with yet."""
    if decision is None:
        return "not compared: no latency golden for this machine and settings yet"
    verdict, facts, host = decision.verdict, decision.judgements, decision.host
    if not facts:
        return "not compared: no measurement of the golden to compare with"

    def views(fact: tuple[str, Judgement]) -> str:
        name, j = fact
        shown = f"absolute {_fmt_ratio(j.ratio)}"
        if j.normalised is not None:
            shown += f", normalised {_fmt_ratio(j.normalised)}"
        return f"{name} {j.statistic}: {shown}"

    # The judgement that came closest to failing (or that failed): the largest lower bound of
    # the ratios that decide.
    def pressure(fact: tuple[str, Judgement]) -> float:
        j = fact[1]
        return min(j.ratio.low, j.normalised.low if j.normalised is not None else j.ratio.low)

    no_reference = (
        "the golden's reference workload is not comparable with today's"
        if not decision.reference_comparable
        else "no reference workload"
    )
    if verdict == "contended":
        slower = max(facts, key=lambda f: f[1].ratio.low)
        busy = "unknown" if decision.contention is None else f"{decision.contention:.0%}"
        return (
            f"not judged: {views(slower)} above ≤×{slower[1].tolerance:g} while other processes "
            f"used {busy} of the CPUs (more than {decision.max_contention:.0%}): neither ratio "
            "can be trusted"
        )
    if verdict in ("regression", "inconclusive"):
        worst = max([f for f in facts if f[1].outcome == verdict] or facts, key=pressure)
        tol = f"≤×{worst[1].tolerance:g}"
    if verdict == "regression":
        if host is None or worst[1].normalised is None:
            return (
                f"absolute ratio: {views(worst)} confidently above {tol} ({no_reference}: the "
                "absolute ratio alone decides)"
            )
        return (
            f"both ratios: {views(worst)}, each confidently above {tol}; {_host(host)}, which "
            "does not account for it"
        )
    if verdict == "inconclusive":
        assert host is not None  # an inconclusive judgement has a host factor
        why = (
            "the golden's reference workload ran under another numpy, so a slower host cannot "
            "be told from slower software"
            if not decision.host_may_excuse
            else f"the normalised ratio's bounds straddle {tol}: a slower host and a slower "
            "model cannot be told apart"
        )
        return (
            f"inconclusive: {views(worst)}, absolute confidently above {tol}; {_host(host)}; {why}"
        )
    if verdict == "faster":
        name, slowest = max(facts, key=lambda f: f[1].ratio.high)
        both = "absolute ratio" if slowest.normalised is None else "both ratios"
        return (
            f"{both}: {views((name, slowest))} confidently below ×{1 / slowest.tolerance:.2f} "
            f"(1 / tolerance {slowest.tolerance:g}) for every measurement"
        )
    # pass: name the judgement closest to failing and why it did not.
    closest = max(facts, key=pressure)
    c = closest[1]
    tol = f"≤×{c.tolerance:g}"
    if c.normalised is None or host is None:
        return (
            f"absolute ratio: {views(closest)} within {tol} ({no_reference}: the absolute ratio "
            "alone decides)"
        )
    if c.ratio.low > c.tolerance:
        return (
            f"normalised ratio: {_host(host)}; normalised {_fmt_ratio(c.normalised)}, within "
            f"{tol} ({closest[0]} {c.statistic} absolute {_fmt_ratio(c.ratio)}: the host, not "
            "the model)"
        )
    if c.normalised.low > c.tolerance:
        return (
            f"absolute ratio: {views(closest)}; the absolute ratio is within {tol}, and a "
            "regression needs both ratios above it (the normalised one alone is high when the "
            "reference workload ran faster now than at recording)"
        )
    return f"both ratios within {tol}: {views(closest)}"
