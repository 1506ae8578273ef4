"""The example's enriched goldens on the real 1000-image ImageNet sample: the committed ONNX
golden, enriched with layer fingerprints without being re-recorded, still passes, and a model
with one mid-network Conv's weights damaged is named by that layer (issue 33)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from helpers import DATA, REPO, needs_imagenet_sample, sha256

pytestmark = [pytest.mark.slow, needs_imagenet_sample]
pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
pytest.importorskip("torch")  # the ONNX model is exported from the PyTorch weights

MANIFEST = REPO / "manifests" / "efficientnet_lite0_onnx.yaml"
DAMAGED = "/_blocks.7/_expand_conv/Conv"


def test_a_damaged_conv_is_named_by_its_layer_against_the_enriched_golden(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import numpy as np
    import onnx
    from onnx import numpy_helper

    (pytester.path / "manifests").mkdir()
    shutil.copytree(REPO / "manifests" / "datasets", pytester.path / "manifests" / "datasets")
    shutil.copy(MANIFEST, pytester.path / "manifests")
    shutil.copytree(REPO / "golden", pytester.path / "golden")
    shutil.copy(REPO / "conftest.py", pytester.path)
    shutil.copytree(REPO / "examples", pytester.path / "examples")
    pytester.makeini("[pytest]\n")
    cache = Path(os.environ.get("MLREPRO_CACHE") or tmp_path / "cache")
    monkeypatch.setenv("MLREPRO_DATA", str(DATA))
    monkeypatch.setenv("MLREPRO_CACHE", str(cache))
    args = ("manifests/", "-k", "accuracy", "--mlrepro-device=cpu", "-p", "no:cacheprovider")
    golden = (REPO / "golden" / "efficientnet_lite0_onnx.json").read_bytes()
    assert b'"layers"' in golden  # committed enriched

    pytester.runpytest_subprocess(*args).assert_outcomes(passed=1)  # builds the model, too

    model = onnx.load(str(cache / "models" / "efficientnet_lite0-opset17.onnx"))
    node = next(n for n in model.graph.node if n.name == DAMAGED)
    weights = next(i for i in model.graph.initializer if i.name == node.input[1])
    damaged = numpy_helper.to_array(weights) * np.float32(0.5)
    weights.CopyFrom(numpy_helper.from_array(damaged, weights.name))
    (pytester.path / "models").mkdir()
    onnx.save(model, str(pytester.path / "models" / "damaged.onnx"))
    digest = sha256(pytester.path / "models" / "damaged.onnx")
    path = pytester.path / "manifests" / MANIFEST.name
    text, count = re.subn(
        r"  file:\n    cache: .*\n    build: .*\n    sha256: .*\n",
        f"  file:\n    path: ../models/damaged.onnx\n    sha256: {digest}\n",
        path.read_text(),
    )
    assert count == 1
    path.write_text(text)

    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(failed=1)
    lead = " ".join(result.stdout.str().split("\ndiagnosis (", 1)[1].split("\n\n")[0].split())
    assert "Likely cause: the model" in lead, lead
    assert f"the first layer whose output differs is Conv '{DAMAGED}'" in lead, lead
    assert (pytester.path / "golden" / "efficientnet_lite0_onnx.json").read_bytes() == golden
