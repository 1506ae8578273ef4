"""The hardware matrix: N results files (``pytest --mlrepro-json``, one per machine or shard)
merged into one matrix of manifest × machine × device × framework version, with cross-machine
agreement per sample, and rendered as Markdown or CSV (``mlrepro merge``). No pytest here; the
model (:mod:`._model`) is plain data that other renderers (the HTML report) take as it is."""

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
from ._html import report_view
from ._model import (
    Cell,
    Dissent,
    LatencyResult,
    MachineEnvironment,
    ManifestAgreement,
    Matrix,
    PairAgreement,
    Result,
    Source,
    StaleGolden,
    Status,
)
from ._text import CSV_COLUMNS, csv_text, markdown

__all__ = [
    "CSV_COLUMNS",
    "NOT_COMPARED",
    "PASSING",
    "Cell",
    "Dissent",
    "LatencyResult",
    "MachineEnvironment",
    "ManifestAgreement",
    "Matrix",
    "MatrixError",
    "PairAgreement",
    "Result",
    "Source",
    "StaleGolden",
    "Status",
    "build_matrix",
    "csv_text",
    "majority_top1",
    "markdown",
    "pair_agreement",
    "report_view",
    "status_of",
]
