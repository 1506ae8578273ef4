"""The one builder of the report page, a session's (``--mlrepro-html``) or a merged matrix's
(``mlrepro merge --html``): results rows → the matrix → one :class:`ReportView`."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..._names import enrich_command
from ..._visible import shortened
from ...diagnosis import PitfallTable
from ...matrix import Cell, Matrix, build_matrix, status_of
from ...results import (
    FORMAT,
    Document,
    Environment,
    Machine,
    Row,
    derived_status,
    record,
    top_k_label,
)
from .._matrix_text import machine_columns, machine_notes
from .._operators import operators_lead, operators_text
from .._phases import Table
from ._matrix import MARK, matrix_columns, matrix_row
from ._model import (
    AccuracyPoint,
    ChangedRow,
    CrossMachine,
    DriftSet,
    LatencySeries,
    MachineAgreement,
    MatrixRow,
    MatrixTable,
    MetricChange,
    OperatorSection,
    ReportView,
)
from ._render import fmt


@dataclass(frozen=True)
class SessionParts:
    """What a session's page has beyond its results rows."""

    drift: tuple[DriftSet, ...] = ()
    latency: tuple[LatencySeries, ...] = ()
    sensitivity: tuple[tuple[str, PitfallTable], ...] = ()
    environment: tuple[tuple[str, str], ...] = ()
    notes: tuple[str, ...] = ()
    phases: Table = ((), ())
    """Where each item's time went (``report.phase_table``)."""


def session_view(
    rows: Sequence[Row],
    *,
    machine: str,
    environment: Mapping[str, Any],
    parts: SessionParts,
    subtitle: str = "",
    generated: str = "",
) -> ReportView:
    """The page of one session: :func:`matrix_view` of the one-machine matrix of its rows."""
    # A session that ran shard 1/2 has no shard 2 to merge with: its rows are shown as they are
    # (their verdict says the merge decides).
    whole = tuple(
        replace(
            row, shard=None, status=row.status or derived_status(row.verdict or "", row.outcome)
        )
        for row in rows
    )
    host = Machine(machine, record(Environment, environment))
    matrix = build_matrix([Document(FORMAT, host, None, whole)])
    title = "pytest-mlrepro report"
    return matrix_view(matrix, title=title, subtitle=subtitle, generated=generated, parts=parts)


def latency_series(
    rows: Sequence[tuple[Row, Sequence[Mapping[str, Any]]]],
) -> tuple[LatencySeries, ...]:
    """Every latency measurement's rounds (ms), for the distribution chart, from a session's
    latency rows and their pytest-benchmark entries."""
    series = []
    for r, benchmarks in sorted(rows, key=lambda r: r[0].nodeid):
        for bench in benchmarks:
            name = str((bench.get("params") or {}).get("measurement", ""))
            data = (bench.get("stats") or {}).get("data") or []
            m = (r.measurements or {}).get(name)
            judged = () if m is None else m.judgements
            golden = next((j.golden_ms for j in judged if j.statistic == "p50"), None)
            series.append(
                LatencySeries(
                    label=f"{r.manifest} {r.device} b{r.batch} {name}",
                    rounds_ms=tuple(float(v) * 1e3 for v in data),
                    golden_p50_ms=golden,
                    verdict=str(r.verdict or ""),
                    failed=r.outcome == "failed",
                )
            )
    return tuple(series)


