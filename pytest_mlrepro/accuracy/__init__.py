"""Accuracy: one accuracy check from start to verdict (what an accuracy item hands off to): the
run over the data set, the golden and reference comparisons, the decision and the recording."""

from __future__ import annotations

from ._run import (
    AccuracyOutcome,
    AccuracyRequest,
    AddProperty,
    Evaluate,
    ReferenceOutcome,
    run_accuracy,
)

__all__ = [
    "AccuracyOutcome",
    "AccuracyRequest",
    "AddProperty",
    "Evaluate",
    "ReferenceOutcome",
    "run_accuracy",
]
