"""Streamed evaluation: each batch is reduced, as it comes out of the model, to
its top-k and the scores at the top-k classes of the goldens it will be compared with. Real
images, the tiny ONNX model on ONNX Runtime (tests/helpers.py), in-process."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from helpers import make_assets, make_project, manifest_text

from pytest_mlrepro.evaluation import evaluate
from pytest_mlrepro.goldens import KeptScores, Results, compare, score_diffs
from pytest_mlrepro.manifest import Manifest, load_manifest
from pytest_mlrepro.settings import Settings


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Manifest, Settings]:
    root = tmp_path_factory.mktemp("streaming")
    assets = make_assets(root / "assets", torchscript=False)
    text = manifest_text("tiny_onnx", assets=assets, extra="postprocess: {top_k: 1}\n")
    project = make_project(root / "project", assets, manifests={"tiny_onnx.yaml": text})
    manifest = load_manifest(project / "manifests" / "tiny_onnx.yaml")
    settings = Settings.for_project(
        project, cache_dir=root / "cache", data_mirrors=(project / "data",)
    )
    return manifest, settings


def other_golden(results: Results) -> Results:
    """A golden whose top-1 class is one this run does not rank first: its score is kept only
    because the golden asks for it."""
    topk = (results.topk + 1) % 3
    return replace(results, topk=topk, topk_scores=np.full(topk.shape, 0.5))


def test_streamed_results_are_the_full_evaluations_and_keep_the_goldens_classes(
    tiny: tuple[Manifest, Settings],
) -> None:
    manifest, settings = tiny
    full = evaluate(manifest, "cpu", settings)
    golden = other_golden(full.results)
    streamed = evaluate(manifest, "cpu", settings, keep=(golden,))
    assert isinstance(full.scores, np.ndarray) and full.scores.shape == (24, 3)
    # Byte for byte the same results as from the full matrix.
    for field in ("topk", "topk_scores", "labels"):
        assert getattr(streamed.results, field).tobytes() == getattr(full.results, field).tobytes()
    assert streamed.results.ids == full.results.ids
    # What is kept: its own top-1 and the golden's top-1, not the third class.
    assert isinstance(streamed.scores, KeptScores)
    assert streamed.scores.values.shape == (24, 2) and streamed.scores.shape == (24, 3)
    # Every comparison the plugin makes comes out the same.
    assert score_diffs(golden, streamed.results, streamed.scores) == score_diffs(
        golden, full.results, full.scores
    )
    a = compare(golden, streamed.results, streamed.scores, manifest.tolerances)
    b = compare(golden, full.results, full.scores, manifest.tolerances)
    assert (a.agreement, a.max_score_diff, a.max_score_diff_id) == (
        b.agreement,
        b.max_score_diff,
        b.max_score_diff_id,
    )
    assert a.max_score_diff > 0  # the golden's class was really looked up


def test_a_class_the_stream_did_not_keep_is_an_error_not_a_guess(
    tiny: tuple[Manifest, Settings],
) -> None:
    manifest, settings = tiny
    streamed = evaluate(manifest, "cpu", settings, keep=())
    assert isinstance(streamed.scores, KeptScores)
    assert streamed.scores.values.shape == (24, 1)
    with pytest.raises(KeyError, match="was not kept"):
        score_diffs(other_golden(streamed.results), streamed.results, streamed.scores)
