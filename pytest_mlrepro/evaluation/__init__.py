"""Run a manifest's model over its data (sharded or whole), and the determinism controls."""

from __future__ import annotations

from ._determinism import RunComparison, compare_runs, controls_in_force
from ._evaluate import (
    DeterminismOutcome,
    Evaluation,
    Progress,
    evaluate,
    evaluate_runs,
    judge_runs,
    postprocessed,
    results_of,
    run_model,
)
from ._shared_preprocessing import PreprocessingShare, SharedLoader, step_key

__all__ = [
    "DeterminismOutcome",
    "Evaluation",
    "PreprocessingShare",
    "Progress",
    "RunComparison",
    "SharedLoader",
    "compare_runs",
    "controls_in_force",
    "evaluate",
    "evaluate_runs",
    "judge_runs",
    "postprocessed",
    "results_of",
    "run_model",
    "step_key",
]
