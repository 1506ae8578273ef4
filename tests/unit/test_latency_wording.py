"""Which ratio decided a latency verdict, in words (report.latency_decided_by, over the facts of
latency/_decisions.py), and the stale-golden flag."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_mlrepro.latency import (
    STALE_RATIO,
    DecisionFacts,
    Judgement,
    golden_outpaced,
    latency_golden_stale,
    stale_golden,
)
from pytest_mlrepro.latency._timing import Outcome, Ratio
from pytest_mlrepro.report import latency_decided_by


def facts(
    ratio: float,
    normalised: float | None,
    outcome: Outcome = "pass",
    tolerance: float = 1.25,
    spread: float = 0.05,
    measurement: str = "model",
) -> tuple[str, Judgement]:
    """One judged statistic, as ``DecisionFacts`` holds it (the golden and the now values do not
    enter the wording)."""
    judgement = Judgement(
        statistic="p50",
        tolerance=tolerance,
        golden=0.010,
        now=0.010 * ratio,
        ratio=Ratio(ratio, ratio - spread, ratio + spread),
        normalised=None
        if normalised is None
        else Ratio(normalised, normalised - spread, normalised + spread),
        outcome=outcome,
    )
    return measurement, judgement


def decided(
    verdict: str, *fs: tuple[str, Judgement], contention: float | None = 0.10, comparable=True
) -> str:
    return latency_decided_by(
        DecisionFacts(
            verdict=verdict,
            judgements=fs,
            reference_comparable=comparable,
            contention=contention,
            idle_contention=0.05,
            max_contention=0.25,
        )
    )


def test_a_high_normalised_ratio_beside_pass_says_the_absolute_ratio_decided() -> None:
    # The case of the issue: ×norm ×1.94 beside pass. The absolute ratio is within tolerance,
    # and a regression needs both.
    text = decided("pass", facts(1.02, 1.94))
    assert text.startswith("absolute ratio: model p50: absolute ×1.02, normalised ×1.94")
    assert "within ≤×1.25" in text and "needs both ratios above it" in text


def test_a_slower_machine_excuses_a_high_absolute_ratio_by_the_normalised_one() -> None:
    text = decided("pass", facts(1.6, 1.05))
    assert text.startswith("normalised ratio: model p50: absolute ×1.60, normalised ×1.05")
    assert "reference workload slower now" in text


def test_on_an_idle_machine_or_another_reference_the_absolute_ratio_alone_decides() -> None:
    idle = decided("pass", facts(1.1, 1.94), contention=0.01)
    assert idle.startswith("absolute ratio:") and "the machine was idle" in idle
    assert "alone decides" in idle
    other = decided("pass", facts(1.1, None), comparable=False)
    assert "reference workload differs" in other
    regression = decided("regression", facts(1.9, 1.0, "regression"), contention=0.01)
    assert regression.startswith("absolute ratio: model p50: absolute ×1.90")
    assert "confidently above ≤×1.25" in regression and "idle" in regression


def test_a_regression_names_both_ratios_and_the_worst_measurement() -> None:
    text = decided(
        "regression",
        facts(1.5, 1.4, "regression", measurement="model"),
        facts(1.9, 1.8, "regression", measurement="end_to_end"),
    )
    assert text.startswith("both ratios: end_to_end p50: absolute ×1.90, normalised ×1.80")


def test_both_within_faster_contended_and_nothing_compared() -> None:
    assert decided("pass", facts(1.0, 0.98)).startswith("both ratios within ≤×1.25: model p50")
    faster = decided("faster", facts(0.3, 0.35, "faster"))
    assert faster.startswith("both ratios: model p50: absolute ×0.30")
    assert "below ×0.80 (1 / tolerance 1.25)" in faster
    busy = decided("contended", facts(1.7, 1.1), contention=0.4)
    assert busy.startswith("not judged: model p50: absolute ×1.70")
    assert "40% of the CPUs (more than 25%)" in busy
    assert decided("pass").startswith("not compared")


def test_stale_golden_below_the_threshold_only_with_the_command() -> None:
    assert STALE_RATIO == 0.5
    assert golden_outpaced(0.25) and not golden_outpaced(0.5) and not golden_outpaced(None)
    assert stale_golden(0.6, "cmd") is None and stale_golden(None, "cmd") is None
    assert stale_golden(0.24999, "pytest x --mlrepro-update") == {
        "ratio": 0.25,
        "command": "pytest x --mlrepro-update",
    }


@pytest.mark.parametrize("verdict", ["pass", "faster"])
def test_an_outpaced_golden_is_rewritten_by_update_whatever_the_verdict(verdict: str) -> None:
    common: dict[str, Any] = dict(exact=True, verdict=verdict, missing=(), settings_changed=False)
    assert latency_golden_stale(**common, block_changed=False, outpaced=True)
    assert latency_golden_stale(**common, block_changed=False) == (verdict == "faster")


def test_faster_by_the_absolute_ratio_alone_names_the_normalised_one_apart() -> None:
    """Seen on the example: `faster` with absolute ×0.64 and normalised ×1.61, the golden's
    reference workload not today's. The normalised ratio did not decide; beside "below" it must
    not read as if it were below too."""
    text = decided("faster", facts(0.64, 1.61, "faster"), comparable=False)
    assert text.startswith(
        "absolute ratio: model p50: absolute ×0.64 confidently below ×0.80 (1 / tolerance 1.25)"
    )
    assert text.endswith(
        "; normalised ×1.61 not used: the golden's reference workload differs from today's"
    )
    idle = decided("faster", facts(0.64, 1.61, "faster"), contention=0.0)
    assert "normalised ×1.61 not used: the machine was idle" in idle
