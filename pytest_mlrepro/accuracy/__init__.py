"""Accuracy: one accuracy check from start to verdict (what an accuracy item hands off to)."""

from __future__ import annotations

from ._run import (
    AccuracyOutcome,
    AccuracyRequest,
    ReferenceOutcome,
    run_accuracy,
    stopped,
    with_hardware,
)

__all__ = [
    "AccuracyOutcome",
    "AccuracyRequest",
    "ReferenceOutcome",
    "run_accuracy",
    "stopped",
    "with_hardware",
]
