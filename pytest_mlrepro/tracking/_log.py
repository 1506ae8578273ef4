"""Logging to an MLflow store (MLflow imported only on use): :class:`Writer`, three calls per
item, and :func:`log_results` for a whole file, idempotently (``mlrepro track``)."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import MlreproError
from ..results import Document
from ._fields import (
    COMPLETE,
    KIND,
    PAGE_ARTIFACT,
    PARENT,
    RESULTS_ARTIFACT,
    RESULTS_SHA256,
    SESSION,
    RunData,
    created_ms,
    file_digest,
    item_run,
    session_run,
)
from ._uri import artifact_root, experiment_name, scrubbed, shown_uri

REQUEST_LIMITS = {
    # A server that is down or slow costs seconds, not minutes: MLflow's own variables, set only
    # where the user has not set them, for the time of the logging.
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "20",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    # No usage data sent anywhere from the user's test run.
    "MLFLOW_DISABLE_TELEMETRY": "true",
    # Not "View run … at: URL" on stdout for each item (nor the request that reads the run
    # back to say it).
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
}
REMOTE_WORKERS = 8  # items logged at once to a server; to SQLite one at a time (one writer)


class TrackingError(MlreproError):
    """The store cannot be reached, refuses, or MLflow is not installed (no credentials said)."""


@dataclass(frozen=True)
class Logged:
    run_id: str
    items: int
    already: bool


@contextlib.contextmanager
def bounded_requests() -> Iterator[None]:
    """:data:`REQUEST_LIMITS` where the environment does not set them, MLflow's own logger quiet
    but for warnings, and no Python warning raised, for the block's time."""
    added = [name for name in REQUEST_LIMITS if name not in os.environ]
    for name in added:
        os.environ[name] = REQUEST_LIMITS[name]
    # Imported first: importing MLflow sets its logger's level (to INFO).
    with contextlib.suppress(ImportError):
        import mlflow  # noqa: F401
    logger = logging.getLogger("mlflow")
    level = logger.level
    logger.setLevel(max(logging.WARNING, level))
    try:
        # MLflow's and SQLAlchemy's deprecation warnings are theirs: not the user's test run's
        # (under -W error, one would make the logging fail).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)
        for name in added:
            os.environ.pop(name, None)


@contextlib.contextmanager
def sqlite_write_ahead(uri: str) -> Iterator[None]:
    """WAL mode, ``synchronous=NORMAL``: a commit does not wait for the disk; a crash loses no
    committed run, a power loss at worst the last commits (docs/tracking.md#cost)."""
    if not uri.startswith("sqlite:"):
        yield
        return
    import sqlite3

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    def write_ahead(connection: Any, _record: Any) -> None:
        if isinstance(connection, sqlite3.Connection):
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")

    event.listen(Engine, "connect", write_ahead)
    try:
        yield
    finally:
        event.remove(Engine, "connect", write_ahead)
        # The log written into the database file and emptied: MLflow's pooled connections stay
        # open until the process ends, which leaves ``mlflow.db-wal`` beside it (empty, now).
        if uri.startswith("sqlite:///"):
            with (
                contextlib.suppress(sqlite3.Error),
                contextlib.closing(sqlite3.connect(uri[len("sqlite:///") :])) as database,
            ):
                database.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def client(uri: str) -> Any:
    """An MlflowClient of ``uri``; TrackingError without MLflow (the tracking extra)."""
    try:
        from mlflow import MlflowClient
    except ImportError:
        raise TrackingError("tracking needs MLflow: pip install 'pytest-mlrepro[track]'") from None
    return MlflowClient(tracking_uri=uri)


def failure(uri: str, exc: BaseException) -> TrackingError:
    """``exc`` as a one-line TrackingError naming the store (without credentials)."""
    if isinstance(exc, TrackingError):
        return exc
    message = " ".join(str(exc).split()) or type(exc).__name__
    if len(message) > 300:
        message = message[:300] + "…"
    return TrackingError(f"{shown_uri(uri)}: {scrubbed(message, uri)}")


def experiment_id(mlflow: Any, uri: str) -> str:
    name = experiment_name()
    found = mlflow.get_experiment_by_name(name)
    if found is not None:
        return str(found.experiment_id)
    try:
        return str(mlflow.create_experiment(name, artifact_location=artifact_root(uri)))
    except Exception:  # made meanwhile by another machine's session
        found = mlflow.get_experiment_by_name(name)
        if found is None:
            raise
        return str(found.experiment_id)


def _batch(run: RunData, stamp: int) -> dict[str, Any]:
    """A run's metrics (at ``stamp``, ms) and params as ``log_batch`` takes them."""
    from mlflow.entities import Metric, Param

    metrics = [Metric(k, v, stamp, 0) for k, v in run.metrics.items()]
    return {"metrics": metrics, "params": [Param(k, v) for k, v in run.params.items()]}


