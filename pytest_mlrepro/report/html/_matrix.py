"""The matrix's standard columns, and one row of them from plain numbers: the same table for one
session (the plugin) and for a merged matrix (``mlrepro merge --html``)."""

from __future__ import annotations

import math
from collections.abc import Collection

from ._model import Cell, MatrixRow, Status

MATRIX_COLUMNS = (
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
    "latency p50",
    "×golden",
    "verdict",
)
LEVELS = ("top1", "top5", "agreement", "score")  # the comparison's levels (Comparison.failures)


def _num(value: float | int | None, spec: str) -> str:
    if value is None or isinstance(value, bool):
        return "-"
    return format(value, spec) if math.isfinite(value) else str(value)


def matrix_row(
    *,
    manifest: str,
    machine: str,
    device: str,
    status: Status,
    verdict: str,
    framework: str = "",
    version: str = "",
    samples: int | None = None,
    top1: float | None = None,
    top5: float | None = None,
    agreement: float | None = None,
    max_score_diff: float | None = None,
    failed_levels: Collection[str] = (),
    latency_p50_ms: float | None = None,
    latency_ratio: float | None = None,
    latency_failed: bool = False,
    latency_note: str = "",
    verdict_note: str = "",
    anchor: str = "",
) -> MatrixRow:
    """A row of :data:`MATRIX_COLUMNS`: accuracies in percent, agreement a fraction,
    ``failed_levels`` the comparison levels outside tolerance (their cells are marked),
    ``latency_note`` the hover text of the latency cells (e.g. which ratio decided the verdict),
    ``verdict_note`` the verdict's (e.g. the diagnosis), ``anchor`` the id of the row's drift
    pictures on the page (the verdict links there)."""
    failed = set(failed_levels)

    def metric(level: str) -> Status:
        return "fail" if level in failed else ""

    latency: Status = "fail" if latency_failed else ""
    cells = (
        Cell(manifest),
        Cell(machine),
        Cell(device),
        Cell(framework or "-"),
        Cell(version or "-"),
        Cell(_num(samples, "d")),
        Cell(_num(top1, ".2f"), metric("top1")),
        Cell(_num(top5, ".2f"), metric("top5")),
        Cell(_num(agreement, ".4f"), metric("agreement")),
        Cell(_num(max_score_diff, ".3g"), metric("score")),
        Cell("-" if latency_p50_ms is None else f"{latency_p50_ms:.3g} ms", latency, latency_note),
        Cell("-" if latency_ratio is None else f"×{latency_ratio:.2f}", latency, latency_note),
        Cell(verdict or "-", status, verdict_note),
    )
    return MatrixRow(manifest, machine, device, cells, status, anchor)
