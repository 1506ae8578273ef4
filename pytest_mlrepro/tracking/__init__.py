"""Results in a tracking store (``--mlrepro-track``, ``mlrepro track``, ``mlrepro history
--track``, ``mlrepro merge --track``; docs/tracking.md): a results file logged to MLflow as one
run for the session and one nested run per item, and read back as the results files it was
logged from.

MLflow is imported only inside the functions that log or read (the ``track`` extra): importing
this package costs nothing to a run that does not track. No pytest here.
"""

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
