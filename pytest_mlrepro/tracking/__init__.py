"""Results in an MLflow tracking store (docs/tracking.md): a results file logged as one run for
the session and one nested run per item, during the session or after it, and read back. MLflow
is imported only inside the functions that use it; no pytest here."""

from __future__ import annotations

from ._fields import file_digest, item_run, session_run
from ._live import Live
from ._log import TrackingError, log_results
from ._read import tracked_documents
from ._uri import chosen_uri, default_uri, scrubbed, shown_uri

__all__ = [
    "Live",
    "TrackingError",
    "chosen_uri",
    "default_uri",
    "file_digest",
    "item_run",
    "log_results",
    "scrubbed",
    "session_run",
    "shown_uri",
    "tracked_documents",
]
