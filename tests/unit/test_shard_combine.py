"""Shards put back together (pytest_mlrepro.results): the comparison rebuilt from the per-sample
parts of N shards is exactly the whole run's comparison, and merge_shards refuses rows that are
not each shard once.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_mlrepro.data import Shard, shard_of
from pytest_mlrepro.goldens import Results, compare, rounded_scores, score_diffs, top_k
from pytest_mlrepro.manifest import Tolerances
from pytest_mlrepro.results import (
    FailedShard,
    Part,
    PerSample,
    Row,
    ShardMergeError,
    combine,
    merge_shards,
    metrics,
    record,
    row_json,
    row_of,
    shard_results,
)


def _results(ids: list[str], labels: np.ndarray, scores: np.ndarray, k: int) -> Results:
    topk = top_k(scores, k)
    return Results(
        ids=tuple(ids),
        labels=labels,
        topk=topk,
        topk_scores=rounded_scores(np.take_along_axis(scores, topk, axis=1)),
    )


@st.composite
def runs(draw: st.DrawFn) -> tuple[Results, Results, np.ndarray, Tolerances]:
    """A golden and a run of the same data set (some samples only in one of them), the run's
    score matrix, and tolerances. Scores are coarse half of the time: ties in the rankings and
    in the score differences (whose first maximum names the worst sample)."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    classes = draw(st.integers(2, 7))
    k = draw(st.integers(1, min(classes, 5)))
    names = sorted({f"img{i:03d}.png" for i in draw(st.sets(st.integers(0, 299), max_size=60))})
    in_golden = [n for n in names if rng.random() < 0.9]
    in_run = [n for n in names if (n in in_golden and rng.random() < 0.9) or rng.random() < 0.05]
    labels = {n: int(rng.integers(0, classes)) for n in names}

    def scores(count: int) -> np.ndarray:
        if draw(st.booleans()):
            return rng.integers(0, 4, size=(count, classes)).astype(np.float64) / 4
        return rng.random((count, classes))

    golden_scores = scores(len(in_golden))
    run_scores = scores(len(in_run))
    # Most run samples keep the golden's scores, give or take a little: agreement in between.
    shared = {n: i for i, n in enumerate(in_golden)}
    for i, n in enumerate(in_run):
        if n in shared and rng.random() < 0.7:
            run_scores[i] = golden_scores[shared[n]] + rng.normal(0, 1e-4, classes)
    golden = _results(
        in_golden, np.asarray([labels[n] for n in in_golden], np.int64), golden_scores, k
    )
    now = _results(in_run, np.asarray([labels[n] for n in in_run], np.int64), run_scores, k)
    tolerances = Tolerances(
        top1=draw(st.sampled_from([0.0, 0.5, 5.0])),
        top5=draw(st.sampled_from([0.0, 0.5, 5.0])),
        agreement=draw(st.sampled_from([0.0, 0.9, 0.99, 1.0])),
        score=draw(st.sampled_from([1e-6, 1e-3, 0.5])),
    )
    return golden, now, run_scores, tolerances


def _parts(golden: Results, now: Results, scores: np.ndarray, count: int) -> list[Part]:
    """The parts N shard runs write (through JSON, as a results file carries them)."""
    parts = []
    for index in range(1, count + 1):
        shard = Shard(index, count)
        keep = [i for i, sample in enumerate(now.ids) if shard.holds(sample)]
        now_part = shard_results(now, shard)
        golden_part = shard_results(golden, shard)
        diffs = score_diffs(golden_part, now_part, scores[keep])
        written = json.dumps(Part(now_part, golden_part, diffs).to_json(), allow_nan=False)
        parts.append(Part.of(record(PerSample, json.loads(written))))
    return parts


@settings(max_examples=examples(100), deadline=None)
@given(runs(), st.integers(1, 5))
def test_the_shards_combine_into_the_whole_comparison(
    run: tuple[Results, Results, np.ndarray, Tolerances], count: int
) -> None:
    golden, now, scores, tolerances = run
    whole = compare(golden, now, scores, tolerances)
    combined = combine(_parts(golden, now, scores, count), tolerances)
    # Field by field (the dataclass's ==), the failed levels and so the verdict included.
    assert combined == whole
    assert combined.failures == whole.failures


@given(st.lists(st.text(min_size=1, max_size=12), unique=True, max_size=50), st.integers(1, 6))
@settings(max_examples=examples(50))
def test_every_sample_is_in_exactly_one_shard(ids: list[str], count: int) -> None:
    owners = [[i for i in range(1, count + 1) if Shard(i, count).holds(s)] for s in ids]
    assert owners == [[shard_of(s, count)] for s in ids]


