"""``mlrepro merge RESULTS... [--markdown PATH] [--csv PATH] [--html PATH]``: the results files
of a CI matrix (``pytest --mlrepro-json``, one per machine or shard) merged into one matrix
(:mod:`pytest_mlrepro.matrix`), printed as Markdown and written as files.

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


def merge(args: argparse.Namespace) -> int:
    """Run ``mlrepro merge``; returns its exit status."""
    from .._files import atomic_write_bytes
    from ..errors import MlreproError
    from ..matrix import build_matrix, csv_text, markdown
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
        print(f"mlrepro merge: {exc}", file=sys.stderr)
        return USAGE_ERROR
    print(text.splitlines()[2] if args.quiet else text, end="" if not args.quiet else "\n")
    return 0 if matrix.ok else 1


def _now() -> str:
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


__all__ = ["add_parser", "merge"]
