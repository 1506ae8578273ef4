"""The matrix's standard columns, and one row of them from a matrix cell: the same table for one
session (the plugin) and for a merged matrix (``mlrepro merge --html``)."""

from __future__ import annotations

import math
import re

from ...matrix import Cell, status_of
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
# Right-aligned, not wrapped (the top-k column headed by its k).
NUMERIC_COLUMNS = frozenset({*_MEASURES[4:], *(f"top-{k} %" for k in range(1, 5))})


def matrix_columns(top_k: str) -> tuple[str, ...]:
    """:data:`MATRIX_COLUMNS` with the top-5 column headed ``top_k`` (``results.top_k_label``)."""
    return tuple(f"{top_k} %" if c == "top-5 %" else c for c in MATRIX_COLUMNS)


MARK: dict[str, Mark] = {"pass": "pass", "fail": "fail", "not compared": "skip"}
"""A cell's standing (``matrix.CellVerdict``) as the page marks it."""


def _num(value: float | int | None, spec: str) -> str:
    if value is None or isinstance(value, bool):
        return "-"
    return format(value, spec) if math.isfinite(value) else str(value)


def _latency_note(cell: Cell) -> str:
    """The latency cells' hover text: which ratio decided the first (smallest batch) result,
    whether its golden is stale, and every batch's p50 and verdict."""
    first = cell.latency[0]
    notes = [first.decided_by or ""]
    if first.stale_golden is not None:
        ratio = first.stale_golden.ratio
        notes.append(f"stale golden (×{ratio:.2f}): {first.stale_golden.command}")
    for r in cell.latency:
        p50 = "-" if r.p50_ms is None else f"{r.p50_ms:.3g} ms"
        notes.append(f"b{r.batch if r.batch is not None else '?'}: p50 {p50} ({r.verdict})")
    return " — ".join(n for n in notes if n)


def _verdict(cell: Cell) -> str:
    """Each result's verdict: an accuracy item's (or a manifest that did not load) bare, the
    others named by kind, the latency items' together."""
    parts = [r.verdict or r.outcome for r in cell.results if r.kind in ("accuracy", "item")]
    parts += [f"{r.kind}: {r.verdict or r.outcome}" for r in cell.results if r.kind not in (
        "accuracy", "item")]  # fmt: skip
    latency = sorted({r.verdict for r in cell.latency if r.verdict})
    if latency:
        parts.append(f"latency: {', '.join(latency)}")
    return "; ".join(p for p in parts if p)


def _short(fields: tuple[str, ...]) -> str:
    """``decode.order, resize.method``: each field's last two names, the first three."""
    names = list(dict.fromkeys(".".join(re.sub(r"\[\d+\]", "", f).split(".")[-2:]) for f in fields))
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _differs(cell: Cell) -> TableCell:
    """The pipeline / settings cell: in short, what differs (the fields named), and in full (its
    hover text; the page's notes and the failed section say it in full too)."""
    short = []
    if cell.other_pipeline:
        fields = _short(cell.pipeline_fields)
        short.append(f"another pipeline: {fields}" if fields else "another pipeline")
    if cell.other_settings:
        fields = _short(cell.settings_fields)
        short.append(f"other settings: {fields}" if fields else "other settings")
    full = "; ".join(x for x in (cell.other_pipeline, cell.other_settings) if x)
    return TableCell("; ".join(short) or "-", "warn" if short else "", full)


def matrix_row(cell: Cell, anchor: str = "") -> MatrixRow:
    """The row of :data:`MATRIX_COLUMNS` of ``cell``; its verdict links to ``anchor``, the id of
    the row's failure section on the page. Latency: the first (smallest batch) result's."""
    a = cell.accuracy
    failed = set(a.outside_tolerance) if a else set()

    def metric(level: str, value: float | int | None, spec: str) -> TableCell:
        return TableCell(_num(value, spec), "fail" if level in failed else "")

    first = cell.latency[0] if cell.latency else None
    latency: Mark = "fail" if any(status_of(r)[0] == "fail" for r in cell.latency) else ""
    note = _latency_note(cell) if first else ""
    p50 = None if first is None else first.p50_ms
    ratio = None if first is None else first.ratio_to_golden
    d = cell.diagnosis
    cause = d.cause if d is not None and cell.status == "fail" else ""
    status = MARK[cell.status]
    cells = (
        TableCell(cell.manifest),
        TableCell(cell.machine),
        TableCell(cell.device),
        TableCell(cell.framework or "-"),
        TableCell(cell.framework_version or "-"),
        TableCell(_num(a.samples if a else None, "d")),
        metric("top1", a.top1 if a else None, ".2f"),
        metric("top5", a.top5 if a else None, ".2f"),
        metric("agreement", a.agreement if a else None, ".4f"),
        metric("score", a.max_score_diff if a else None, ".3g"),
        *(TableCell(_num(getattr(a, name) if a else None, "g")) for name, _ in LISTED),
        TableCell("-" if p50 is None else f"{p50:.3g} ms", latency, note),
        TableCell("-" if ratio is None else f"×{ratio:.2f}", latency, note),
        TableCell(cause or "-", "fail" if cause else "", "" if d is None else d.lead),
        _differs(cell),
        TableCell(_verdict(cell) or "-", status, "" if d is None else (d.lead or d.cause)),
    )
    return MatrixRow(cell.manifest, cell.machine, cell.device, cells, status, anchor)
