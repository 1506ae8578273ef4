"""Results in an MLflow tracking store (docs/tracking.md): a results file logged as one run for
the session and one nested run per item, during the session or after it, and read back. MLflow
is imported only inside the functions that use it; no pytest here."""

from __future__ import annotations

from ._fields import (
    COMPLETE,
    ITEM,
    KIND,
    NAMED_METRICS,
    PAGE_ARTIFACT,
    RESULTS_ARTIFACT,
    RESULTS_FILE,
    RESULTS_SHA256,
    SESSION,
    RunData,
    file_digest,
    item_run,
    night_of,
    session_run,
)
from ._live import Live
from ._log import Logged, TrackingError, log_results
from ._read import tracked_documents
from ._uri import (
    DEFAULT_DB,
    EXPERIMENT,
    chosen_uri,
    default_uri,
    experiment_name,
    scrubbed,
    shown_uri,
)

__all__ = [
    "COMPLETE",
    "DEFAULT_DB",
    "EXPERIMENT",
    "ITEM",
    "KIND",
    "NAMED_METRICS",
    "PAGE_ARTIFACT",
    "RESULTS_ARTIFACT",
    "RESULTS_FILE",
    "RESULTS_SHA256",
    "SESSION",
    "Live",
    "Logged",
    "RunData",
    "TrackingError",
    "chosen_uri",
    "default_uri",
    "experiment_name",
    "file_digest",
    "item_run",
    "log_results",
    "night_of",
    "scrubbed",
    "session_run",
    "shown_uri",
    "tracked_documents",
]
