"""The HTML report: a plain view model (:class:`ReportView`) rendered as one self-contained page."""

from __future__ import annotations

from ._history import history_view
from ._images import drift_image, from_plain, level_colour, step_pictures, thumbnail
from ._matrix import MATRIX_COLUMNS, matrix_row
from ._model import (
    AccuracyPoint,
    CrossMachine,
    DriftImage,
    DriftSet,
    LatencySeries,
    MachineAgreement,
    MatrixRow,
    MatrixTable,
    ReportView,
    TableCell,
    Trend,
    TrendPoint,
)
from ._render import (
    ReportUnavailable,
    render_html,
    require_libraries,
    write_html,
)
from ._view import (
    SessionParts,
    environment_rows,
    latency_series,
    matrix_view,
    session_view,
)

__all__ = [
    "MATRIX_COLUMNS",
    "AccuracyPoint",
    "CrossMachine",
    "DriftImage",
    "DriftSet",
    "LatencySeries",
    "MachineAgreement",
    "MatrixRow",
    "MatrixTable",
    "ReportUnavailable",
    "ReportView",
    "SessionParts",
    "TableCell",
    "Trend",
    "TrendPoint",
    "drift_image",
    "environment_rows",
    "from_plain",
    "history_view",
    "latency_series",
    "level_colour",
    "matrix_row",
    "matrix_view",
    "render_html",
    "require_libraries",
    "session_view",
    "step_pictures",
    "thumbnail",
    "write_html",
]