class Writer:
    """A session run and its item runs (on a pool, three calls each); :meth:`finish` completes the
    session run and raises the first failure."""

    def __init__(self, uri: str, start: int | None = None) -> None:
        self.uri, self.experiment = uri, ""
        self.mlflow: Any = None
        self.start = start  # the runs' start time (ms); None: when each is made
        self.parent: str | None = None
        self.logged: dict[int, tuple[RunData, Future[str]]] = {}
        self.error: BaseException | None = None
        local = uri.startswith(("sqlite:", "file:", "/"))
        self.pool = ThreadPoolExecutor(1 if local else REMOTE_WORKERS, "mlrepro-track")

    def _now(self) -> int:
        return self.start or int(time.time() * 1000)

    def _item(self, run: RunData) -> str:
        if self.error is not None:
            raise self.error
        try:
            tags = {**run.tags, PARENT: str(self.parent)}
            made = self.mlflow.create_run(
                self.experiment, start_time=self._now(), tags=tags, run_name=run.name
            ).info.run_id
            self.mlflow.log_batch(made, **_batch(run, self._now()))
            self.mlflow.set_terminated(made, "FINISHED")
            return str(made)
        except BaseException as exc:
            self.error = self.error or exc
            raise

    def open(self) -> Any:
        """The client; the store opened (made, the first time), the experiment found."""
        if self.mlflow is None:
            self.mlflow = client(self.uri)
            self.experiment = experiment_id(self.mlflow, self.uri)
        return self.mlflow

    def _parent(self) -> str:
        if self.parent is None:
            self.open()
            tags = {KIND: SESSION, COMPLETE: "false"}  # "true" once the results file is in
            made = self.mlflow.create_run(self.experiment, start_time=self._now(), tags=tags)
            self.parent = str(made.info.run_id)
        return self.parent

    def add(self, index: int, run: RunData) -> None:
        """The item run of the results' row ``index`` (logged on the pool)."""
        self._parent()
        self.logged[index] = (run, self.pool.submit(self._item, run))

    def finish(self, session: RunData, items: list[RunData], data: bytes, page: Path | None) -> str:
        """Every row's item run (one logged otherwise than it is now: anew), then the results file
        and the page as artifacts, the session run's data, ``mlrepro.complete``; its id."""
        from mlflow.entities import RunTag

        wait([future for _, future in self.logged.values()])
        if self.error is not None:
            raise self.error
        for index, run in enumerate(items):
            if index in self.logged and self.logged[index][0] != run:
                self.mlflow.delete_run(self.logged[index][1].result())
                del self.logged[index]
            if index not in self.logged:
                self.add(index, run)
        self.pool.shutdown()
        for _, future in self.logged.values():
            future.result()  # the first failure
        parent = self._parent()
        with tempfile.TemporaryDirectory(prefix="mlrepro-track-") as folder:
            (Path(folder) / RESULTS_ARTIFACT).write_bytes(data)
            if page is not None and page.is_file():
                shutil.copyfile(page, Path(folder) / PAGE_ARTIFACT)
            self.mlflow.log_artifacts(parent, folder)
        # The name known at the end; mlrepro.complete last (log_batch writes the tags last).
        tags = {**session.tags, "mlflow.runName": session.name, COMPLETE: "true"}
        self.mlflow.log_batch(
            parent, **_batch(session, self._now()), tags=[RunTag(k, v) for k, v in tags.items()]
        )
        self.mlflow.set_terminated(parent, "FINISHED")
        return parent

    def close(self) -> None:
        self.pool.shutdown(cancel_futures=True)


def log_results(
    uri: str,
    data: bytes,
    document: Document,
    *,
    file_name: str = RESULTS_ARTIFACT,
    page: Path | None = None,
) -> Logged:
    """Log the results file whose bytes are ``data`` to ``uri`` unless it is there whole
    already (a run of it cut short: deleted first); TrackingError naming the store."""
    try:
        with bounded_requests(), sqlite_write_ahead(uri):
            return _log(uri, data, document, file_name, page)
    except Exception as exc:
        raise failure(uri, exc) from None


def _log(uri: str, data: bytes, document: Document, file_name: str, page: Path | None) -> Logged:
    from mlflow.entities import ViewType

    writer = Writer(uri, created_ms(document) or int(time.time() * 1000))
    mlflow = writer.open()
    experiment = writer.experiment
    digest = file_digest(data)
    earlier = mlflow.search_runs(
        [experiment],
        filter_string=f"tags.`{RESULTS_SHA256}` = '{digest}'",
        run_view_type=ViewType.ACTIVE_ONLY,
    )
    for run in earlier:
        if run.data.tags.get(COMPLETE) == "true":
            return Logged(run.info.run_id, len(document.results), already=True)
    items = [item_run(document, row) for row in document.results]
    cut = [run.info.run_id for run in earlier] + _cut_short(mlflow, experiment, items)
    for run_id in dict.fromkeys(cut):
        for child in mlflow.search_runs(
            [experiment], filter_string=f"tags.`{PARENT}` = '{run_id}'"
        ):
            mlflow.delete_run(child.info.run_id)
        mlflow.delete_run(run_id)  # replaced whole
    session = session_run(document, digest, file_name)
    try:
        parent = writer.finish(session, items, data, page)
    finally:
        writer.close()
    return Logged(parent, len(items), already=False)


def _cut_short(mlflow: Any, experiment: str, items: list[RunData]) -> list[str]:
    """Session runs cut short (``mlrepro.complete`` false) whose every item is one of ``items``:
    this file's session, logged while it ran until the store went away."""

    def key(name: str, params: dict[str, str], metrics: dict[str, float]) -> str:
        return repr((name, sorted(params.items()), sorted(metrics.items())))

    mine = {key(run.name, run.params, run.metrics) for run in items}
    found = []
    for run in mlflow.search_runs([experiment], filter_string=f"tags.`{COMPLETE}` = 'false'"):
        query = f"tags.`{PARENT}` = '{run.info.run_id}'"
        children = [
            key(c.info.run_name, c.data.params, c.data.metrics)
            for c in mlflow.search_runs([experiment], filter_string=query)
        ]
        if children and all(child in mine for child in children):
            found.append(run.info.run_id)
    return found
