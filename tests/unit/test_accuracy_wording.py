"""An accuracy item's failures in words (report.accuracy_outcome_text), one per way it can end,
from the facts the core's check returns (accuracy.AccuracyOutcome) with real comparisons: the
text is the one a person reads under the item, so each is pinned here apart from any run."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from pytest_mlrepro.accuracy import AccuracyOutcome, ReferenceOutcome
from pytest_mlrepro.goldens import (
    Comparison,
    DataChange,
    ReferenceCheck,
    Results,
    compare,
    rounded_scores,
    top_k,
)
from pytest_mlrepro.manifest import Reference, Tolerances
from pytest_mlrepro.report import accuracy_outcome_text, explain
from pytest_mlrepro.results import row_of

IDS = ("a.png", "b.png", "c.png", "d.png")
LABELS = np.array([0, 1, 2, 0])
GOLDEN_SCORES = np.array(
    [[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8], [0.7, 0.2, 0.1]], dtype=np.float64
)
RECORD = "pytest manifests/tiny.yaml --mlrepro-update"
WHERE = "manifests/tiny.yaml [cpu]"


def _results(scores: np.ndarray) -> Results:
    topk = top_k(scores, 3)
    return Results(
        ids=IDS,
        labels=LABELS,
        topk=topk,
        topk_scores=rounded_scores(np.take_along_axis(scores, topk, axis=1)),
    )


def _comparison(now_scores: np.ndarray, tolerances: Tolerances | None = None) -> Comparison:
    return compare(
        _results(GOLDEN_SCORES), _results(now_scores), now_scores, tolerances or Tolerances()
    )


# The last sample now predicts class 1: top-1 75 % instead of 100 %, agreement 0.75.
DRIFTED = GOLDEN_SCORES.copy()
DRIFTED[3] = [0.2, 0.7, 0.1]


def _outcome(reason: Any, **facts: Any) -> AccuracyOutcome:
    base = AccuracyOutcome(
        row=row_of({"nodeid": "manifests/tiny.yaml::accuracy[cpu]", "outcome": "failed"}),
        status="failed",
        manifest_shown="manifests/tiny.yaml",
        device="cpu",
        name="tiny",
        golden_shown="golden/tiny.json",
        classes=("cat", "dog", "fox"),
    )
    return replace(base, reason=reason, **facts)


def _disagreeing() -> ReferenceOutcome:
    comparison = _comparison(DRIFTED)
    check = ReferenceCheck(
        name="tiny_onnx",
        golden="golden/tiny_onnx.json",
        comparison=comparison,
        reference_top1=100.0,
        now_top1=75.0,
        score_space="probability",
        tolerances=Reference(manifest="tiny_onnx"),
    )
    assert not check.ok
    return ReferenceOutcome(check=check)


def _agreeing() -> ReferenceOutcome:
    check = ReferenceCheck(
        name="tiny_onnx",
        golden="golden/tiny_onnx.json",
        comparison=_comparison(GOLDEN_SCORES),
        reference_top1=100.0,
        now_top1=100.0,
        score_space="probability",
        tolerances=Reference(manifest="tiny_onnx"),
    )
    assert check.ok
    return ReferenceOutcome(check=check)


def test_no_golden_before_the_model_ran_says_it_was_not_run() -> None:
    text = accuracy_outcome_text(_outcome("no golden", model_run=False))
    assert text == (
        f"no golden at golden/tiny.json: record one with\n  {RECORD}\n"
        "(the model was not run: there is nothing to compare with)"
    )


def test_no_golden_after_the_run_is_followed_by_the_reference_check() -> None:
    text = accuracy_outcome_text(_outcome("no golden", reference=_agreeing()))
    assert text == (
        f"no golden at golden/tiny.json: record one with\n  {RECORD}"
        "\n\nreference check: agrees with its reference"
    )


def test_an_unreadable_golden_names_the_only_command_that_replaces_it() -> None:
    error = "golden/tiny.json:3: name: expected a string"
    text = accuracy_outcome_text(_outcome("golden unreadable", message=error))
    assert text == f"{error}\n(only --mlrepro-update replaces it: {RECORD})"


def test_a_golden_that_is_not_a_file_is_its_error_alone() -> None:
    error = "golden/tiny.json: is a symbolic link"
    assert accuracy_outcome_text(_outcome("golden not a file", message=error)) == error


def test_a_claimed_golden_names_both_manifests() -> None:
    text = accuracy_outcome_text(_outcome("golden claimed", claimed_by="manifests/other.yaml"))
    assert text.startswith(
        "manifests/tiny.yaml: its golden golden/tiny.json was recorded from "
        "manifests/other.yaml, which still claims it: two manifests named 'tiny' "
    )
    assert text.endswith("Nothing was written.")


def test_a_changed_class_count_cannot_be_compared() -> None:
    text = accuracy_outcome_text(_outcome("classes changed", recorded_classes=3, classes_now=4))
    assert text == (
        f"{WHERE}: the golden golden/tiny.json was recorded with 3 classes, the model now has "
        "4: its results cannot be compared. If the change is intended, record a new golden:\n"
        f"  {RECORD}"
    )


def test_a_drift_is_the_comparison_then_the_diagnosis_then_the_reference() -> None:
    comparison = _comparison(DRIFTED)
    assert not comparison.ok
    change = DataChange(samples=4)
    reference = _disagreeing()
    text = accuracy_outcome_text(
        _outcome(
            "drift",
            comparison=comparison,
            change=change,
            diagnosis="likely cause: the model changed",
            reference=reference,
        )
    )
    drift = f"{WHERE}: " + explain(comparison, "golden/tiny.json", ("cat", "dog", "fox"), RECORD)
    assert text.startswith(drift + "\n\nlikely cause: the model changed")
    assert "\n\nreference check:\nmanifests/tiny.yaml [cpu]: disagrees with its reference" in text
    assert "d.png: reference 0 cat" in text  # the reference's wording names the classes


def test_a_drift_without_diagnosis_has_no_empty_section() -> None:
    comparison = _comparison(DRIFTED)
    text = accuracy_outcome_text(
        _outcome("drift", comparison=comparison, change=DataChange(samples=4))
    )
    assert text == f"{WHERE}: " + explain(
        comparison, "golden/tiny.json", ("cat", "dog", "fox"), RECORD
    )


def test_a_drift_on_changed_data_says_so_first() -> None:
    comparison = _comparison(DRIFTED)
    change = DataChange(samples=4, files=["d.png"])
    text = accuracy_outcome_text(_outcome("drift", comparison=comparison, change=change))
    assert text.startswith(f"{WHERE}: ")
    assert change.summary() in text


def test_within_tolerance_on_other_data_is_a_data_change_not_a_drift() -> None:
    loose = Tolerances(top1=100.0, top5=100.0, agreement=0.0, score=1.0)
    comparison = _comparison(DRIFTED, loose)
    assert comparison.ok
    change = DataChange(samples=4, files=["d.png"])
    text = accuracy_outcome_text(_outcome("data changed", comparison=comparison, change=change))
    assert text == (
        f"{WHERE}: {change.summary()}.\n"
        "  The results are within tolerance (top-1 100.00 % → 75.00 %), but a golden measured "
        "on other data is not a comparison of the same thing.\n"
        f"If the change is intended, record a new golden:\n  {RECORD}"
    )


def test_an_update_refused_by_the_reference_names_the_override() -> None:
    text = accuracy_outcome_text(
        _outcome(
            "reference disagreement, not recorded",
            action="updated (drift)",
            reference=_disagreeing(),
        )
    )
    assert text.startswith(f"{WHERE}: disagrees with its reference 'tiny_onnx'")
    assert f"\n\n{WHERE}: golden not updated (golden/tiny.json is left as it was):" in text
    assert text.endswith(
        "pytest manifests/tiny.yaml --mlrepro-update --mlrepro-update-despite-reference"
    )


def test_an_unusable_reference_records_nothing() -> None:
    reference = ReferenceOutcome(problem="manifests/tiny.yaml:9: reference: no such manifest")
    text = accuracy_outcome_text(
        _outcome("reference refused", action="recorded", reference=reference)
    )
    assert text == (
        "manifests/tiny.yaml:9: reference: no such manifest\n\n"
        f"{WHERE}: golden not recorded (golden/tiny.json is left as it was): the manifest's "
        "reference must be usable first"
    )


def test_a_golden_that_could_not_be_written_is_the_error_alone() -> None:
    error = "golden/tiny.json: cannot write the golden: no space left on device"
    assert accuracy_outcome_text(_outcome("golden not written", message=error)) == error


def test_after_a_pass_the_reference_failure_is_the_whole_text() -> None:
    missing = ReferenceOutcome(problem="its reference has no golden yet", missing=True, error=True)
    assert (
        accuracy_outcome_text(_outcome("reference error", reference=missing))
        == "manifests/tiny.yaml: its reference has no golden yet"
    )
    text = accuracy_outcome_text(_outcome("reference disagreement", reference=_disagreeing()))
    assert text.startswith(f"{WHERE}: disagrees with its reference 'tiny_onnx'")


def test_a_golden_written_despite_the_reference_says_both() -> None:
    action = "updated (drift) despite reference disagreement"
    text = accuracy_outcome_text(
        _outcome("written, reference failed", action=action, reference=_disagreeing())
    )
    first, rest = text.split("\n", 1)
    assert first == f"{WHERE}: golden {action}: golden/tiny.json"
    assert rest.startswith(f"{WHERE}: disagrees with its reference 'tiny_onnx'")


def test_the_drift_table_heads_the_top_k_row_by_its_k() -> None:
    """Three classes keep a top-3: what the table calls top-5 elsewhere is top-3 here."""
    comparison = _comparison(DRIFTED)
    assert comparison.k == 3
    text = explain(comparison, "golden/tiny.json", ("cat", "dog", "fox"), RECORD)
    assert "top-3 %" in text and "top-5 %" not in text
