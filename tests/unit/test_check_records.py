"""The records the core's checks return are immutable: what the pytest properties, the terminal,
the results file, the merge and the history read is what the check decided, never patched on
the way."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers import tiny_manifest

from pytest_mlrepro.accuracy import AccuracyOutcome
from pytest_mlrepro.evaluation import Evaluation, RunComparison, judge_runs
from pytest_mlrepro.goldens import Results
from pytest_mlrepro.latency import LatencyOutcome
from pytest_mlrepro.manifest import Manifest, Tolerances
from pytest_mlrepro.report import determinism_text
from pytest_mlrepro.results import row_json, row_of


def test_an_accuracy_record_is_frozen_with_its_row_and_notes() -> None:
    row = row_of({"nodeid": "m.yaml::accuracy[cpu]", "outcome": "passed", "verdict": "pass"})
    record = AccuracyOutcome(row=row, notes=("a note",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.status = "failed"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):  # the row too: nothing patched later
        record.row.verdict = "drift"  # type: ignore[misc]
    assert record.status == "passed" and record.notes == ("a note",)


def test_a_latency_record_is_frozen() -> None:
    record = LatencyOutcome(end="skip", status="skipped", reason="contended")
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.end = "pass"  # type: ignore[misc]
    assert record.facts.verdict is None  # a typed record, not a list of properties


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


@pytest.fixture
def manifest_for_records() -> Manifest:
    return tiny_manifest(seed=7)


def _run(seconds: float, top1_class: int) -> Evaluation:
    results = Results(
        ids=("a.png", "b.png"),
        labels=np.array([1, 0]),
        topk=np.array([[top1_class, 0], [0, 1]]),
        topk_scores=np.array([[0.75, 0.25], [0.5, 0.5]]),
    )
    info = {"intra_op_threads": 1, "model_path": "m.onnx"}
    return Evaluation(results, results.topk_scores, info, "data", seconds)


@pytest.mark.parametrize(
    ("worst", "verdict"),
    [(0.0, "identical runs"), (1e-6, "within tolerance"), (1.0, "nondeterministic")],
)
def test_the_determinism_check_makes_one_frozen_record(
    manifest_for_records: Manifest, worst: float, verdict: str
) -> None:
    """``judge_runs`` makes the record the item's row and the failure's text read: its verdict
    and status decided once, the runner's controls in it, not its other facts."""
    differing = ["b.png"] if worst else []
    comparison = RunComparison(2, 2, worst, differing[0] if differing else "", differing, [], 1e-5)
    record = judge_runs(manifest_for_records, [_run(0.5, 1), _run(0.25, 1)], comparison)
    assert record.verdict == verdict
    assert record.status == ("failed" if worst > 1e-5 else "passed")
    assert "model_path" not in record.controls and record.controls["intra_op_threads"] == 1
    assert record.controls["seed"] == 7
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.status = "passed"  # type: ignore[misc]
    text = determinism_text(record)
    assert "2 runs of the same evaluation differ" in text and "intra_op_threads=1" in text


def test_a_row_is_typed_and_its_json_is_what_it_was_made_of() -> None:
    """``row_of`` types the fields the row names (the rest kept in ``extra``); ``row_json`` is
    the JSON it was made of: an empty field absent, a required null (no golden) and a null given
    kept."""
    value = {
        "nodeid": "m.yaml::accuracy[cpu]",
        "outcome": "failed",
        "status": "no golden",
        "tolerances": {"top1": 0.5, "top5": 0.5, "agreement": 0.99, "score": 0.001},
        "timing": {"seconds": 0.5, "phases": {"model": {"wall": 0.25, "cpu": 0.5}}},
        "per_sample": {
            "now": {"ids": ["a"], "labels": [1], "topk": [[1, 0]], "topk_scores": [[0.9, 0.1]]},
            "golden": None,
            "score_diff": {},
        },
        "notes": ["a note"],
        "another_plugins": "agrees",  # a field the record does not name
        "stale_golden": None,  # given as null: the file says it so
    }
    row = row_of(value)
    assert row.tolerances == Tolerances() and row.notes == ("a note",)
    assert row.timing is not None and row.timing.phases is not None
    assert (row.timing.phases["model"].wall, row.timing.phases["model"].cpu) == (0.25, 0.5)
    assert row.per_sample is not None and row.per_sample.golden is None
    assert row.top1 is None and row.stale_golden is None
    assert row.extra == {"another_plugins": "agrees", "stale_golden": None}
    assert row_json(row) == value
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.status = "passed"  # type: ignore[misc]
