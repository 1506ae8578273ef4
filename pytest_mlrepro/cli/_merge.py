"""``mlrepro merge RESULTS... [--markdown PATH] [--csv PATH] [--html PATH]``: the results files
of a CI matrix (``pytest --mlrepro-json``, one per machine or shard) merged into one matrix
(:mod:`pytest_mlrepro.matrix`), printed as Markdown and written as files.

``mlrepro history RESULTS... [--html PATH]``: the results files of many nights, each night merged
as ``merge`` merges it, each manifest × machine followed over the nights (its first night
outside tolerance and what changed that night), printed as text and written as an HTML page.
Exit status 0 (a history is read, not a gate), 2 for the same bad inputs ``merge`` refuses and
for a file without its ``created`` time.

No pytest session: the results files hold everything. Exit status: 0 when every cell passed
(and something was compared), 1 when a cell failed (docs/merge.md lists the verdicts that do),
2 when a results file is unreadable or invalid (the message names the file and the JSON path of
the bad field), the files do not make one matrix, or an output cannot be written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .._visible import visible_lines

USAGE_ERROR = 2

DESCRIPTION = (
    "Merge results files (pytest --mlrepro-json, one per machine of a CI matrix or per shard) "
    "into one matrix: manifest × machine × device × framework version, with top-1, top-5, "
    "agreement with the golden, latency p50 and its ratio to the machine's golden, the verdict, "
    "and the cross-machine agreement per sample. Prints it as Markdown. Exit status 0: every "
    "cell passed; 1: a cell failed; 2: a results file is unreadable or invalid."
)


def add_parser(commands: Any) -> None:
    """The ``merge`` subcommand's arguments."""
    merge = commands.add_parser(
        "merge",
        help="merge results files of several machines into one matrix (CI gate)",
        description=DESCRIPTION,
    )
    merge.add_argument(
        "results", nargs="+", metavar="RESULTS", help="results files (pytest --mlrepro-json)"
    )
    merge.add_argument("--markdown", metavar="PATH", help="also write the Markdown to PATH")
    merge.add_argument("--csv", metavar="PATH", help="write the matrix as CSV to PATH")
    merge.add_argument(
        "--html", metavar="PATH", help="write the matrix as an HTML report (the report extra)"
    )
    merge.add_argument(
        "--quiet", "-q", action="store_true", help="print only the verdict line, not the matrix"
    )


def add_schema_parser(commands: Any) -> None:
    """The ``schema`` subcommand: the JSON Schema of a file the plugin writes."""
    schema = commands.add_parser(
        "schema",
        help="print the JSON Schema of the results file",
        description="Print (or write) the JSON Schema (draft 2020-12) of the results file "
        "(pytest --mlrepro-json), generated from this version's types: point an editor or a "
        "validator at it. Some rules are beyond a schema (docs/results.md); mlrepro merge "
        "checks them too.",
    )
    schema.add_argument("kind", choices=("results",), help="which file's schema")
    schema.add_argument("--out", metavar="PATH", help="write it to PATH instead of printing it")


def schema(args: argparse.Namespace) -> int:
    """Run ``mlrepro schema``; returns its exit status."""
    import json

    from .._files import atomic_write_bytes
    from ..results import results_schema

    text = json.dumps(results_schema(), indent=2) + "\n"
    if args.out is None:
        sys.stdout.write(text)
        return 0
    try:
        atomic_write_bytes(Path(args.out), text.encode())
    except OSError as exc:
        print(f"mlrepro schema: cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return USAGE_ERROR
    print(f"wrote {args.out}")
    return 0


def merge(args: argparse.Namespace) -> int:
    """Run ``mlrepro merge``; returns its exit status."""
    from .._files import atomic_write_bytes
    from ..errors import MlreproError
    from ..matrix import build_matrix
    from ..report import csv_text, markdown
    from ..results import load_results

    try:
        if args.html:  # first: the one output that can be unavailable, said before any work
            from ..report.html import require_libraries

            require_libraries("mlrepro merge --html")
        files = [load_results(Path(path)) for path in args.results]
        matrix = build_matrix(files)
        text = markdown(matrix)
        if args.html:
            from ..report.html import matrix_view, write_html

            write_html(
                Path(args.html),
                matrix_view(matrix, generated=_now()),
                what="HTML matrix (mlrepro merge --html)",
            )
        outputs = [
            (args.markdown, text, "Markdown matrix (mlrepro merge --markdown)"),
            (args.csv, csv_text(matrix), "CSV matrix (mlrepro merge --csv)"),
        ]
        for target, content, what in outputs:
            if target:
                atomic_write_bytes(Path(target), content.encode("utf-8"), what=what)
    # ResultsFileError, MatrixError, OutputError, ReportUnavailable
    except MlreproError as exc:
        print(f"mlrepro merge: {visible_lines(str(exc))}", file=sys.stderr)
        return USAGE_ERROR
    # Machine and manifest names come from the results files: shown, never obeyed.
    text = visible_lines(text)
    print(text.splitlines()[2] if args.quiet else text, end="" if not args.quiet else "\n")
    return 0 if matrix.ok else 1


HISTORY_DESCRIPTION = (
    "Read results files (pytest --mlrepro-json) of many nights: the files of one UTC day (their "
    "'created' time) are merged as mlrepro merge merges them, then each manifest × machine × "
    "device is followed over the nights (top-1, agreement with the golden, latency p50, each "
    "with its tolerance band), with the first night outside tolerance and what changed that "
    "night (environment, manifest pipeline and settings, golden, data). Exit status 0; 2: a "
    "results file is unreadable, invalid or has no time, or a night's files do not merge."
)


def add_history_parser(commands: Any) -> None:
    """The ``history`` subcommand's arguments."""
    history = commands.add_parser(
        "history",
        help="follow results files over many nights: trends and the first night outside tolerance",
        description=HISTORY_DESCRIPTION,
    )
    history.add_argument(
        "results", nargs="+", metavar="RESULTS", help="results files (pytest --mlrepro-json)"
    )
    history.add_argument(
        "--html", metavar="PATH", help="write the history as an HTML page (the report extra)"
    )


def history(args: argparse.Namespace) -> int:
    """Run ``mlrepro history``; returns its exit status."""
    from ..errors import MlreproError
    from ..matrix import build_history
    from ..results import load_results

    try:
        if args.html:
            from ..report.html import require_libraries

            require_libraries("mlrepro history --html")
        files = [load_results(Path(path)) for path in args.results]
        built = build_history(files)
        if args.html:
            from ..report.html import history_view, write_html

            write_html(
                Path(args.html),
                history_view(built, generated=_now()),
                what="HTML history (mlrepro history --html)",
            )
    # ResultsFileError, HistoryError, OutputError, ReportUnavailable
    except MlreproError as exc:
        print(f"mlrepro history: {visible_lines(str(exc))}", file=sys.stderr)
        return USAGE_ERROR
    print(visible_lines(history_text(built)), end="")
    return 0


def history_text(built: Any) -> str:
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


def _now() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


__all__ = ["add_history_parser", "add_parser", "history", "history_text", "merge"]
