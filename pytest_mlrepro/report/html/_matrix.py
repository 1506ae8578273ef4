"""The matrix's standard columns, and one row of them from plain numbers: the same table for one
session (the plugin) and for a merged matrix (``mlrepro merge --html``)."""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

from ...results import LISTED
from ._model import Mark, MatrixRow, TableCell

_MEASURES = (
    "manifest",
    "machine",
    "device",
    "framework",
    "version",
    "samples",
    "top-1 %",
    "top-5 %",
    "agreement",
    "max score diff",
    *(label for _, label in LISTED),  # the result's fields listed as they are
    "latency p50",
    "×golden",
)
MATRIX_COLUMNS = (*_MEASURES, "likely cause", "pipeline / settings", "verdict")
NUMERIC_COLUMNS = frozenset(_MEASURES[4:])  # right-aligned, not wrapped


def _num(value: float | int | None, spec: str) -> str:
    if value is None or isinstance(value, bool):
        return "-"
    return format(value, spec) if math.isfinite(value) else str(value)


def matrix_row(
    *,
    manifest: str,
    machine: str,
    device: str,
    status: Mark,
    verdict: str,
    framework: str = "",
    version: str = "",
    samples: int | None = None,
    top1: float | None = None,
    top5: float | None = None,
    agreement: float | None = None,
    max_score_diff: float | None = None,
    listed: Sequence[float | int | None] = (),
    failed_levels: Collection[str] = (),
    latency_p50_ms: float | None = None,
    latency_ratio: float | None = None,
    latency_failed: bool = False,
    latency_note: str = "",
    verdict_note: str = "",
    anchor: str = "",
    cause: str = "",
    cause_note: str = "",
    differs: str = "",
    differs_note: str = "",
) -> MatrixRow:
    """A row of :data:`MATRIX_COLUMNS`: accuracies in percent, agreement a fraction,
    ``failed_levels`` the comparison levels outside tolerance (their cells are marked),
    ``latency_note`` the hover text of the latency cells (e.g. which ratio decided the verdict),
    ``verdict_note`` the verdict's, ``anchor`` the id of the row's failure section on the page
    (the verdict links there), ``cause`` the diagnosis' cause (its sentence: ``cause_note``),
    ``differs`` what of its pipeline or settings differs from the manifest's other cells,
    ``listed`` the values of the accuracy result's :data:`results.LISTED` fields."""
    failed = set(failed_levels)

    def metric(level: str) -> Mark:
        return "fail" if level in failed else ""

    latency: Mark = "fail" if latency_failed else ""
    cells = (
        TableCell(manifest),
        TableCell(machine),
        TableCell(device),
        TableCell(framework or "-"),
        TableCell(version or "-"),
        TableCell(_num(samples, "d")),
        TableCell(_num(top1, ".2f"), metric("top1")),
        TableCell(_num(top5, ".2f"), metric("top5")),
        TableCell(_num(agreement, ".4f"), metric("agreement")),
        TableCell(_num(max_score_diff, ".3g"), metric("score")),
        *(TableCell(_num(value, "g")) for value in (tuple(listed) or (None,) * len(LISTED))),
        TableCell(
            "-" if latency_p50_ms is None else f"{latency_p50_ms:.3g} ms", latency, latency_note
        ),
        TableCell("-" if latency_ratio is None else f"×{latency_ratio:.2f}", latency, latency_note),
        TableCell(cause or "-", "fail" if cause else "", cause_note),
        TableCell(differs or "-", "warn" if differs else "", differs_note),
        TableCell(verdict or "-", status, verdict_note),
    )
    return MatrixRow(manifest, machine, device, cells, status, anchor)
