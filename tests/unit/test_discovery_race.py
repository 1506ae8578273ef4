"""Recipe discovery as a race: a candidate clearly worse than the leader (an exact paired
McNemar test on per-sample correctness) is dropped after the first images, a step stops when its
best is clear, every image is decoded once for every candidate, and progress with an estimate of
the time left is reported as it goes."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from helpers import make_images

from pytest_mlrepro.data import Sample
from pytest_mlrepro.onboarding import Progress
from pytest_mlrepro.onboarding._discovery import Candidate, Search, worse_than
from pytest_mlrepro.onboarding._presets import IMAGENET, MINUS_ONE_ONE, ZERO_ONE, Geometry


def test_worse_than_is_the_exact_one_sided_mcnemar_tail() -> None:
    def pair(b: int, c: int, same: int = 5) -> tuple[np.ndarray, np.ndarray]:
        leader = np.array([True] * b + [False] * c + [True] * same)
        other = np.array([False] * b + [True] * c + [True] * same)
        return leader, other

    # 8 disagreements all won by the leader: P = 2^-8 = 0.0039.
    assert worse_than(*pair(8, 0), alpha=0.005)
    assert not worse_than(*pair(8, 0), alpha=0.003)
    # 9 to 1: P(B >= 9 | 10, 1/2) = 11 / 1024 = 0.0107.
    assert worse_than(*pair(9, 1), alpha=0.011)
    assert not worse_than(*pair(9, 1), alpha=0.010)
    assert not worse_than(*pair(3, 3), alpha=0.5)  # a tie is never "worse"
    assert not worse_than(*pair(0, 0), alpha=0.5)  # identical predictions


class _Counted(Sample):
    reads: dict[str, int] = {}  # noqa: RUF012 - shared by the test's samples

    def read(self) -> bytes:
        _Counted.reads[self.id] = _Counted.reads.get(self.id, 0) + 1
        return super().read()


@pytest.fixture
def samples(tmp_path: Path) -> list[Sample]:
    make_images(tmp_path, count=96)  # the dominant channel is the label (0, 1, 2)
    rows = (tmp_path / "labels.csv").read_text().splitlines()[1:]
    _Counted.reads = {}
    return [
        _Counted(name, tmp_path / name, int(label))
        for name, label in (row.split(",") for row in rows)
    ]


def channel_means(batch: np.ndarray) -> np.ndarray:
    """A "model" that is right when the channels come in RGB order: its scores are the NCHW
    channel means."""
    return batch.astype(np.float64).mean(axis=(2, 3))


def test_clearly_worse_candidates_go_after_the_first_images(samples: list[Sample]) -> None:
    calls: list[tuple[str, int, int, bool]] = []
    search = Search(channel_means, samples, 16, 16, "NCHW", "float32", progress=_Recorder(calls))
    found = search.discover()
    assert found.best.candidate.order == "RGB" and found.best.top1 == 1.0
    bgr = [s for s in found.ranking if s.candidate.order == "BGR"]
    assert bgr and all(s.n == 16 for s in bgr)  # dropped after the first round of 16
    assert set(_Counted.reads.values()) == {1}  # each image decoded once, for every candidate
    assert len(_Counted.reads) == len(samples)
    # Progress: the work done grows, the last report says nothing is left.
    done = [c[1] for c in calls]
    assert done == sorted(done) and done[-1] == found.inputs
    assert calls[-1][2:] == (0, True)
    assert "model inputs" in found.render()


def test_a_race_stops_when_its_best_is_clear(samples: list[Sample]) -> None:
    search = Search(channel_means, samples, 16, 16, "NCHW", "float32")
    base = Geometry("crop_then_resize", 0.875, "bilinear", "google")
    right = Candidate("RGB", base, ZERO_ONE)
    wrong = [Candidate("BGR", base, ZERO_ONE), Candidate("BGR", base, IMAGENET)]
    ranking = search.race("test", [right, *wrong], budget=96)
    assert ranking[0].candidate == right
    assert search.inputs == 3 * 16  # one round of 16 images, not 96
    assert search.stopped_early == [
        "  test: the best was clear after 16 of 96 images (2 candidate(s) dropped as worse: "
        "exact McNemar test on top-1, or paired t-test on the log-likelihood of the true label)"
    ]
    # Two as good as each other both run to the budget: neither is clearly worse. (A model
    # whose scores are votes: the value scale, which changes channel_means' confidence and so
    # the likelihood, changes nothing here.)
    tie = Search(channel_votes, samples, 16, 16, "NCHW", "float32")
    tie.race("tie", [right, Candidate("RGB", base, MINUS_ONE_ONE)], budget=48)
    assert tie.inputs == 2 * 48 and tie.stopped_early == []


def channel_votes(batch: np.ndarray) -> np.ndarray:
    """Ten for the brightest channel, zero for the others: the same scores whatever the scale
    of the values."""
    means = channel_means(batch)
    return 10.0 * (means == means.max(axis=1, keepdims=True))


class _Recorder(Progress):
    def __init__(self, calls: list[tuple[str, int, int, bool]]) -> None:
        super().__init__(None, math.inf)
        self.calls = calls

    def __call__(self, stage: str, done: int, left: int, elapsed: float, last: bool) -> None:
        self.calls.append((stage, done, left, last))


def test_progress_prints_an_estimate_of_the_time_left() -> None:
    lines: list[str] = []
    progress = Progress(lines.append, 0.0)
    progress("2 geometry, 3 candidate(s) left on 32/96 images", 100, 300, 10.0, False)
    assert lines == [
        "  discovery: 2 geometry, 3 candidate(s) left on 32/96 images; 100 model inputs run "
        "in 10 s, at most 30 s left"
    ]
