"""The plugin's terminal sections at the end of a session, from the session's rows."""

from __future__ import annotations

import os
from collections.abc import Sequence

from ..data import Shard
from ..latency import STALE_RATIO
from ..results import Measurement, Row
from ._latency import ms
from ._text import aligned, dash


def latency_table(rows: Sequence[Row]) -> list[str]:
    """One line per item and measurement, the item's verdict and which ratio decided it on its
    first line; then the stale goldens with the command that re-records each."""
    table = [
        (
            "manifest",
            "device",
            "batch",
            "measure",
            "golden",
            "now",
            "×golden",
            "×norm",
            "rounds",
            "verdict",
            "decided by",
        )
    ]
    stale: list[str] = []
    for r in sorted(rows, key=lambda r: (str(r.manifest), str(r.device), r.batch or 0)):
        flag, verdict = r.stale_golden, str(r.verdict or "")
        if flag is not None:
            verdict += " (stale golden)"
            stale += [
                f"stale latency golden: {r.manifest} [{r.device}, batch {r.batch}] runs "
                f"at ×{flag.ratio:.2f} of its golden's p50 (below ×{STALE_RATIO:g}: "
                "recorded on a busy machine? against it a real slowdown would pass); re-record:",
                f"  {flag.command}",
            ]
        measured: list[tuple[str, Measurement | None]] = [*(r.measurements or {}).items()]
        measured = measured or [("-", None)]
        for index, (name, m) in enumerate(measured):
            j = m.judgements[0] if m is not None and m.judgements else None
            table.append(
                (
                    str(r.manifest),
                    str(r.device),
                    str(r.batch),
                    name,
                    "-" if j is None else f"{ms(j.golden_ms)} {j.statistic}",
                    ms(j.now_ms if j is not None else m.p50_ms if m is not None else None),
                    dash(None if j is None else j.ratio, "×{:.2f}"),
                    dash(None if j is None else j.normalised, "×{:.2f}"),
                    "-" if m is None else str(m.rounds),
                    verdict if index == 0 else "",
                    str(r.decided_by or "") if index == 0 else "",
                )
            )
    return aligned(table) + (["", *stale] if stale else [])


def reference_lines(rows: Sequence[Row]) -> list[str]:
    """One line per item: manifest [device] vs reference, agreement, max score difference."""
    lines = []
    for r in sorted(rows, key=lambda r: (str(r.manifest), str(r.device))):
        head = f"{r.manifest} [{r.device}] vs {r.reference or '?'}"
        if r.reference_agreement is None:
            lines.append(f"{head}: {r.reference_verdict}")
            continue
        diff, ratio = r.reference_max_score_diff, r.reference_top1_ratio
        lines.append(
            f"{head}: top-1 agreement {r.reference_agreement:.4f} "
            f"over {r.reference_samples} samples, max |Δ {r.reference_score_space or 'score'}| "
            f"{'-' if diff is None else f'{diff:.3g}'}, top-1 ratio "
            f"{float('nan') if ratio is None else ratio:.4f}: {r.reference_verdict}"
        )
    return lines


def note_lines(rows: Sequence[Row]) -> list[str]:
    ordered = sorted(rows, key=lambda r: (str(r.manifest), str(r.device)))
    return [f"{r.manifest} [{r.device}]: {note}" for r in ordered for note in r.notes]


def audit_lines(unused: list[str], broken: list[str], stale: list[str]) -> list[str]:
    """Unused goldens (hedged if manifests failed to load), interrupted writes' temporary files."""
    if not (unused or stale):
        return []
    lines: list[str] = []
    if unused and broken:
        lines.append(
            f"{len(unused)} golden(s) look unused, but {len(broken)} manifest(s) failed to load "
            f"and may use them: {', '.join(broken)}"
        )
    elif unused:
        lines.append(
            f"{len(unused)} golden(s) that no manifest uses (delete them if that is intended):"
        )
    lines += [f"  {path}" for path in unused]
    if stale:
        lines.append(
            f"{len(stale)} temporary file(s) left by interrupted golden writes (ignored; the next "
            "--mlrepro-update of that golden removes them):"
        )
        lines += [f"  {path}" for path in stale]
    return lines


def repeat_lines(count: int) -> list[str]:
    """pytest-repeat's ``--count`` repeats test functions only (its parametrization applies to
    functions): said once, with what repeats an evaluation or a measurement instead."""
    if count <= 1:
        return []
    return [
        f"--count {count} (pytest-repeat) repeats test functions only: each manifest item ran "
        "once.",
        "To evaluate a model again and compare the runs, give its manifest a determinism: block "
        "(runs: 2 to 10); to",
        "measure latency again before a regression is called, latency.attempts; to run a failed "
        "item again, pytest-rerunfailures (--reruns N).",
    ]


def shard_lines(shard: Shard | None, json_target: str | None) -> list[str]:
    if shard is None:
        return []
    keep = f" (this run's: {os.fspath(json_target)})" if json_target else ""
    return [
        f"this run is shard {shard} of every data set: its accuracy items compared their "
        f"shard, their tolerance verdict is the merge's;",
        f"`mlrepro merge` of the results files of all {shard.count} shards gives the "
        f"verdict{keep} (write each with --mlrepro-json).",
    ]
