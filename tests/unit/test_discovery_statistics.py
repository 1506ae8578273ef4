"""The statistics discovery ranks and races by: the exact McNemar tail (integer arithmetic, any
number of disagreements), Student's t tail without scipy, the per-sample log-likelihood of the
true label, and the paired test on it that tells apart two recipes whose top-1 ties."""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
import pytest

from pytest_mlrepro.onboarding._discovery import (
    LIKELIHOOD_FLOOR,
    Candidate,
    Scored,
    log_likelihood,
    mcnemar_tail,
    student_t_tail,
    versus,
    worse_by_likelihood,
    worse_than,
)
from pytest_mlrepro.onboarding._presets import ZERO_ONE, Geometry


def _pair(b: int, c: int, same: int = 5) -> tuple[np.ndarray, np.ndarray]:
    leader = np.array([True] * b + [False] * c + [True] * same)
    other = np.array([False] * b + [True] * c + [True] * same)
    return leader, other


@pytest.mark.parametrize(("b", "c"), [(530, 494), (600, 424), (1024, 0), (700, 700), (2100, 1950)])
def test_the_mcnemar_tail_matches_scipys_binomial_test_past_1023_disagreements(
    b: int, c: int
) -> None:
    stats = pytest.importorskip("scipy.stats")
    assert b + c >= 1024  # 2.0**m overflowed a float here
    expected = stats.binomtest(b, b + c, 0.5, alternative="greater").pvalue
    assert float(mcnemar_tail(b, c)) == pytest.approx(expected, rel=1e-9, abs=1e-300)
    # The decision takes the exact tail: no OverflowError, and the side of alpha is scipy's.
    for alpha in (0.05, 1e-6):
        assert worse_than(*_pair(b, c), alpha=alpha) == (b > c and expected < alpha)


def test_the_mcnemar_tail_is_exact_where_it_can_be_counted_by_hand() -> None:
    assert mcnemar_tail(8, 0) == pytest.approx(2**-8)
    assert mcnemar_tail(9, 1) == pytest.approx(11 / 1024)
    assert mcnemar_tail(1100, 0) > 0  # 2^-1100: below a float's range, exact as a fraction


@pytest.mark.parametrize("df", [1, 2, 3, 4, 15, 16, 63, 299, 300])
def test_student_t_tail_matches_scipy(df: int) -> None:
    stats = pytest.importorskip("scipy.stats")
    for t in (-3.0, -0.5, 0.0, 0.1, 1.0, 2.5, 3.1, 5.0):
        assert student_t_tail(t, df) == pytest.approx(stats.t.sf(t, df), rel=1e-7, abs=1e-12)


def test_student_t_tail_without_scipy_on_known_values() -> None:
    assert student_t_tail(0.0, 7) == pytest.approx(0.5)
    assert student_t_tail(1.0, 1) == pytest.approx(0.25)  # Cauchy: atan(1) / π = 1/4
    assert student_t_tail(2.0, 2) == pytest.approx((1 - 2 / math.sqrt(6)) / 2)
    assert student_t_tail(math.inf, 5) == 0.0
    with pytest.raises(ValueError, match="degrees of freedom"):
        student_t_tail(1.0, 0)


def test_log_likelihood_of_logits_and_of_probabilities() -> None:
    logits = np.array([[2.0, 0.0, -1.0], [0.0, 0.0, 0.0]])
    labels = np.array([0, 2])
    expected = logits[[0, 1], [0, 2]] - np.log(np.exp(logits).sum(axis=1))
    assert log_likelihood(logits, labels) == pytest.approx(expected)
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    assert log_likelihood(probabilities, labels) == pytest.approx(expected)


def test_a_broken_output_or_a_label_outside_gets_the_floor_not_nan() -> None:
    outputs = np.array([[np.nan, 1.0], [0.0, 1.0], [1.0, 0.0]])
    found = log_likelihood(outputs, np.array([0, 5, 0]))
    assert np.isfinite(found).all()
    assert found[0] == LIKELIHOOD_FLOOR and found[1] == LIKELIHOOD_FLOOR
    assert found[2] == pytest.approx(-math.log1p(math.exp(-1.0)))


def _scored(
    method: Literal["nearest", "bilinear", "bicubic"], correct: np.ndarray, likelihood: np.ndarray
) -> Scored:
    candidate = Candidate("RGB", Geometry("resize", method=method), ZERO_ONE)
    return Scored(candidate, correct, correct.astype(np.int64), likelihood)


def test_the_likelihood_test_tells_apart_what_top1_ties() -> None:
    """300 samples, the same top-1 for both recipes (the same samples right), and the true
    label a little more likely under one on most samples: McNemar has nothing to go on (no
    disagreement), the paired likelihood test finds the better one, in that direction only."""
    rng = np.random.default_rng(7)
    correct = rng.random(300) < 0.88
    better = rng.normal(-0.5, 0.6, 300)
    worse = better - np.abs(rng.normal(0.02, 0.02, 300))  # a few hundredths of a nat, noisy
    assert not worse_than(correct, correct, alpha=0.05)
    assert worse_by_likelihood(better, worse, alpha=0.001)
    assert not worse_by_likelihood(worse, better, alpha=0.5)
    bilinear, bicubic = _scored("bilinear", correct, better), _scored("bicubic", correct, worse)
    assert versus(bilinear, bicubic) == "<"
    assert versus(bicubic, bilinear) == ">"
    assert versus(bilinear, _scored("bicubic", correct, better.copy())) == "="


def test_noise_alone_is_not_worse() -> None:
    rng = np.random.default_rng(11)
    base = rng.normal(-0.5, 0.6, 300)
    noisy = base + rng.normal(0.0, 0.05, 300)
    assert not worse_by_likelihood(base, noisy, alpha=0.001)
    assert not worse_by_likelihood(noisy, base, alpha=0.001)
    assert not worse_by_likelihood(base[:1], noisy[:1], alpha=0.5)  # one sample: no test
