"""A drift in words (golden vs now, levels out of tolerance, changed samples); the summary table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._names import record_command
from .._visible import visible
from ..goldens import Comparison
from ..results import Part, Row, combine, top_k_label
from ._text import aligned

_LEVEL_NAMES = {
    "samples": "sample set",
    "top1": "top-1 accuracy",
    "top5": "top-5 accuracy",
    "agreement": "per-sample top-1 agreement",
    "score": "per-sample score distance",
}


def class_label(classes: Sequence[str] | None, index: int) -> str:
    """A class index with its name where the data set names it (``3 cat``)."""
    if classes and 0 <= index < len(classes):
        return f"{index} {visible(classes[index])}"
    return str(index)


def explain(
    c: Comparison,
    golden: str,
    classes: Sequence[str] | None,
    update: str,
    examples: int = 5,
    data: str = "",
) -> str:
    """Golden vs now side by side, the failed levels, a few changed samples, how to re-record.
    ``data``: what changed in the data since the golden, said first."""
    tol = c.tolerances
    failed = c.failures
    lead = ", ".join(_LEVEL_NAMES[f] for f in failed)
    lines = [f"results drifted from the golden ({lead} outside tolerance)"]
    if data:
        lines.append(f"  {data}")
    lines.append("")
    rows = [
        ("", "golden", "now", "change", "tolerance"),
        *(
            (f"top-{k} %", f"{golden:.2f}", f"{now:.2f}", f"{now - golden:+.2f}", f"±{allowed:g}")
            for k, golden, now, allowed in (
                (1, c.golden_top1, c.now_top1, tol.top1),
                (c.k, c.golden_top5, c.now_top5, tol.top5),
            )
        ),
        (
            "top-1 agreement",
            "1.0000",
            f"{c.agreement:.4f}",
            f"{len(c.changed)}/{c.samples} changed",
            f"≥{tol.agreement:g}",
        ),
        (
            "max score diff",
            "0",
            f"{c.max_score_diff:.3g}",
            c.max_score_diff_id or "-",
            f"≤{tol.score:g}",
        ),
    ]
    levels = ["", "top1", "top5", "agreement", "score"]
    lines += aligned(rows, indent="  ", marks=["  ✗" if k and k in failed else "" for k in levels])
    if c.missing or c.extra:
        lines.append("")
        lines.append(
            f"  samples: {len(c.missing)} in the golden but not in this run, "
            f"{len(c.extra)} new in this run (e.g. {(c.missing + c.extra)[:3]})"
        )
    if c.changed:
        lines.append("")
        lines.append(f"  {len(c.changed)} samples changed their top-1 prediction, e.g.:")
        for ch in c.changed[:examples]:
            label_mark = "✓" if ch.now == ch.label else ("was ✓" if ch.golden == ch.label else "")
            lines.append(
                f"    {visible(ch.id)}: {class_label(classes, ch.golden)} "
                f"({ch.golden_score:.3f}) → {class_label(classes, ch.now)} "
                f"({ch.now_score:.3f})  {label_mark}".rstrip()
            )
    lines += [
        "",
        f"  golden: {golden}",
        "  if the change is intended, record a new golden:",
        f"    {update}",
    ]
    return "\n".join(lines)


def summary_table(rows: Sequence[Row]) -> list[str]:
    # The column is headed by its k: with top_k 3 it holds top-3 accuracy, not top-5.
    top_k, note = top_k_label(rows)
    header = ("manifest", "device", "framework", "samples", "top-1", top_k, "agreement", "verdict")
    table = [header]
    for r in rows:
        table.append(
            (
                r.manifest or "",
                r.device or "",
                r.framework or "",
                "" if r.samples is None else str(r.samples),
                _fmt(r.top1),
                _fmt(r.top5) + note(r),
                _fmt(r.agreement, 4),
                _verdict(r),
            )
        )
    return aligned(table)


def _verdict(row: Row) -> str:
    """The verdict, with its runs when rerun (pytest-rerunfailures: the last run's verdict)."""
    verdict = row.verdict or ""
    return verdict if row.runs is None else f"{verdict} ({row.runs} runs)"


def _fmt(value: Any, digits: int = 2) -> str:
    return f"{value:.{digits}f}" if isinstance(value, (int, float)) else "-"


def merged_shards_text(
    where: str,
    merged: Row,
    shards: Sequence[Row],
    manifest_file: str,
    classes: Sequence[str] | None,
) -> str:
    """Why the whole item merged from its shard items' rows (``results.merge_shards``) failed:
    the shard items that failed on their own, else the merged comparison's drift."""
    failed = merged.failed_shards
    if failed:
        named = "\n".join(
            f"  shard {f.shard}: {f.verdict} ({f.nodeid}, see its own report)" for f in failed
        )
        return f"{where}: {len(failed)} of its {len(shards)} shard items failed:\n{named}"
    parts = [Part.of(r.per_sample) for r in shards if r.per_sample is not None]
    assert merged.tolerances is not None  # a merged comparison was made with them
    comparison = combine(parts, merged.tolerances)
    drift = explain(
        comparison,
        merged.golden or "the golden",
        classes,
        record_command(manifest_file),
        # What changed in the data since the golden, as each shard found it in its part.
        data="; ".join(f"shard {r.shard}: {r.data_changed}" for r in shards if r.data_changed),
    )
    return (
        f"{where}: {drift}\n\n(merged from its {len(shards)} shard items, which do not "
        f"diagnose a drift: for its likely cause run\n  mlrepro diagnose {manifest_file})"
    )
