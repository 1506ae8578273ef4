"""The HTML report: a plain view model (:class:`ReportView`) rendered as one self-contained page.

:func:`render_html` / :func:`write_html` make the page (jinja2 and matplotlib: the ``report``
extra, imported only then); :func:`drift_image` makes the preprocessing pictures of a drift with
numpy and Pillow alone. The plugin (``--mlrepro-html``) and ``mlrepro merge --html`` fill the view
model, each from what it has.
"""

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
    OperatorSection,
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
    "OperatorSection",
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