def _row(index: int, count: int, part: Part, **extra: Any) -> dict[str, Any]:
    """A shard's row as JSON (as a results file holds it): merge_shards takes its record."""
    return {
        "nodeid": "manifests/m.yaml::accuracy[cpu]",
        "kind": "accuracy",
        "outcome": "passed",
        "manifest": "m",
        "device": "cpu",
        "manifest_digest": "0" * 64,
        "tolerances": {"top1": 0.5, "top5": 0.5, "agreement": 0.99, "score": 1e-3},
        "shard": {"index": index, "count": count},
        "verdict": f"shard {index}/{count} compared (verdict at the merge)",
        "per_sample": part.to_json(),
        **extra,
    }


@pytest.fixture
def shard_rows() -> tuple[list[dict[str, Any]], Results, Results, np.ndarray]:
    rng = np.random.default_rng(7)
    ids = [f"s{i:02d}" for i in range(30)]
    labels = rng.integers(0, 4, 30)
    golden_scores = rng.random((30, 4))
    run_scores = golden_scores.copy()
    run_scores[:5] = rng.random((5, 4))  # five samples moved
    golden = _results(ids, labels, golden_scores, 3)
    now = _results(ids, labels, run_scores, 3)
    parts = _parts(golden, now, run_scores, 3)
    return [_row(i + 1, 3, p) for i, p in enumerate(parts)], golden, now, run_scores


def test_merge_shards_gives_the_whole_rows_metrics_and_verdict(shard_rows: Any) -> None:
    rows, golden, now, scores = shard_rows
    tolerances = Tolerances()
    whole = compare(golden, now, scores, tolerances)
    merged = merge_shards([row_of(r) for r in reversed(rows)])
    assert isinstance(merged, Row)  # the typed, frozen record
    assert {k: getattr(merged, k) for k in metrics(whole)} == metrics(whole)
    assert merged.verdict == ("pass" if whole.ok else "drift")
    assert merged.outcome == merged.status == ("passed" if whole.ok else "failed")
    assert merged.per_sample is not None and merged.per_sample.now.ids == list(now.ids)
    assert merged.shard is None and merged.shards == 3
    assert "shard" not in row_json(merged)


@pytest.mark.parametrize(
    ("keep", "message"),
    [
        ([0, 2], "missing shard 2/3"),
        ([0, 1, 1, 2], "shard 2/3 given twice"),
        ([0, 0, 2], "missing shard 2/3; shard 1/3 given twice"),
    ],
)
def test_merge_shards_names_missing_and_duplicate_shards(
    shard_rows: Any, keep: list[int], message: str
) -> None:
    rows = shard_rows[0]
    with pytest.raises(ShardMergeError, match=message):
        merge_shards([row_of(rows[i]) for i in keep])


def test_merge_shards_refuses_shards_of_different_manifests(shard_rows: Any) -> None:
    rows = [dict(r) for r in shard_rows[0]]
    rows[1]["manifest_digest"] = "1" * 64
    with pytest.raises(ShardMergeError, match="differ in 'manifest_digest'"):
        merge_shards([row_of(r) for r in rows])


def test_merge_shards_refuses_rows_that_are_not_accuracy_rows(shard_rows: Any) -> None:
    rows = [{**r, "kind": "determinism"} for r in shard_rows[0]]
    with pytest.raises(ShardMergeError, match="only accuracy rows are merged, not determinism"):
        merge_shards([row_of(r) for r in rows])


def test_merge_shards_refuses_shards_of_different_splits(shard_rows: Any) -> None:
    rows = [dict(r) for r in shard_rows[0]]
    rows[2]["shard"] = {"index": 3, "count": 4}
    with pytest.raises(ShardMergeError, match="different splits"):
        merge_shards([row_of(r) for r in rows])


def test_a_shard_that_failed_fails_the_merge_naming_it(shard_rows: Any) -> None:
    rows = [dict(r) for r in shard_rows[0]]
    rows[1].update(outcome="failed", verdict="non-finite outputs")
    del rows[1]["per_sample"]
    merged = merge_shards([row_of(r) for r in rows])
    assert merged.outcome == "failed" and merged.verdict == "non-finite outputs"
    assert merged.failed_shards == (FailedShard("2/3", rows[1]["nodeid"], "non-finite outputs"),)
    assert row_json(merged)["failed_shards"] == [
        {"shard": "2/3", "nodeid": rows[1]["nodeid"], "verdict": "non-finite outputs"}
    ]
    assert merged.top1 is None  # no metrics from an incomplete evaluation


def test_combine_refuses_overlapping_or_uncompared_parts(shard_rows: Any) -> None:
    _, golden, now, scores = shard_rows
    parts = _parts(golden, now, scores, 2)
    with pytest.raises(ShardMergeError, match="in the run's results of part 1 and of part 2"):
        combine([parts[0], parts[0]], Tolerances())
    with pytest.raises(ShardMergeError, match="part 2 was not compared with a golden"):
        combine([parts[0], Part(parts[1].now, None, {})], Tolerances())
