"""Sharding on the real example: the EfficientNet-Lite0 ONNX manifest over the 1000-image
ImageNet sample, and a drifted copy of it (the resize computed by OpenCV instead of PIL), each run
whole and as shards 1/2 and 2/2; the shards merged (``results.merge_shards``) give exactly the
whole run's metrics and verdict.

Skipped when the ImageNet sample is absent (set MLREPRO_DATA).
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import pytest
from helpers import DATA, REPO, needs_imagenet_sample

from pytest_mlrepro.results import load_results, merge_shards, row_json, row_of

pytestmark = [pytest.mark.slow, needs_imagenet_sample]
pytest.importorskip("onnxruntime")
pytest.importorskip("torch")  # the ONNX model is exported from the PyTorch weights

ONNX_MANIFEST = REPO / "manifests" / "efficientnet_lite0_onnx.yaml"
DRIFT = ("method: bilinear, backend: pil", "method: bilinear, backend: opencv")
METRICS = ("samples", "top1", "top5", "agreement", "max_score_diff", "verdict", "outcome")


def _project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    (pytester.path / "manifests").mkdir()
    shutil.copytree(REPO / "manifests" / "datasets", pytester.path / "manifests" / "datasets")
    shutil.copy(ONNX_MANIFEST, pytester.path / "manifests")
    shutil.copy(REPO / "conftest.py", pytester.path)
    shutil.copytree(REPO / "examples", pytester.path / "examples")  # its builders
    (pytester.path / "golden").mkdir()
    golden = (REPO / "golden" / "efficientnet_lite0_onnx.json").read_text(encoding="utf-8")
    shutil.copy(REPO / "golden" / "efficientnet_lite0_onnx.json", pytester.path / "golden")
    # The drifted copy compares with the example's golden, renamed to belong to it.
    head = '\n  "name": "efficientnet_lite0_onnx",\n'
    assert golden.count(head) == 1
    (pytester.path / "golden" / "drifted.json").write_text(
        golden.replace(head, '\n  "name": "drifted",\n'), encoding="utf-8"
    )
    text = ONNX_MANIFEST.read_text()
    assert DRIFT[0] in text, f"the example manifest no longer contains {DRIFT[0]!r}"
    drifted = text.replace(DRIFT[0], DRIFT[1]).replace(
        "name: efficientnet_lite0_onnx", "name: drifted"
    )
    (pytester.path / "manifests" / "drifted.yaml").write_text(drifted)
    pytester.makeini("[pytest]\n")
    monkeypatch.setenv("MLREPRO_DATA", str(DATA))
    cache = os.environ.get("MLREPRO_CACHE")
    if cache:
        monkeypatch.setenv("MLREPRO_CACHE", cache)


def _rows(pytester: pytest.Pytester, *args: str) -> dict[str, dict[str, Any]]:
    out = pytester.path / "out.json"
    result = pytester.runpytest_subprocess(
        "manifests/",
        "-m",
        "mlrepro_accuracy",
        "--mlrepro-device=cpu",
        "--mlrepro-no-diagnose",
        "-p",
        "no:cacheprovider",
        "--mlrepro-json",
        str(out),
        *args,
    )
    assert result.ret in (0, 1), result.stdout.str()
    rows = {str(row.manifest): row_json(row) for row in load_results(out).results}
    out.unlink()
    return rows


def test_the_merged_shards_are_the_whole_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    _project(pytester, monkeypatch)
    whole = _rows(pytester)
    shards = [_rows(pytester, f"--mlrepro-shard={i}/2") for i in (1, 2)]
    assert whole["efficientnet_lite0_onnx"]["verdict"] == "pass"
    assert whole["drifted"]["verdict"] == "drift"
    for name, row in whole.items():
        parts = [shard[name] for shard in shards]
        assert [p["samples"] for p in parts] != [0, 0]
        assert sum(p["samples"] for p in parts) == row["samples"] == 1000
        merged = merge_shards([row_of(p) for p in parts])
        assert {k: getattr(merged, k) for k in METRICS} == {k: row.get(k) for k in METRICS}, name
        assert row_json(merged)["per_sample"] == row["per_sample"]
