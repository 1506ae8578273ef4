"""A reference check in words: why a run disagrees with its reference manifest's golden."""

from __future__ import annotations

from collections.abc import Sequence

from .._visible import visible
from ..goldens import ReferenceCheck
from ._tables import class_label
from ._text import aligned


def explain_reference(
    check: ReferenceCheck, classes: Sequence[str] | None = None, examples: int = 5
) -> str:
    """The failure text: reference vs now, which levels fail, a few disagreeing samples."""
    tol, c = check.tolerances, check.comparison
    names = {"samples": "shared samples", "agreement": "top-1 agreement",
             "score": "score distance", "top1": "accuracy ratio"}  # fmt: skip
    failed = check.failures
    lines = [
        f"disagrees with its reference {check.name!r} ({check.golden}): "
        + ", ".join(names[f] for f in failed)
        + " outside tolerance",
        "",
    ]
    if "samples" in failed:
        lines.append("  no sample of this run is in the reference's golden")
        return "\n".join(lines)
    rows = [
        ("", "reference", "now", "", "tolerance", "top1"),
        (
            "top-1 %",
            f"{check.reference_top1:.2f}",
            f"{check.now_top1:.2f}",
            f"ratio {check.top1_ratio:.4f}",
            f"≥{tol.top1:g} × reference",
            "top1",
        ),
        (
            "top-1 agreement",
            "1.0000",
            f"{c.agreement:.4f}",
            f"{len(c.changed)}/{c.samples} differ",
            f"≥{tol.agreement:g}",
            "agreement",
        ),
        (
            f"max |Δ {check.score_space}|",
            "0",
            f"{c.max_score_diff:.3g}",
            c.max_score_diff_id or "-",
            f"≤{tol.score:g}",
            "score",
        ),
    ]
    marks = ["  ✗" if i and row[5] in failed else "" for i, row in enumerate(rows)]
    lines += aligned([row[:5] for row in rows], indent="  ", marks=marks)
    if c.extra:
        lines.append(f"  ({len(c.extra)} samples of this run are not in the reference)")
    if c.changed:
        lines += ["", f"  {len(c.changed)} samples predict another top-1 class, e.g.:"]
        for ch in c.changed[:examples]:
            lines.append(
                f"    {visible(ch.id)}: reference {class_label(classes, ch.golden)} "
                f"({ch.golden_score:.3g}) → {class_label(classes, ch.now)} ({ch.now_score:.3g})"
            )
    return "\n".join(lines)
