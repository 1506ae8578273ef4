"""Which ratio decided a latency verdict, in words (report.latency_decided_by, over the facts of
latency/_decisions.py), and the stale-golden flag."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_mlrepro.latency import (
    STALE_RATIO,
    DecisionFacts,
    HostFactor,
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


HOST_SAME = HostFactor(1.0, 0.97, 1.03, 0.02, 18, 18)


def decided(
    verdict: str,
    *fs: tuple[str, Judgement],
    contention: float | None = 0.10,
    comparable: bool = True,
    host: HostFactor | None = HOST_SAME,
    may_excuse: bool = True,
) -> str:
    return latency_decided_by(
        DecisionFacts(
            verdict=verdict,
            judgements=fs,
            reference_comparable=comparable,
            contention=contention,
            max_contention=0.25,
            host=host if comparable else None,
            host_may_excuse=may_excuse,
        )
    )


def test_a_high_normalised_ratio_beside_pass_says_the_absolute_ratio_decided() -> None:
    # ×norm ×1.94 beside pass: the absolute ratio is within tolerance, and a regression needs
    # both.
    text = decided("pass", facts(1.02, 1.94))
    assert text.startswith("absolute ratio: model p50: absolute ×1.02")
    assert "normalised ×1.94" in text
    assert "within ≤×1.25" in text and "needs both ratios above it" in text


def test_a_slower_host_excuses_a_high_absolute_ratio_with_its_measured_factor() -> None:
    slower = HostFactor(1.2, 1.15, 1.25, 0.02, 18, 2)
    text = decided("pass", facts(1.33, 1.05), host=slower)
    assert text.startswith(
        "normalised ratio: this host runs the reference ×1.20 [1.15–1.25] slower than the "
        "recording host; normalised ×1.05 [1.00–1.10], within ≤×1.25"
    )
    assert "absolute ×1.33" in text


def test_without_a_comparable_reference_the_absolute_ratio_alone_decides() -> None:
    other = decided("pass", facts(1.1, None), comparable=False)
    assert other.startswith("absolute ratio:") and "not comparable" in other
    regression = decided("regression", facts(1.9, None, "regression"), comparable=False)
    assert regression.startswith("absolute ratio: model p50: absolute ×1.90")
    assert "confidently above ≤×1.25" in regression and "alone decides" in regression


def test_a_regression_names_both_ratios_the_worst_measurement_and_the_host() -> None:
    text = decided(
        "regression",
        facts(1.5, 1.4, "regression", measurement="model"),
        facts(1.9, 1.8, "regression", measurement="end_to_end"),
    )
    assert text.startswith("both ratios: end_to_end p50: absolute ×1.90")
    assert "normalised ×1.80" in text
    assert "this host runs the reference ×1.00 [0.97–1.03]" in text


def test_inconclusive_says_why_the_host_could_not_be_told_from_the_model() -> None:
    wide = HostFactor(1.1, 0.8, 1.5, 0.2, 18, 2)
    text = decided("inconclusive", facts(1.5, 1.36, "inconclusive", spread=0.2), host=wide)
    assert text.startswith("inconclusive: model p50: absolute ×1.50")
    assert "straddle ≤×1.25" in text and "×1.10 [0.80–1.50]" in text
    numpy = decided("inconclusive", facts(1.5, 1.1, "inconclusive"), may_excuse=False)
    assert "another numpy" in numpy


def test_both_within_faster_contended_and_nothing_compared() -> None:
    assert decided("pass", facts(1.0, 0.98)).startswith("both ratios within ≤×1.25: model p50")
    faster = decided("faster", facts(0.3, 0.35, "faster"))
    assert faster.startswith("both ratios: model p50: absolute ×0.30")
    assert "below ×0.80 (1 / tolerance 1.25)" in faster
    alone = decided("faster", facts(0.3, None, "faster"), comparable=False)
    assert alone.startswith("absolute ratio: model p50: absolute ×0.30")
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
