"""The hardware matrix: N results files (``pytest --mlrepro-json``, one per machine or shard)
merged into one matrix of manifest × machine × device × framework version, with cross-machine
agreement per sample, and rendered as Markdown or CSV (``mlrepro merge``). No pytest here; the
model (:mod:`._model`) is plain data that the HTML report (:mod:`pytest_mlrepro.report.html`, the
layer above) takes as it is."""

from __future__ import annotations

from ._build import (
    NOT_COMPARED,
    PASSING,
    MatrixError,
    build_matrix,
    majority_top1,
    pair_agreement,
    status_of,
)
from ._history import History, HistoryError, Night, Point, Series, build_history
from ._model import (
    Cell,
    Dissent,
    MachineEnvironment,
    ManifestAgreement,
    Matrix,
    PairAgreement,
    Result,
    Source,
    Status,
)
from ._text import CSV_COLUMNS, csv_text, machine_columns, machine_notes, markdown

__all__ = [
    "CSV_COLUMNS",
    "NOT_COMPARED",
    "PASSING",
    "Cell",
    "Dissent",
    "History",
    "HistoryError",
    "MachineEnvironment",
    "ManifestAgreement",
    "Matrix",
    "MatrixError",
    "Night",
    "PairAgreement",
    "Point",
    "Result",
    "Series",
    "Source",
    "Status",
    "build_history",
    "build_matrix",
    "csv_text",
    "machine_columns",
    "machine_notes",
    "majority_top1",
    "markdown",
    "pair_agreement",
    "status_of",
]
