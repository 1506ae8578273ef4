"""Results in an MLflow tracking store (docs/tracking.md): a run per session, a nested run per item,
logged during or after the session, and read back; MLflow imported only on use, no pytest."""

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
