"""The determinism check's verdict on repeated runs of one evaluation, as one immutable record."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..manifest import Manifest
from ._determinism import RunComparison, controls_in_force
from ._evaluate import Evaluation


@dataclass(frozen=True)
class DeterminismOutcome:
    """The determinism check's record: status, verdict and the facts of a failure's text."""

    status: Literal["passed", "failed"]
    verdict: Literal["identical runs", "within tolerance", "nondeterministic"]
    comparison: RunComparison
    controls: dict[str, Any]


def judge_runs(
    manifest: Manifest, runs: Sequence[Evaluation], comparison: RunComparison
) -> DeterminismOutcome:
    """The determinism check's record of ``runs``, the same evaluation repeated."""
    first = runs[0]
    controls = controls_in_force(manifest, first.runner_info)
    verdict: Literal["identical runs", "within tolerance", "nondeterministic"] = (
        "nondeterministic" if not comparison.ok
        else "identical runs" if comparison.identical
        else "within tolerance"
    )  # fmt: skip
    return DeterminismOutcome(comparison.status, verdict, comparison, controls)
