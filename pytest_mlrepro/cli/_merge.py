"""``mlrepro merge``, ``history`` and ``schema``: no pytest session (docs/merge.md)."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .._visible import visible_lines
from ..errors import MlreproError
from ._configured import USAGE_ERROR

if TYPE_CHECKING:
    from ..report.html import ReportView
    from ..results import Document

T = TypeVar("T")
Command = Callable[[argparse.Namespace], int]

DESCRIPTION = (
    "Merge results files (pytest --mlrepro-json, one per machine of a CI matrix or per shard) "
    "into one matrix: manifest × machine × device × framework version, with top-1, top-5, "
    "agreement with the golden, latency p50 and its ratio to the machine's golden, the verdict, "
    "and the cross-machine agreement per sample. Prints it as Markdown. Exit status 0: every "
    "cell passed; 1: a cell failed; 2: a results file is unreadable or invalid."
)
HISTORY_DESCRIPTION = (
    "Read results files (pytest --mlrepro-json) of many nights: the files of one UTC day (their "
    "'created' time) are merged as mlrepro merge merges them, then each manifest × machine × "
    "device is followed over the nights (top-1, agreement with the golden, latency p50, each "
    "with its tolerance band), with the first night outside tolerance and what changed that "
    "night (environment, manifest pipeline and settings, golden, data). Exit status 0; 2: a "
    "results file is unreadable, invalid or has no time, or a night's files do not merge."
)


def _results_command(commands: Any, name: str, help: str, description: str, html: str) -> Any:
    """``merge``'s and ``history``'s common arguments."""
    command = commands.add_parser(name, help=help, description=description)
    command.add_argument(
        "results", nargs="*", metavar="RESULTS", help="results files (pytest --mlrepro-json)"
    )
    command.add_argument("--html", metavar="PATH", help=html)
    command.add_argument(
        "--track",
        metavar="URI",
        help="read the results files from this MLflow tracking store instead (logged by "
        "pytest --mlrepro-track or mlrepro track; docs/tracking.md)",
    )
    return command


def add_parser(commands: Any) -> None:
    merge = _results_command(
        commands,
        "merge",
        "merge results files of several machines into one matrix (CI gate)",
        DESCRIPTION,
        "write the matrix as an HTML report (the report extra)",
    )
    merge.add_argument(
        "--night",
        metavar="DATE",
        help="with --track: the results files of this UTC day (YYYY-MM-DD)",
    )
    merge.add_argument("--markdown", metavar="PATH", help="also write the Markdown to PATH")
    merge.add_argument("--csv", metavar="PATH", help="write the matrix as CSV to PATH")
    merge.add_argument(
        "--quiet", "-q", action="store_true", help="print only the verdict line, not the matrix"
    )
    history = _results_command(
        commands,
        "history",
        "follow results files over many nights: trends and the first night outside tolerance",
        HISTORY_DESCRIPTION,
        "write the history as an HTML page (the report extra)",
    )
    history.add_argument(
        "--since",
        metavar="DATE",
        help="with --track: the nights from this UTC day (YYYY-MM-DD) on",
    )
    # The JSON Schema of a file the plugin writes.
    schema = commands.add_parser(
        "schema",
        help="print the JSON Schema of the results file or of a golden",
        description="Print (or write) the JSON Schema (draft 2020-12) of the results file "
        "(pytest --mlrepro-json) or of a golden, generated from this version's types: point an "
        "editor or a validator at it. Some rules are beyond a schema (docs/results.md, "
        "docs/goldens.md); reading a file checks them too.",
    )
    schema.add_argument("kind", choices=("results", "golden"), help="which file's schema")
    schema.add_argument("--out", metavar="PATH", help="write it to PATH instead of printing it")


def schema(args: argparse.Namespace) -> int:
    import json

    from .._files import atomic_write_bytes

    if args.kind == "golden":  # the published golden.schema.json, sorted
        from ..goldens import golden_schema

        text = json.dumps(golden_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    else:
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


def _usage_errors(command: Command) -> Command:
    """Bad input, an output not written, a store that refuses (an MlreproError): said, exit 2."""

    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except MlreproError as exc:
            print(f"mlrepro {args.command}: {visible_lines(str(exc))}", file=sys.stderr)
            return USAGE_ERROR

    return run


def _day(text: str | None, option: str) -> str | None:
    if text is None:
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%d").strftime("%Y-%m-%d")
    except ValueError:
        raise MlreproError(f"{option} {text!r}: expected a UTC day, YYYY-MM-DD") from None


def _built(
    args: argparse.Namespace,
    build: Callable[[list[Document]], T],
    view: Callable[..., ReportView],
    what: str,
) -> T:
    """The files (or the ``--track`` store's) as a matrix or history, with its ``--html`` page."""
    from ..report.html import require_libraries, write_html
    from ..results import load_results_files

    # Results files or --track, one of them; --night and --since only with --track.
    if args.track is not None and args.results:
        raise MlreproError("give results files or --track URI, not both")
    if args.track is None and not args.results:
        raise MlreproError("no results: give results files, or --track URI")
    for option in ("night", "since"):
        if getattr(args, option, None) is not None and args.track is None:
            raise MlreproError(f"--{option} reads a tracking store: give --track URI too")
    if args.command == "merge" and args.track is not None and args.night is None:
        raise MlreproError("merge --track reads one night: give --night YYYY-MM-DD")
    if args.html:
        require_libraries(f"mlrepro {args.command} --html")
    if args.track is None:
        documents = load_results_files([Path(path) for path in args.results])
    else:
        from ..tracking import shown_uri, tracked_documents

        night = _day(getattr(args, "night", None), "--night")
        since = _day(getattr(args, "since", None), "--since")
        documents = tracked_documents(args.track, night=night, since=since)
        if not documents:
            which = f" of the night {night}" if night else f" since {since}" if since else ""
            raise MlreproError(f"no results{which} in the tracking store {shown_uri(args.track)}")
    built = build(documents)
    if args.html:
        generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        page = view(built, generated=generated)
        write_html(Path(args.html), page, what=f"{what} (mlrepro {args.command} --html)")
    return built


@_usage_errors
def merge(args: argparse.Namespace) -> int:
    from .._files import atomic_write_bytes
    from ..matrix import build_matrix
    from ..report import csv_text, markdown
    from ..report.html import matrix_view

    matrix = _built(args, build_matrix, matrix_view, "HTML matrix")
    text = markdown(matrix)
    outputs = [
        (args.markdown, text, "Markdown matrix (mlrepro merge --markdown)"),
        (args.csv, csv_text(matrix), "CSV matrix (mlrepro merge --csv)"),
    ]
    for target, content, what in outputs:
        if target:
            atomic_write_bytes(Path(target), content.encode("utf-8"), what=what)
    # Machine and manifest names come from the results files: shown, never obeyed.
    text = visible_lines(text)
    print(text.splitlines()[2] if args.quiet else text, end="" if not args.quiet else "\n")
    return 0 if matrix.ok else 1


@_usage_errors
def history(args: argparse.Namespace) -> int:
    from ..matrix import build_history
    from ..report import history_text
    from ..report.html import history_view

    built = _built(args, build_history, history_view, "HTML history")
    print(visible_lines(history_text(built)), end="")
    return 0
