"""The records the core's checks return are immutable: what the pytest properties, the terminal,
the results file, the merge and the history read is what the check decided, never patched on
the way."""

from __future__ import annotations

import dataclasses

import pytest

from pytest_mlrepro.accuracy import AccuracyOutcome
from pytest_mlrepro.evaluation import RunComparison
from pytest_mlrepro.latency import LatencyOutcome


def test_an_accuracy_record_is_frozen_with_its_properties_and_notes() -> None:
    record = AccuracyOutcome(properties=(("verdict", "pass"),), notes=("a note",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.status = "failed"  # type: ignore[misc]
    with pytest.raises(AttributeError):  # a tuple: nothing appended after the check
        record.properties.append(("verdict", "drift"))  # type: ignore[attr-defined]
    assert record.status == "passed" and record.notes == ("a note",)


def test_a_latency_record_is_frozen() -> None:
    record = LatencyOutcome(end="skip", status="skipped", reason="contended")
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.end = "pass"  # type: ignore[misc]
    assert isinstance(record.properties, tuple)


@pytest.mark.parametrize(
    ("tolerance", "worst", "status"),
    [(0.0, 0.0, "passed"), (0.0, 1e-6, "failed"), (1e-5, 1e-6, "passed")],
)
def test_a_determinism_record_is_frozen_and_states_its_status(
    tolerance: float, worst: float, status: str
) -> None:
    differing = ["a.png"] if worst else []
    record = RunComparison(
        runs=2,
        samples=3,
        max_abs_diff=worst,
        worst_sample=differing[0] if differing else "",
        differing_samples=differing,
        top1_changed=[],
        tolerance=tolerance,
    )
    assert record.status == status
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.tolerance = 1.0  # type: ignore[misc]
