"""The hardware matrix: N results files merged into manifest × machine × device × framework
version, with cross-machine agreement per sample (``mlrepro merge``)."""

from __future__ import annotations

from ._build import (
    MatrixError,
    build_matrix,
    majority_top1,
    pair_agreement,
)
from ._history import History, HistoryError, Night, Point, Series, build_history
from ._model import (
    Cell,
    CellVerdict,
    Dissent,
    ManifestAgreement,
    Matrix,
    PairAgreement,
    Source,
    status_of,
)

__all__ = [
    "Cell",
    "CellVerdict",
    "Dissent",
    "History",
    "HistoryError",
    "ManifestAgreement",
    "Matrix",
    "MatrixError",
    "Night",
    "PairAgreement",
    "Point",
    "Series",
    "Source",
    "build_history",
    "build_matrix",
    "majority_top1",
    "pair_agreement",
    "status_of",
]
