"""The record / update / stale / verdict policy, as pure functions of the core: tested here
without running pytest (no pytester, no model)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_mlrepro.goldens import AccuracyDecision, accuracy_decision
from pytest_mlrepro.latency import LatencyDecision, latency_decision, latency_golden_stale

# --- accuracy ------------------------------------------------------------------------------------


def test_no_golden_is_recorded_on_update_and_fails_otherwise() -> None:
    recorded = AccuracyDecision("record", "recorded")
    assert accuracy_decision(writes=True, has_golden=False) == recorded
    assert accuracy_decision(writes=False, has_golden=False) == AccuracyDecision(
        "fail", "no golden"
    )


def test_a_changed_class_count_is_never_compared() -> None:
    """Even results "within tolerance" are not compared when the class indices mean other
    classes: updated on --mlrepro-update, a failure otherwise."""
    for within in (True, False):
        assert accuracy_decision(
            writes=True, has_golden=True, classes_match=False, within_tolerance=within
        ) == AccuracyDecision("record", "updated (number of classes changed)")
        assert accuracy_decision(
            writes=False, has_golden=True, classes_match=False, within_tolerance=within
        ) == AccuracyDecision("fail", "classes changed")


def test_a_drift_fails_unless_updating() -> None:
    drift = {"has_golden": True, "within_tolerance": False}
    assert accuracy_decision(writes=False, **drift) == AccuracyDecision("fail", "drift")
    assert accuracy_decision(writes=True, **drift) == AccuracyDecision("record", "updated")


def test_without_update_nothing_out_of_date_is_rewritten() -> None:
    """An item that may not write passes within tolerance, however out of date the golden."""
    decision = accuracy_decision(
        writes=False,
        has_golden=True,
        within_tolerance=True,
        manifest_current=False,
        probes_current=False,
        data_current=False,
        manifest_file_current=False,
    )
    assert decision == AccuracyDecision("pass", "")


def test_an_up_to_date_golden_is_not_rewritten_on_update() -> None:
    assert accuracy_decision(writes=True, has_golden=True, within_tolerance=True) == (
        AccuracyDecision("pass", "")
    )


@pytest.mark.parametrize(
    ("stale", "reason"),
    [
        ({"manifest_current": False}, "updated (manifest changed)"),
        ({"probes_current": False}, "updated (step probes added)"),
        ({"data_current": False}, "updated (data changed)"),
        ({"data_current": False, "data_identity_recorded": False}, "updated (data identity added)"),
        ({"manifest_file_current": False}, "updated (manifest file recorded)"),
    ],
)
def test_each_out_of_date_part_is_named(stale: dict[str, bool], reason: str) -> None:
    decision = accuracy_decision(writes=True, has_golden=True, within_tolerance=True, **stale)
    assert decision == AccuracyDecision("record", reason)


def test_data_that_changed_fails_within_tolerance_and_an_update_records_it() -> None:
    """A golden measured on other data is not a comparison of the same thing."""
    base = {"has_golden": True, "within_tolerance": True, "data_changed": True}
    assert accuracy_decision(writes=False, **base) == AccuracyDecision("fail", "data changed")
    assert accuracy_decision(writes=True, data_current=False, **base) == AccuracyDecision(
        "record", "updated (data changed)"
    )


def test_the_most_fundamental_reason_wins() -> None:
    """Several parts out of date: the manifest first, then the probes, the data, the file."""
    everything = {
        "manifest_current": False,
        "probes_current": False,
        "data_current": False,
        "manifest_file_current": False,
    }
    base = {"writes": True, "has_golden": True, "within_tolerance": True}
    assert accuracy_decision(**base, **everything).reason == "updated (manifest changed)"
    everything["manifest_current"] = True
    assert accuracy_decision(**base, **everything).reason == "updated (step probes added)"
    everything["probes_current"] = True
    assert accuracy_decision(**base, **everything).reason == "updated (data changed)"


# --- latency -------------------------------------------------------------------------------------

CURRENT: dict[str, Any] = {
    "exact": True,
    "verdict": "pass",
    "missing": (),
    "settings_changed": False,
    "block_changed": False,
}


def test_a_current_latency_golden_is_not_stale() -> None:
    assert not latency_golden_stale(**CURRENT)


@pytest.mark.parametrize(
    "change",
    [
        {"exact": False},
        {"verdict": "regression"},
        {"verdict": "faster"},
        {"missing": ("end_to_end",)},
        {"settings_changed": True},
        {"block_changed": True},
    ],
)
def test_each_change_makes_a_latency_golden_stale(change: dict[str, object]) -> None:
    assert latency_golden_stale(**{**CURRENT, **change})


def test_a_contended_run_does_not_make_a_golden_stale() -> None:
    assert not latency_golden_stale(**{**CURRENT, "verdict": "contended"})


def _decide(**facts: object) -> LatencyDecision:
    base: dict[str, object] = {
        "update": False,
        "stale": False,
        "quiet": True,
        "exact": True,
        "verdict": "pass",
        "baseline_slug": "other-machine",
        "missing": (),
        "assessments": 1,
        "attempts": 3,
    }
    return latency_decision(**{**base, **facts})  # type: ignore[arg-type]


def test_a_stale_golden_is_recorded_only_on_a_quiet_machine() -> None:
    assert _decide(update=True, stale=True) == LatencyDecision("record", "golden updated")
    assert _decide(update=True, stale=True, exact=False) == LatencyDecision(
        "record", "golden recorded"
    )
    assert _decide(update=True, stale=True, quiet=False).action == "not recorded"


def test_a_stale_golden_without_update_is_still_judged() -> None:
    """Staleness matters only to --mlrepro-update: without it the verdict stands."""
    assert _decide(stale=True, verdict="regression") == LatencyDecision("regression", "regression")
    assert _decide(stale=True, verdict="pass").action == "pass"


def test_the_verdict_names_what_it_was_compared_with() -> None:
    decision = _decide(exact=False, assessments=2, missing=("end_to_end",), verdict="faster")
    assert decision == LatencyDecision(
        "pass",
        "faster (vs other-machine) (attempt 2 of 3) (not in the golden: end_to_end)",
    )


def test_contention_is_not_a_regression() -> None:
    assert _decide(verdict="contended") == LatencyDecision("contended", "contended")
    assert _decide(verdict="regression").action == "regression"
