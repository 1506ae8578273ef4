"""The merged matrix as the HTML report's view model (``mlrepro merge --html``): the same page as
one session's report (``--mlrepro-html``), filled from what the results files hold — the matrix,
accuracy and agreement per machine, cross-machine agreement with the flagged machines, stale
latency goldens. Drift pictures are the session report's: they need the pipelines, which a
results file does not carry."""

from __future__ import annotations

from datetime import datetime, timezone

from ..report.html import (
    MATRIX_COLUMNS,
    AccuracyPoint,
    CrossMachine,
    MachineAgreement,
    ReportView,
    Status,
    matrix_row,
)
from ..report.html import Matrix as MatrixTable
from ._model import Cell, Matrix
from ._text import machine_columns, machine_notes

_STATUS: dict[str, Status] = {"pass": "pass", "fail": "fail", "not compared": "skip"}


def _latency_of(cell: Cell) -> tuple[float | None, float | None, bool, str]:
    """The cell's first latency result: p50, ratio to the golden, failed, and in words which
    ratio decided and whether the golden is stale."""
    if not cell.latency:
        return None, None, False, ""
    first = cell.latency[0]
    note = first.decided_by or ""
    if first.stale_golden is not None:
        note += f" — stale golden (×{first.stale_golden.ratio:.2f}): {first.stale_golden.command}"
    return first.p50_ms, first.ratio_to_golden, first.status == "fail", note.strip(" —")


def report_view(matrix: Matrix, title: str = "pytest-mlrepro matrix") -> ReportView:
    """The report page of a merged matrix."""
    rows = []
    points = []
    for cell in matrix.cells:
        accuracy = cell.accuracy
        p50, ratio, latency_failed, latency_note = _latency_of(cell)
        notes = [f"pipeline differs: {cell.other_pipeline}"] if cell.other_pipeline else []
        rows.append(
            matrix_row(
                manifest=cell.manifest,
                machine=cell.machine,
                device=cell.device,
                status=_STATUS[cell.status],
                verdict=cell.verdict,
                framework=cell.framework or "",
                version=cell.framework_version or "",
                samples=accuracy.samples if accuracy else None,
                top1=accuracy.top1 if accuracy else None,
                top5=accuracy.top5 if accuracy else None,
                agreement=accuracy.agreement if accuracy else None,
                max_score_diff=accuracy.max_score_diff if accuracy else None,
                latency_p50_ms=p50,
                latency_ratio=ratio,
                latency_failed=latency_failed,
                latency_note=latency_note,
                verdict_note="; ".join(notes),
            )
        )
        if accuracy is not None and accuracy.top1 is not None:
            points.append(
                AccuracyPoint(
                    manifest=cell.manifest,
                    machine=cell.machine,
                    device=cell.device,
                    top1=accuracy.top1,
                    top5=accuracy.top5,
                    agreement=accuracy.agreement,
                    failed=accuracy.status == "fail",
                )
            )
    pairs = tuple(
        MachineAgreement(
            manifest=m.manifest,
            machine_a=p.first,
            machine_b=p.second,
            top1_agreement=p.fraction if p.fraction is not None else 0.0,
            max_score_diff=p.max_score_diff,
            samples=p.shared,
            flagged=p.first in m.flagged or p.second in m.flagged,
        )
        for m in matrix.agreement
        for p in m.pairs
    )
    flagged = tuple((m.manifest, m.flagged) for m in matrix.agreement if m.flagged)
    summary: dict[str, int] = {}
    for cell in matrix.cells:
        summary[_STATUS[cell.status]] = summary.get(_STATUS[cell.status], 0) + 1
    notes = [
        f"stale latency golden: {c.manifest} on {c.label} runs at ×{r.stale_golden.ratio:.2f} of "
        f"it; re-record it with {r.stale_golden.command}"
        for c, r in matrix.stale_goldens
        if r.stale_golden is not None
    ]
    notes += [
        f"{m.manifest}: the machines ran different pipelines (manifest digests differ)"
        for m in matrix.agreement
        if m.pipelines_differ
    ]
    machines = sorted({s.machine for s in matrix.sources})
    return ReportView(
        title=title,
        matrix=MatrixTable(columns=MATRIX_COLUMNS, rows=tuple(rows)),
        subtitle=f"{len(matrix.sources)} results files · machines: {', '.join(machines)}",
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        accuracy=tuple(points),
        cross_machine=CrossMachine(pairs=pairs, flagged=flagged) if pairs else None,
        notes=tuple(notes),
        environment=tuple(
            (s.path, f"{s.machine}{f' shard {s.shard}' if s.shard else ''}") for s in matrix.sources
        )
        + _machine_rows(matrix),
        summary=summary,
    )


def _machine_rows(matrix: Matrix) -> tuple[tuple[str, str], ...]:
    """One environment row per machine that records its CPU flags or numeric packages: CPU, ISA
    flags, the numeric packages that differ between machines and its settings; then the notes."""
    rows = []
    for m in matrix.machines:
        if m.cpu_flags is None and m.numeric_packages is None:
            continue
        cpu, flags, packages, settings = machine_columns(matrix, m)
        parts = [cpu, f"ISA flags: {flags}"]
        if packages != "-":
            parts.append(f"numeric packages that differ: {packages}")
        if settings != "-":
            parts.append(f"numeric settings: {settings}")
        rows.append((m.machine, " · ".join(parts)))
    if rows:
        rows += [("machines", note) for note in machine_notes(matrix)]
    return tuple(rows)
