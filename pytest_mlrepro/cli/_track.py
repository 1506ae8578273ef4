"""``mlrepro track``: results files logged to MLflow after the fact, idempotently (by sha256)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from .._visible import visible_lines
from ..errors import MlreproError
from ._configured import USAGE_ERROR

URI_HELP = (
    "the tracking store (default: MLFLOW_TRACKING_URI, else sqlite:///mlflow.db in the current "
    "folder); credentials from MLflow's variables, never in the URI"
)


def add_parser(commands: Any) -> None:
    track = commands.add_parser(
        "track",
        help="log results files to an MLflow tracking store (after the fact, idempotently)",
        description="Log results files (pytest --mlrepro-json, or those a session kept when its "
        "store was away) to an MLflow tracking store, as --mlrepro-track logs a session: one "
        "run per file with its items nested. A file logged before is not logged twice. Exit "
        "status 0; 2: a file is invalid or the store cannot take it.",
    )
    track.add_argument(
        "results", nargs="+", metavar="RESULTS", help="results files (pytest --mlrepro-json)"
    )
    track.add_argument("--uri", metavar="URI", help=URI_HELP)


def track(args: argparse.Namespace) -> int:
    from ..results import load_results
    from ..tracking import chosen_uri, log_results, shown_uri

    # --uri, else MLFLOW_TRACKING_URI, else the current folder's embedded default.
    uri = chosen_uri(args.uri, None, Path.cwd())
    status = 0
    for name in args.results:
        path = Path(name)
        try:
            document = load_results(path)
            logged = log_results(uri, path.read_bytes(), document, file_name=name)
        except (MlreproError, OSError) as exc:
            print(f"mlrepro track: {visible_lines(str(exc))}", file=sys.stderr)
            status = USAGE_ERROR
            continue
        items = f"{logged.items} item{'s' * (logged.items != 1)}"
        what = "already logged" if logged.already else f"logged {items}"
        print(visible_lines(f"{name}: {what} to {shown_uri(uri)} (run {logged.run_id})"))
    return status