def environment_rows(environment: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """An environment fingerprint as the page shows it: ISA flags space-separated, packages and
    settings as ``name value`` pairs, anything else as JSON."""

    def shown(value: Any) -> str:
        if isinstance(value, str):
            return value
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return " ".join(value) or "none"
        if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
            return ", ".join(f"{k} {v}" for k, v in value.items()) or "none"
        return json.dumps(value)

    return tuple((k, shown(v)) for k, v in sorted(environment.items()))


# --- cells -------------------------------------------------------------------------------------


def _compared_failure(cell: Cell) -> bool:
    """A failed accuracy comparison with something to explain (a golden's numbers, a
    diagnosis or changed samples): it gets a section of its own."""
    a = cell.accuracy
    return (
        a is not None
        and status_of(a)[0] == "fail"
        and (
            a.golden_top1 is not None
            or a.diagnosis_summary is not None
            or a.changed_samples is not None
        )
    )


def _metrics(a: Row) -> tuple[MetricChange, ...]:
    """The golden → now table of a compared accuracy result (a golden agrees with itself, at no
    score distance)."""
    tol = a.tolerances
    levels = (
        ("top1", "top-1 %", a.golden_top1, a.top1, ".2f", "±"),
        ("top5", "top-5 %", a.golden_top5, a.top5, ".2f", "±"),
        ("agreement", "top-1 agreement", 1.0, a.agreement, ".4f", "≥ "),
        ("score", "max score diff", 0.0, a.max_score_diff, ".3g", "≤ "),
    )
    return tuple(
        MetricChange(
            name,
            fmt(golden, spec),
            fmt(now, spec),
            "-" if golden is None or now is None else format(now - golden, "+" + spec),
            "-" if tol is None else f"{bound}{getattr(tol, level):g}",
            level in a.outside_tolerance,
        )
        for level, name, golden, now, spec, bound in levels
    )


def _drift_set(cell: Cell, anchor: str, pictures: DriftSet | None, show_machine: bool) -> DriftSet:
    """A failing item's section: its verdict, the diagnosis (sentence and evidence), the golden
    → now table, the changed samples and, from a session, the first differing step's pictures."""
    a = cell.accuracy
    assert a is not None  # _compared_failure
    d = a.diagnosis_summary
    p = pictures or DriftSet(cell.manifest, "", cell.device, step="")
    changed = a.changed_samples
    return replace(
        p,
        machine=cell.machine if show_machine else "",
        diagnosis="" if d is None else d.cause,
        layers=tuple((depth, shortened(name), delta) for depth, name, delta in p.layers),
        anchor=anchor,
        verdict=a.verdict or "",
        lead="" if d is None else d.lead,
        sections=() if d is None else tuple((s.title, s.lines) for s in d.sections),
        metrics=_metrics(a),
        changed=()
        if changed is None
        else tuple(
            ChangedRow(
                sample=shortened(s.id),  # shown; the results file keeps the whole id
                label=s.label,
                golden=s.golden,
                now=s.now,
                golden_score=s.golden_score,
                now_score=s.now_score,
                thumbnail_png=p.thumbnails.get(s.id, ""),
            )
            for s in changed.samples
        ),
        changed_count=0 if changed is None else changed.count,
        other_pipeline=cell.other_pipeline or "",
        other_settings=cell.other_settings or "",
        thumbnails={},  # shown in ``changed``
    )


# --- the page ----------------------------------------------------------------------------------


def matrix_view(
    matrix: Matrix,
    *,
    title: str = "pytest-mlrepro matrix",
    subtitle: str | None = None,
    generated: str = "",
    parts: SessionParts | None = None,
) -> ReportView:
    """The page of a matrix: one row per cell and a section per failed comparison (with
    ``parts``, a session's pictures and what else only a session has)."""
    machines = sorted({c.machine for c in matrix.cells} | {s.machine for s in matrix.sources})
    pictures = {(d.manifest, d.device): d for d in (parts.drift if parts else ())}
    rows: list[MatrixRow] = []
    points: list[AccuracyPoint] = []
    drift: list[DriftSet] = []
    notes: list[str] = list(parts.notes) if parts else []
    for cell in matrix.cells:
        anchor = ""
        if _compared_failure(cell):
            anchor = f"drift-{len(drift) + 1}"
            shown = pictures.get((cell.manifest, cell.device)) if parts else None
            drift.append(_drift_set(cell, anchor, shown, show_machine=len(machines) > 1))
            if parts and shown is None and cell.accuracy and cell.accuracy.golden_top1 is not None:
                notes.append(
                    f"{cell.manifest} [{cell.device}] drifted; no preprocessing pictures were "
                    "made for it (its results could not be compared sample by sample)"
                )
        rows.append(matrix_row(cell, anchor))
        a = cell.accuracy
        if a is not None and a.top1 is not None:
            tol = a.tolerances
            points.append(
                AccuracyPoint(
                    manifest=cell.manifest,
                    machine=cell.machine,
                    device=cell.device,
                    top1=a.top1,
                    top5=a.top5,
                    golden_top1=a.golden_top1,
                    golden_top5=a.golden_top5,
                    agreement=a.agreement,
                    failed=status_of(a)[0] == "fail",
                    top1_tolerance=None if tol is None else tol.top1,
                    top5_tolerance=None if tol is None else tol.top5,
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
    operators = tuple(
        OperatorSection(
            manifest=c.manifest,
            machine=c.machine,
            device=c.device,
            batch=r.batch,
            lead=operators_lead(r.operators),
            lines=tuple(
                line.removeprefix("  ")  # indented under the terminal's failure text
                for line in operators_text(r.operators, enrich_command(r.nodeid.split("@")[0]))
            ),
        )
        for c in matrix.cells
        for r in c.latency
        if r.operators is not None
    )
    summary = Counter(MARK[cell.status] for cell in matrix.cells)
    notes += [
        f"stale latency golden: {c.manifest} on {c.label} runs at ×{r.stale_golden.ratio:.2f} of "
        f"it; re-record it with {r.stale_golden.command}"
        for c, r in matrix.stale_goldens
        if r.stale_golden is not None
    ]
    # Which machine runs another pipeline, or the same one otherwise: said in full, on top.
    notes += [
        f"{c.manifest} on {c.label}: {text}"
        for c in matrix.cells
        for text in (c.other_pipeline, c.other_settings)
        if text
    ]
    if not matrix.cells:
        notes.append("no manifest item ran" + (" in this session" if parts else ""))
    top_k, _ = top_k_label(cell.accuracy for cell in matrix.cells)
    if subtitle is None:
        subtitle = f"{len(matrix.sources)} results files · machines: {', '.join(machines)}"
    return ReportView(
        title=title,
        matrix=MatrixTable(columns=matrix_columns(top_k), rows=tuple(rows)),
        top_k=top_k,
        subtitle=subtitle,
        generated=generated,
        accuracy=tuple(points),
        latency=parts.latency if parts else (),
        operators=operators,
        sensitivity=parts.sensitivity if parts else (),
        cross_machine=CrossMachine(pairs=pairs, flagged=flagged) if pairs else None,
        drift=tuple(drift),
        notes=tuple(notes),
        environment=parts.environment if parts else _environment(matrix),
        phases=parts.phases if parts else ((), ()),
        summary={k: summary[k] for k in ("fail", "pass", "skip") if k in summary},
    )


def _environment(matrix: Matrix) -> tuple[tuple[str, str], ...]:
    """The results files; one row per machine that records its CPU flags or numeric packages: CPU,
    ISA flags, the numeric packages that differ between machines and its settings; the notes."""
    rows = [
        (s.path, f"{s.machine}{f' shard {s.shard}' if s.shard else ''}") for s in matrix.sources
    ]
    machines = []
    for m in matrix.machines:
        if m.environment.cpu_flags is None and m.environment.numeric_packages is None:
            continue
        cpu, flags, packages, settings = machine_columns(matrix, m)
        parts = [cpu, f"ISA flags: {flags}"]
        if packages != "-":
            parts.append(f"numeric packages that differ: {packages}")
        if settings != "-":
            parts.append(f"numeric settings: {settings}")
        machines.append((m.name, " · ".join(parts)))
    if machines:
        machines += [("machines", note) for note in machine_notes(matrix)]
    return tuple(rows + machines)
