"""pytest glue for ``--mlrepro-track [URI]``: each item's run handed to a logging process that the
session's end waits for; a store that is away never loses the results (they are kept)."""

from __future__ import annotations

import importlib.util
import re
import shlex
from pathlib import Path

import pytest

from .._files import atomic_write_bytes
from .._visible import visible_lines
from ..errors import OutputError
from ..latency import head_commit
from ..results import FORMAT, Document, Environment, Machine
from ..tracking import (
    Live,
    TrackingError,
    chosen_uri,
    file_digest,
    item_run,
    session_run,
    shown_uri,
)
from ._base import display_path, is_worker, machine_name, options, state_of
from ._outputs import ResultsFile

# Under the rootdir: a results file that could not be logged, in a session without --mlrepro-json.
UNTRACKED = Path(".mlrepro") / "untracked"
_OFF = ("", "false", "no", "0", "off")
_DEFAULT = ("true", "yes", "1", "on", "default")
PLUGIN_NAME = "mlrepro-tracking"


def read_tracking(config: pytest.Config) -> None:
    """This run's tracking store, if any; a usage error when MLflow is not installed."""
    given = config.getoption("mlrepro_track", default=None)
    ini = str(config.getini("mlrepro_track") or "").strip()
    if given is None and ini.lower() in _OFF:
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
    if is_worker(config):
        return
    if importlib.util.find_spec("mlflow") is None:
        raise pytest.UsageError(
            "--mlrepro-track / mlrepro_track needs MLflow, which is not installed: "
            "pip install 'pytest-mlrepro[track]'. Nothing was run."
        )
    config.pluginmanager.register(LiveTracking(config, uri), PLUGIN_NAME)


class LiveTracking:
    """Each new row's item run to the logging process, started with the session (it imports
    MLflow meanwhile); stopped at unconfigure if the session's end did not finish it."""

    def __init__(self, config: pytest.Config, uri: str) -> None:
        self.config, self.uri, self.sent = config, uri, 0
        self.live: Live | None = None
        # What the item runs say of the file to be written (machine, shard, commit): an item
        # logged with other values (the commit moved meanwhile) is logged anew at the end.
        machine = Machine(machine_name(config), Environment())
        commit = head_commit(config.rootpath)
        self.context = Document(FORMAT, machine, options(config).shard, (), commit=commit)

    def started(self) -> Live:
        self.live = self.live or Live(self.uri)
        return self.live

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if not self.config.option.collectonly:
            self.started()

    @pytest.hookimpl(trylast=True)  # after the session's own hook has kept the row
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        rows = state_of(self.config).results
        for row in rows[self.sent :]:
            self.started().add(item_run(self.context, row))
        self.sent = len(rows)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.live is not None:
            self.live.close()

    def track_session(
        self, session: pytest.Session, results: ResultsFile, page: Path | None
    ) -> None:
        """Log the session's results file (and page); said in one line either way."""
        config, uri = session.config, self.uri
        document = results.document
        runs = [item_run(document, row) for row in document.results]
        # The file's name in the store: its path as shown, else one of machine and time.
        shown = None if results.path is None else display_path(config, results.path)
        name = shown or _untracked_name(results)
        try:
            logged = self.started().finish(
                session_run(document, file_digest(results.data), name), runs, results.data, page
            )
        except TrackingError as exc:
            _say(session, _not_logged(session, uri, results, str(exc)))
            return
        items = f"{logged.items} item{'s' * (logged.items != 1)}"
        _say(session, f"logged {items} to MLflow at {shown_uri(uri)} (run {logged.run_id})")


def live_tracking(config: pytest.Config) -> LiveTracking | None:
    """The tracking store's glue on the controller of a run that logs to one, else None."""
    tracking = config.pluginmanager.get_plugin(PLUGIN_NAME)
    return tracking if isinstance(tracking, LiveTracking) else None


def _untracked_name(results: ResultsFile) -> str:
    document = results.document
    stamp = re.sub(r"[^0-9A-Za-z]", "", document.created or "")
    machine = re.sub(r"[^0-9A-Za-z._-]", "_", document.machine.name)[:64]
    return f"results-{machine}-{stamp}.json"


def _not_logged(session: pytest.Session, uri: str, results: ResultsFile, reason: str) -> str:
    """Where the results are kept, and the command that logs them later (the URI without
    credentials: MLflow's variables give them)."""
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
    """Kept for the terminal summary (under xdist the progress line is still open at the
    session's end); printed at once without a terminal reporter."""
    text = f"mlrepro: {visible_lines(line)}"
    if session.config.pluginmanager.get_plugin("terminalreporter") is None:
        print(text)
    else:
        session.config.stash.setdefault(said_key, []).append(text)


def tracking_lines(config: pytest.Config) -> list[str]:  # the terminal summary's section
    return config.stash.get(said_key, [])
