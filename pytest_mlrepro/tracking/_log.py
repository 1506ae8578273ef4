"""Logging a results file to an MLflow tracking store (imported from MLflow only here and in
``_read``, only when tracking is asked for): one run for the session, one nested run per item,
each batched in one ``log_batch``; the results file and the page as artifacts.

Idempotent: the session's run is tagged with the sha256 of the results file's bytes, and a file
already logged whole is not logged again. A run cut short (the store went away mid-way) lacks
the tag ``mlrepro.complete``: it is deleted and the file logged anew.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import time
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
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
REMOTE_WORKERS = 8
"""Items logged at once to a server (each a few requests); an embedded store takes one at a time
(SQLite has one writer)."""


class TrackingError(MlreproError):
    """The tracking store cannot be reached, refuses, or the tracking extra is not installed (the
    message says which, without credentials)."""


@dataclass(frozen=True)
class Logged:
    """A results file in the store: its session run, and whether it was there already."""

    run_id: str
    experiment_id: str
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
    """For an SQLite store, the connections opened in the block in write-ahead-log mode with
    ``synchronous=NORMAL``: a commit no longer waits for the disk to sync (MLflow commits once per
    call, three calls per item), which made logging 100 items about three times faster on the
    development machine. WAL is the database file's own setting from then on (what ``mlflow ui``
    reads concurrently, too); NORMAL loses no committed run on a crash of the process, only, at
    worst, the last commits on a power loss (the results file is written before)."""
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


def log_results(
    uri: str,
    data: bytes,
    document: Document,
    *,
    file_name: str = RESULTS_ARTIFACT,
    page: Path | None = None,
) -> Logged:
    """Log the results file whose bytes are ``data`` (``document`` read from them) to ``uri``;
    TrackingError, naming the store, when it cannot be done."""
    try:
        with bounded_requests(), sqlite_write_ahead(uri):
            return _log(uri, data, document, file_name, page)
    except Exception as exc:
        raise failure(uri, exc) from None


def _log(uri: str, data: bytes, document: Document, file_name: str, page: Path | None) -> Logged:
    from mlflow.entities import Metric, Param, RunTag, ViewType

    mlflow = client(uri)
    experiment = experiment_id(mlflow, uri)
    digest = file_digest(data)
    earlier = mlflow.search_runs(
        [experiment],
        filter_string=f"tags.`{RESULTS_SHA256}` = '{digest}'",
        run_view_type=ViewType.ACTIVE_ONLY,
    )
    for run in earlier:
        if run.data.tags.get(COMPLETE) == "true":
            return Logged(run.info.run_id, experiment, len(document.results), already=True)
    for run in earlier:  # cut short: replaced whole
        _delete(mlflow, experiment, run.info.run_id)
    start = created_ms(document) or int(time.time() * 1000)

    def batch(run_id: str, run: RunData) -> None:
        mlflow.log_batch(
            run_id,
            metrics=[Metric(k, v, start, 0) for k, v in run.metrics.items()],
            params=[Param(k, v) for k, v in run.params.items()],
            tags=[RunTag(k, v) for k, v in run.tags.items()],
        )

    session = session_run(document, digest, file_name)
    parent = mlflow.create_run(
        experiment, start_time=start, tags={KIND: SESSION}, run_name=session.name
    ).info.run_id
    batch(parent, session)

    def item(index: int) -> None:
        run = item_run(document, document.results[index])
        child = mlflow.create_run(
            experiment, start_time=start, tags={PARENT: parent}, run_name=run.name
        ).info.run_id
        batch(child, run)
        mlflow.set_terminated(child, "FINISHED")

    workers = 1 if uri.startswith(("sqlite:", "file:", "/")) else REMOTE_WORKERS
    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(item, range(len(document.results))))  # the first failure is raised
    with tempfile.TemporaryDirectory(prefix="mlrepro-track-") as folder:
        results = Path(folder) / RESULTS_ARTIFACT
        results.write_bytes(data)
        mlflow.log_artifact(parent, str(results))
        if page is not None and page.is_file():
            shown = Path(folder) / PAGE_ARTIFACT
            shown.write_bytes(page.read_bytes())
            mlflow.log_artifact(parent, str(shown))
    mlflow.set_tag(parent, COMPLETE, "true")
    mlflow.set_terminated(parent, "FINISHED")
    return Logged(parent, experiment, len(document.results), already=False)


def _delete(mlflow: Any, experiment: str, run_id: str) -> None:
    """A session run cut short, and its items."""
    for child in mlflow.search_runs([experiment], filter_string=f"tags.`{PARENT}` = '{run_id}'"):
        mlflow.delete_run(child.info.run_id)
    mlflow.delete_run(run_id)
