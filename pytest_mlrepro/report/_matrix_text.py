"""The matrix as text (Markdown, CSV) and the history of many nights in words."""

from __future__ import annotations

import csv
import dataclasses
import io
from collections.abc import Callable, Sequence

from ..matrix import Cell, History, ManifestAgreement, Matrix, status_of
from ..results import LISTED, Machine, Row, top_k_label
from ._latency import ms
from ._text import dash

STATUS_MARK = {"pass": "pass", "fail": "**FAIL**", "not compared": "not compared"}


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table, and the blank line that ends it."""
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    safe = [[c.replace("|", "\\|").replace("\n", " ") for c in row] for row in rows]  # in a cell
    return lines + ["| " + " | ".join(row) + " |" for row in safe] + [""]


def _latency_summary(results: Sequence[Row]) -> tuple[str, str]:
    """The cell's latency p50 and ratio to its golden: each batch's (named where there are
    several)."""
    named = [f"b{r.batch} " if len(results) > 1 and r.batch is not None else "" for r in results]
    p50 = "; ".join(b + ms(r.p50_ms) for b, r in zip(named, results))
    ratio = "; ".join(
        b + dash(r.ratio_to_golden, "×{:.2f}") + (" (stale golden)" if r.stale_golden else "")
        for b, r in zip(named, results)
    )
    return p50 or "-", ratio or "-"


def _pipeline(cell: Cell) -> str:
    digest = "-" if cell.manifest_digest is None else cell.manifest_digest[:12]
    return digest + (" (differs)" if cell.other_pipeline else "")


def _accuracy(field: str, template: str) -> Callable[[Cell], str]:
    # The results file keeps top-1 and top-5 in percent ("{:.2f}%"), the agreement as a fraction.
    return lambda c: dash(None if c.accuracy is None else getattr(c.accuracy, field), template)


# The results table: (header, the cell's text); the top-5 column is headed by its k.
_RESULT_COLUMNS: tuple[tuple[str, Callable[[Cell], str]], ...] = (
    ("manifest", lambda c: c.manifest),
    ("pipeline", _pipeline),
    ("machine", lambda c: c.machine),
    ("device", lambda c: c.device),
    ("framework", lambda c: f"{c.framework or '-'} {c.framework_version or ''}".strip()),
    ("top-1", _accuracy("top1", "{:.2f}%")),
    ("top-5", _accuracy("top5", "{:.2f}%")),
    ("agrees with golden", _accuracy("agreement", "{:.2%}")),
    ("latency p50", lambda c: _latency_summary(c.latency)[0]),
    ("×golden", lambda c: _latency_summary(c.latency)[1]),
    ("verdict", lambda c: STATUS_MARK[c.status] + ("" if c.status == "pass" else f": {c.verdict}")),
)
_LATENCY_COLUMNS: tuple[tuple[str, Callable[[Cell, Row], str]], ...] = (
    ("manifest", lambda c, r: c.manifest),
    ("machine", lambda c, r: c.machine),
    ("device", lambda c, r: c.device),
    ("batch", lambda c, r: "-" if r.batch is None else str(r.batch)),
    ("p50", lambda c, r: ms(r.p50_ms)),
    ("golden p50", lambda c, r: ms(r.golden_p50_ms)),
    ("×golden", lambda c, r: dash(r.ratio_to_golden, "×{:.2f}")),
    ("verdict", lambda c, r: f"{r.verdict}{' (stale golden)' if r.stale_golden else ''}"),
    ("decided by", lambda c, r: r.decided_by or "-"),
)


def _agreement_lines(agreement: ManifestAgreement) -> list[str]:
    lines = [f"### {agreement.manifest}", ""]
    if agreement.pipelines_differ:
        shown = ", ".join(
            f"{label}: {'-' if d is None else d[:12]}" for label, d in agreement.digests
        )
        lines += [
            "The pipelines differ (manifest digests " + shown + "): pairs of different "
            "pipelines are marked; their disagreement is the pipelines', not only the machines'.",
            "",
        ]
    rows = [
        [
            p.first,
            p.second,
            str(p.shared),
            "-" if p.fraction is None else f"{p.fraction:.2%} ({p.agree}/{p.shared})",
            dash(p.max_score_diff, "{:.3g}"),
            "yes" if p.same_pipeline else "**no**",
        ]
        for p in agreement.pairs
    ]
    lines += _table(
        ["machine", "machine", "samples", "top-1 agrees", "largest score diff", "same pipeline"],
        rows,
    )
    for d in agreement.dissent:
        if d.flagged:
            lines.append(
                f"- **{d.participant}** disagrees with the per-sample majority on {d.disagree} of "
                f"{d.judged} samples (e.g. {', '.join(d.examples)})"
            )
    if not agreement.flagged:
        lines.append("- every machine agrees with the per-sample majority")
    lines.append("")
    return lines


def machine_columns(matrix: Matrix, machine: Machine) -> tuple[str, str, str, str]:
    """A machine's CPU, ISA flags, the numeric packages whose versions differ between the
    machines, and its numeric settings ("not recorded" where its results file does not say)."""
    m = machine.environment
    cpu = m.cpu or "-"
    if m.cpu_vendor and m.cpu_vendor not in cpu:
        cpu += f" ({m.cpu_vendor})"
    flags = "not recorded" if m.cpu_flags is None else " ".join(m.cpu_flags) or "none known"
    if m.numeric_packages is None:
        packages = "not recorded"
    else:
        packages = (
            ", ".join(
                f"{p} {m.numeric_packages.get(p) or 'not installed'}"
                for p in matrix.differing_packages
            )
            or "-"
        )
    settings = ", ".join(f"{k}={v}" for k, v in sorted((m.numeric_settings or {}).items())) or "-"
    return cpu, flags, packages, settings


def machine_notes(matrix: Matrix) -> list[str]:
    """Where the machines differ in ISA flags, and the numeric packages that are the same on
    every machine (so that the table names only the differences)."""
    notes = []
    partial = matrix.flags_not_everywhere
    if partial:
        notes.append(
            "ISA flags not on every machine: "
            + ", ".join(f"{flag} ({', '.join(names)})" for flag, names in partial.items())
        )
    same = [
        f"{p} {next(iter(v.values()))}"
        for p, v in matrix.package_versions.items()
        if p not in matrix.differing_packages
    ]
    if same:
        notes.append("numeric packages the same on every machine: " + ", ".join(same))
    return notes


def _machine_lines(matrix: Matrix) -> list[str]:
    """The machines table, when any results file records its CPU flags or numeric packages."""
    environments = [m.environment for m in matrix.machines]
    if all(e.cpu_flags is None and e.numeric_packages is None for e in environments):
        return []
    lines = ["## Machines", ""]
    lines += _table(
        ["machine", "CPU", "ISA flags", "numeric packages that differ", "numeric settings"],
        [[m.name, *machine_columns(matrix, m)] for m in matrix.machines],
    )
    lines += [f"- {note}" for note in machine_notes(matrix)]
    if matrix.machines:
        lines.append("")
    return lines


def markdown(matrix: Matrix) -> str:
    """The whole matrix as Markdown, the verdict line first."""
    machines = sorted({s.machine for s in matrix.sources})
    failed, skipped = matrix.failed, matrix.not_compared
    if matrix.ok:
        head = f"**PASSED**: {len(matrix.cells)} cells, none failed"
    elif failed:
        head = f"**FAILED**: {len(failed)} of {len(matrix.cells)} cells failed"
    else:
        head = "**FAILED**: no result was compared"
    if skipped:
        head += f" ({len(skipped)} not compared)"
    flagged = [f"{label} on {a.manifest}" for a in matrix.agreement for label in a.flagged]
    if flagged:
        # Not a failure of its own (each cell's verdict is its comparison with its golden), but
        # the line people read first must not hide it.
        head += "; disagrees with the other machines: " + ", ".join(flagged)
    lines = [
        "# mlrepro matrix",
        "",
        head,
        "",
        f"{len(matrix.sources)} results files, {len(machines)} machines: {', '.join(machines)}",
        "",
        "## Results",
        "",
    ]
    top_k = top_k_label(c.accuracy for c in matrix.cells)[0]
    lines += _table(
        [top_k if name == "top-5" else name for name, _ in _RESULT_COLUMNS],
        [[text(c) for _, text in _RESULT_COLUMNS] for c in matrix.cells],
    )
    latency = [(c, r) for c in matrix.cells for r in c.latency]
    if latency:
        lines += ["## Latency", ""]
        lines += _table(
            [name for name, _ in _LATENCY_COLUMNS],
            [[text(c, r) for _, text in _LATENCY_COLUMNS] for c, r in latency],
        )
    if matrix.agreement:
        lines += ["## Cross-machine agreement", ""]
        for agreement in matrix.agreement:
            lines += _agreement_lines(agreement)
    lines += _machine_lines(matrix)
    others = [c for c in matrix.cells if c.other_pipeline]
    settings = [c for c in matrix.cells if c.other_settings]
    if failed or others or skipped or settings:
        lines += ["## Problems", ""]
        lines += [f"- {c.manifest} on {c.label}: failed: {c.verdict}{_cause(c)}" for c in failed]
        lines += [f"- {c.manifest} on {c.label}: not compared: {c.verdict}" for c in skipped]
        lines += [f"- {c.manifest} on {c.label}: {c.other_pipeline}" for c in others]
        lines += [f"- {c.manifest} on {c.label}: {c.other_settings}" for c in settings]
        lines.append("")
    if matrix.stale_goldens:
        lines += ["## Stale latency goldens", ""]
        for c, r in matrix.stale_goldens:
            assert r.stale_golden is not None
            lines.append(
                f"- {c.manifest} on {c.label}, batch {r.batch}: now ×{r.stale_golden.ratio:.2f} "
                "of its golden (recorded on a busy machine? against it a real slowdown passes); "
                f"re-record on that machine: `{r.stale_golden.command}`"
            )
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def _cause(cell: Cell) -> str:
    """`` — <the diagnosis' lead sentence>`` (or its cause) for a diagnosed cell."""
    d = cell.diagnosis
    if d is None:
        return ""
    return f" — {d.lead}" if d.lead else f" — likely cause: {d.cause}"


