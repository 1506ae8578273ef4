"""The HTML report: a plain view model (:class:`ReportView`) rendered as one self-contained page.

:func:`render_html` / :func:`write_html` make the page (jinja2 and matplotlib: the ``report``
extra, imported only then); :func:`drift_image` makes the preprocessing pictures of a drift with
numpy and Pillow alone. The plugin (``--mlrepro-html``) and ``mlrepro merge --html`` fill the view
model, each from what it has.
"""

from __future__ import annotations

from ._images import channels_last, drift_image, from_plain, plain
from ._matrix import MATRIX_COLUMNS, matrix_row
from ._model import (
    AccuracyPoint,
    Cell,
    CrossMachine,
    DriftImage,
    DriftSet,
    LatencySeries,
    MachineAgreement,
    Matrix,
    MatrixRow,
    ReportView,
    SensitivityBar,
    SensitivityTable,
    Status,
)
from ._render import (
    EXTRA,
    ReportUnavailable,
    missing_libraries,
    render_html,
    require_libraries,
    write_html,
)

__all__ = [
    "EXTRA",
    "MATRIX_COLUMNS",
    "AccuracyPoint",
    "Cell",
    "CrossMachine",
    "DriftImage",
    "DriftSet",
    "LatencySeries",
    "MachineAgreement",
    "Matrix",
    "MatrixRow",
    "ReportUnavailable",
    "ReportView",
    "SensitivityBar",
    "SensitivityTable",
    "Status",
    "channels_last",
    "drift_image",
    "from_plain",
    "matrix_row",
    "missing_libraries",
    "plain",
    "render_html",
    "require_libraries",
    "write_html",
]
