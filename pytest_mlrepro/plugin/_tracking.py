"""pytest glue for the tracking store (``--mlrepro-track [URI]``, ini ``mlrepro_track``;
docs/tracking.md): the URI read and MLflow looked for when the run starts (a usage error before
anything runs when it is not installed), and the session's results file logged at its end, on the
controller only under xdist (after every worker's reports are in)."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

import pytest

from .._files import atomic_write_bytes
from .._visible import visible_lines
from ..errors import OutputError
from ..tracking import TrackingError, chosen_uri, log_results, shown_uri
from ._base import display_path, is_worker
from ._outputs import ResultsFile

UNTRACKED = Path(".mlrepro") / "untracked"
"""Where, under the rootdir, a session that has no --mlrepro-json keeps the results file that it
could not log."""
_OFF = ("", "false", "no", "0", "off")
_DEFAULT = ("true", "yes", "1", "on", "default")
track_key = pytest.StashKey["str | None"]()


def read_tracking(config: pytest.Config) -> None:
    """The tracking URI of this run (None: not tracked), in the stash; a usage error when it is
    asked for and MLflow is not installed (looked for, not imported)."""
    given = config.getoption("mlrepro_track", default=None)
    ini = str(config.getini("mlrepro_track") or "").strip()
    if given is None and ini.lower() in _OFF:
        config.stash[track_key] = None
        return
    ini_uri = None if ini.lower() in (*_OFF, *_DEFAULT) else ini
    uri = chosen_uri(given or None, ini_uri, config.rootpath)
    if not re.match(r"[A-Za-z][A-Za-z0-9+.\-]*:", uri):
        # `pytest --mlrepro-track manifests/` would otherwise take the path for the store.
        raise pytest.UsageError(
            f"--mlrepro-track {shown_uri(uri)!r}: not a tracking URI (sqlite:///PATH, "
            "http://HOST:PORT, ...); the option's value is optional: give it after the paths, "
            "or as --mlrepro-track=URI. Nothing was run."
        )
    config.stash[track_key] = uri
    if not is_worker(config) and importlib.util.find_spec("mlflow") is None:
        raise pytest.UsageError(
            "--mlrepro-track / mlrepro_track needs MLflow, which is not installed: "
            "pip install 'pytest-mlrepro[track]'. Nothing was run."
        )


def tracking_uri(config: pytest.Config) -> str | None:
    return config.stash.get(track_key, None)


def track_session(
    session: pytest.Session, uri: str, results: ResultsFile, page: Path | None
) -> None:
    """Log the session's results file (and page) to ``uri``; said in one line either way."""
    config = session.config
    shown = shown_uri(uri)
    try:
        logged = log_results(
            uri,
            results.data,
            results.document,
            file_name=_file_name(config, results),
            page=page,
        )
    except TrackingError as exc:
        _say(session, _not_logged(session, uri, results, str(exc)))
        return
    items = f"{logged.items} item{'s' * (logged.items != 1)}"
    what = "already logged" if logged.already else f"logged {items}"
    _say(session, f"{what} to MLflow at {shown} (run {logged.run_id})")


def _file_name(config: pytest.Config, results: ResultsFile) -> str:
    """The results file's name in the store: its path as shown, else one made of the machine
    and the time (the name ``mlrepro history --track`` gives it)."""
    if results.path is not None:
        return display_path(config, results.path)
    return _untracked_name(results)


def _untracked_name(results: ResultsFile) -> str:
    document = results.document
    stamp = re.sub(r"[^0-9A-Za-z]", "", document.created or "")
    machine = re.sub(r"[^0-9A-Za-z._-]", "_", document.machine.name)[:64]
    return f"results-{machine}-{stamp}.json"


def _not_logged(session: pytest.Session, uri: str, results: ResultsFile, reason: str) -> str:
    """The line for a store that could not take the results: where they are kept, and the
    command that logs them later (the URI without credentials: MLflow's variables give them)."""
    config = session.config
    path = results.path
    if path is None:
        path = config.rootpath / UNTRACKED / _untracked_name(results)
        try:
            atomic_write_bytes(path, results.data, what="results file kept for tracking")
        except OutputError as exc:
            return f"could not log the results to MLflow ({reason}), nor keep them: {exc}"
    kept = display_path(config, path)
    command = f"mlrepro track {shlex.quote(kept)} --uri {shlex.quote(shown_uri(uri))}"
    return (
        f"could not log the results to MLflow ({reason}); they are kept in {kept}: "
        f"log them later with: {command}"
    )


said_key = pytest.StashKey[list[str]]()


def _say(session: pytest.Session, line: str) -> None:
    """Kept for the terminal summary's section (under xdist the progress line is still open at
    the session's end); printed at once without a terminal reporter."""
    text = f"mlrepro: {visible_lines(line)}"
    if session.config.pluginmanager.get_plugin("terminalreporter") is None:
        print(text)
    else:
        session.config.stash.setdefault(said_key, []).append(text)


def tracking_lines(config: pytest.Config) -> list[str]:
    """What the tracking said at the session's end (the terminal summary's section)."""
    return config.stash.get(said_key, [])
