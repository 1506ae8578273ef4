"""Latency in words: the milliseconds shown, and why a latency item failed (or was not judged)
against its golden, with the table of ratios that decided it."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from ..latency import DecisionFacts, Judgement, LatencyOutcome, findings_json
from ..results import Operators, record
from ._operators import operators_text
from ._text import aligned


def fmt_ms(seconds: float) -> str:
    """``0.0203 ms``, ``7.21 ms``, ``10.0 ms``, ``151 ms``: three significant digits."""
    value = seconds * 1e3
    return f"{value:.0f} ms" if value >= 100 else f"{value:#.3g} ms"


def _fmt_ratio(r: Any) -> str:
    return f"×{r.value:.2f} [{r.low:.2f}–{r.high:.2f}]"


def _plain(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


def explain_latency(outcome: LatencyOutcome, update_cmd: str, enrich_cmd: str = "") -> str:
    """Why a latency item failed (or was not judged), with every number needed to believe it:
    the judgements of its concluding attempt against ``outcome.baseline``, golden vs now, one
    line per measurement and statistic, as a table."""
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
            {"regression": "✗", "faster": "faster"}.get(j.outcome, ""),
        )
        for name, js in a.judgements.items()
        for j in js
    ]
    lines = [lead, "", *aligned(rows, indent="  ")]
    ref_now = float(np.median(a.attempt.reference_seconds))
    ref_golden = float(np.median(baseline.reference_samples))
    lines.append("")
    if a.normalised:
        lines.append(
            f"  reference workload p50: {fmt_ms(ref_golden)} at recording, {fmt_ms(ref_now)} "
            f"now (machine ×{ref_now / ref_golden:.2f}; after/before the model "
            f"×{a.attempt.reference_drift:.2f})"
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
    else:
        lines += ["  if the change is intended, record a new golden:", f"    {update_cmd}"]
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "unknown" if value is None or not math.isfinite(value) else f"{value:.0%}"


def latency_outcome_text(
    outcome: LatencyOutcome, update_cmd: str, where: str, enrich_cmd: str = ""
) -> str:
    """The text of a latency item that did not pass (``where``: the manifest as shown, the
    device and the batch; ``update_cmd``: the command that re-records its golden,
    ``enrich_cmd`` the one that adds what it lacks)."""
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
    if reason in ("regression", "contended"):
        text = explain_latency(outcome, update_cmd, enrich_cmd)
        return text if reason == "contended" else f"{where}: {text}"
    return outcome.message  # unavailable, error: the error's own text


def _x(value: float) -> str:
    return f"×{value:.2f}"


def latency_decided_by(decision: DecisionFacts | None) -> str:
    """In words, which ratio decided a latency verdict (``pass``, ``faster``, ``regression``,
    ``contended``), so that a normalised ratio far from 1 beside ``pass`` is not misread as a
    missed regression; the rules behind it are :class:`~pytest_mlrepro.latency.DecisionFacts`'.
    None: nothing to compare with yet (no golden for this machine and settings)."""
    if decision is None:
        return "not compared: no latency golden for this machine and settings yet"
    verdict, facts = decision.verdict, decision.judgements
    contention, idle_contention = decision.contention, decision.idle_contention
    reference_comparable, max_contention = decision.reference_comparable, decision.max_contention
    if not facts:
        return "not compared: no measurement of the golden to compare with"
    idle = contention is not None and contention <= idle_contention
    absolute_only = idle or not reference_comparable
    why_absolute = (
        "the machine was idle, so the reference workload may not excuse a slowdown"
        if idle
        else "the golden's reference workload differs from today's"
    )

    def views(fact: tuple[str, Judgement]) -> str:
        name, j = fact
        shown = f"absolute {_x(j.ratio.value)}"
        if j.normalised is not None:
            shown += f", normalised {_x(j.normalised.value)}"
        return f"{name} {j.statistic}: {shown}"

    # The judgement that came closest to failing (or that failed): the largest lower bound of
    # the ratios that decide.
    def pressure(fact: tuple[str, Judgement]) -> float:
        j = fact[1]
        lows = [j.ratio.low]
        if not absolute_only and j.normalised is not None:
            lows.append(j.normalised.low)
        return min(lows)

    if verdict == "contended":
        slower = max(facts, key=lambda f: f[1].ratio.low)
        busy = "unknown" if contention is None else f"{contention:.0%}"
        return (
            f"not judged: {views(slower)} above ≤×{slower[1].tolerance:g} while other processes "
            f"used {busy} of the CPUs (more than {max_contention:.0%}): neither ratio can be "
            "trusted"
        )
    if verdict == "regression":
        failed = [f for f in facts if f[1].outcome == "regression"] or list(facts)
        worst = max(failed, key=pressure)
        tolerance = worst[1].tolerance
        if absolute_only or worst[1].normalised is None:
            return (
                f"absolute ratio: {views(worst)} confidently above ≤×{tolerance:g} "
                f"({why_absolute if absolute_only else 'no reference workload'}: the absolute "
                "ratio alone decides)"
            )
        return (
            f"both ratios: {views(worst)}, each confidently above ≤×{tolerance:g} (a "
            "slower machine would raise the absolute ratio only)"
        )
    if verdict == "faster":
        name, slowest = max(facts, key=lambda f: f[1].ratio.high)
        below = (
            f"confidently below ×{1 / slowest.tolerance:.2f} (1 / tolerance {slowest.tolerance:g})"
        )
        if absolute_only or slowest.normalised is None:
            # The normalised ratio is named apart: it did not decide, and beside "below" it would
            # read as if it were below too.
            unused = (
                ""
                if slowest.normalised is None
                else f"; normalised {_x(slowest.normalised.value)} not used: {why_absolute}"
            )
            return (
                f"absolute ratio: {name} {slowest.statistic}: absolute "
                f"{_x(slowest.ratio.value)} {below} for every measurement{unused}"
            )
        return f"both ratios: {views((name, slowest))} {below} for every measurement"
    # pass: name the judgement closest to failing and why it did not.
    closest = max(facts, key=pressure)
    c = closest[1]
    tol = f"≤×{c.tolerance:g}"
    if absolute_only or c.normalised is None:
        reason = why_absolute if absolute_only else "no reference workload"
        return (
            f"absolute ratio: {views(closest)} within {tol} ({reason}: the absolute ratio "
            "alone decides)"
        )
    absolute_over = c.ratio.low > c.tolerance
    normalised_over = c.normalised.low > c.tolerance
    if normalised_over and not absolute_over:
        return (
            f"absolute ratio: {views(closest)}; the absolute ratio is within {tol}, and a "
            "regression needs both ratios above it (the normalised one alone is high when the "
            "reference workload ran faster now than at recording)"
        )
    if absolute_over and not normalised_over:
        return (
            f"normalised ratio: {views(closest)}; the machine itself runs the reference "
            f"workload slower now, and the normalised ratio is within {tol} (a regression needs "
            "both ratios above it)"
        )
    return f"both ratios within {tol}: {views(closest)}"


__all__ = [
    "explain_latency",
    "fmt_ms",
    "latency_decided_by",
    "latency_outcome_text",
]