CSV_COLUMNS = (
    "row",
    "manifest",
    "manifest_digest",
    "machine",
    "device",
    "framework",
    "framework_version",
    "hardware_slug",
    "kind",
    "batch",
    "samples",
    "top1",
    "top5",
    "agreement",
    "max_score_diff",
    *(name for name, _ in LISTED),
    "p50_ms",
    "golden_p50_ms",
    "ratio_to_golden",
    "verdict",
    "status",
    "decided_by",
    "stale_golden_command",
    "other_pipeline",
    "other_machine",
    "same_pipeline",
    "flagged",
)
"""``row`` is ``result`` (one per item of a cell) or ``agreement`` (one per pair: ``machine``
and ``other_machine``, the shared ``samples``, ``agreement`` the share whose top-1 agrees,
``max_score_diff``; ``flagged`` names those of the two that disagree with the majority)."""


_ROW_COLUMNS = tuple(c for c in CSV_COLUMNS if c in {f.name for f in dataclasses.fields(Row)})
"""The columns that are a result's own :class:`~pytest_mlrepro.results.Row` fields (a field of
another kind's row is empty)."""
_CELL_COLUMNS = tuple(c for c in CSV_COLUMNS if c in {f.name for f in dataclasses.fields(Cell)})
"""The columns that are the cell's own fields (its manifest, machine, device, framework...): the
same in each of its results' lines."""


FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")
"""What a spreadsheet evaluates a text cell by (OWASP, "CSV Injection"): a cell starting with one
of them is written with a single quote before it."""


def inert_cell(value: object) -> object:
    """A CSV cell a spreadsheet shows as text (OWASP's recommendation: ``=HYPERLINK(…)`` is shown,
    not followed; ``+cmd|…`` is not run). Numbers are numbers: a negative one stays as it is."""
    if isinstance(value, str) and value.startswith(FORMULA_LEADS):
        return "'" + value
    return value


def csv_text(matrix: Matrix) -> str:
    """The matrix as CSV (:data:`CSV_COLUMNS`; numbers unrounded, empty when absent; text that
    a spreadsheet would evaluate neutralised, :func:`inert_cell`)."""
    rows: list[dict[str, object]] = []
    for c in matrix.cells:
        base = {name: getattr(c, name) for name in _CELL_COLUMNS}
        rows += [
            {
                **{name: getattr(r, name) for name in _ROW_COLUMNS},
                **base,  # the cell's
                "row": "result",
                "status": status_of(r)[0],
                "stale_golden_command": r.stale_golden and r.stale_golden.command,
            }
            for r in (*c.results, *c.latency)
        ]
    for agreement in matrix.agreement:
        flagged = set(agreement.flagged)
        rows += [
            {
                "row": "agreement",
                "manifest": agreement.manifest,
                "machine": p.first,
                "other_machine": p.second,
                "samples": p.shared,
                "agreement": p.fraction,
                "max_score_diff": p.max_score_diff,
                "same_pipeline": p.same_pipeline,
                "flagged": " ".join(x for x in (p.first, p.second) if x in flagged),
            }
            for p in agreement.pairs
        ]
    out = io.StringIO()
    writer = csv.DictWriter(out, CSV_COLUMNS, lineterminator="\n")
    # A row with a carriage return in a cell is written with every cell quoted: the csv module
    # quotes only the line terminator's characters (``\n``), and a bare CR would end the row in
    # a reader.
    quoted = csv.DictWriter(out, CSV_COLUMNS, lineterminator="\n", quoting=csv.QUOTE_ALL)
    writer.writeheader()
    for row in rows:
        cells = {k: "" if v is None else inert_cell(v) for k, v in row.items()}
        carriage = any(isinstance(v, str) and "\r" in v for v in cells.values())
        (quoted if carriage else writer).writerow(cells)
    return out.getvalue()


def history_text(built: History) -> str:
    """The history in words: the nights, then per series its last values and, when it left
    tolerance, the night and what changed."""
    nights = built.nights
    lines = [f"{len(nights)} nights: " + ", ".join(n.day for n in nights), ""]
    for s in built.series:
        last = s.points[-1]
        numbers = [
            f"top-1 {last.top1:.2f}" if last.top1 is not None else "",
            f"agreement {last.agreement:.4f}" if last.agreement is not None else "",
            f"p50 {last.p50_ms:.3g} ms" if last.p50_ms is not None else "",
        ]
        shown = ", ".join(n for n in numbers if n)
        lines.append(f"{s.label}: {len(s.points)} nights; latest {shown or '-'}")
        if s.first_outside is None:
            lines.append("  inside tolerance every night")
        else:
            point = s.points[s.first_outside]
            lines.append(f"  first outside tolerance: {nights[point.night].label} ({point.why})")
            lines += [f"    {what}: {how}" for what, how in s.changes]
    return "\n".join(lines) + "\n"
