"""tf.io.decode_jpeg's DCT method on the real 1000-image sample, through pytester: the example's
ONNX manifest decoding with ``backend: tf`` records per-sample results that depend on
``dct_method``, and a golden recorded with INTEGER_ACCURATE fails under INTEGER_FAST.

Skipped when the ImageNet sample is absent. The ONNX model comes from MLREPRO_CACHE when set
(built there otherwise, from the PyTorch weights).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from helpers import DATA, REPO, needs_imagenet_sample

pytestmark = [pytest.mark.slow, needs_imagenet_sample]
pytest.importorskip("tensorflow")
pytest.importorskip("onnxruntime")
pytest.importorskip("torch")  # the ONNX model is exported from the PyTorch weights

ONNX_MANIFEST = REPO / "manifests" / "efficientnet_lite0_onnx.yaml"
PIL_DECODE = "decode: {backend: pil, order: RGB, exif_orientation: false}"


def variant(dct_method: str, name: str, golden: str | None = None) -> str:
    text = ONNX_MANIFEST.read_text()
    assert PIL_DECODE in text, "the example manifest's decode step changed"
    text = text.replace(PIL_DECODE, f"decode: {{backend: tf, dct_method: {dct_method}}}")
    header = f"name: {name}\n" + (f"golden: {golden}\n" if golden else "")
    return text.replace("name: efficientnet_lite0_onnx\n", header)


def test_dct_method_changes_per_sample_results_and_fails_the_other_golden(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    cache = Path(os.environ.get("MLREPRO_CACHE") or tmp_path_factory.mktemp("mlrepro-cache"))
    (pytester.path / "manifests").mkdir()
    shutil.copytree(REPO / "manifests" / "datasets", pytester.path / "manifests" / "datasets")
    shutil.copy(REPO / "conftest.py", pytester.path)
    shutil.copytree(REPO / "examples", pytester.path / "examples")  # its builders
    manifests = pytester.path / "manifests"
    (manifests / "accurate.yaml").write_text(variant("INTEGER_ACCURATE", "tf_accurate"))
    (manifests / "fast.yaml").write_text(variant("INTEGER_FAST", "tf_fast"))
    pytester.makeini("[pytest]\n")
    monkeypatch.setenv("MLREPRO_DATA", str(DATA))
    monkeypatch.setenv("MLREPRO_CACHE", str(cache))
    # The accuracy items only (the example may declare latency items too).
    quiet = ["-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:benchmark"]
    quiet += ["-k", "accuracy"]

    recorded = pytester.runpytest_subprocess(*quiet, "--mlrepro-update", timeout=1200)
    recorded.assert_outcomes(passed=2)
    goldens = {
        name: json.loads((pytester.path / "golden" / f"{name}.json").read_text())
        for name in ("tf_accurate", "tf_fast")
    }
    decode = goldens["tf_fast"]["manifest"]["inputs"][0]["preprocess"][0]["decode"]
    assert decode == {
        "backend": "tf",
        "dct_method": "INTEGER_FAST",
        "exif_orientation": False,
        "mode": "RGB",
        "order": "RGB",
    }
    rows = {n: {r[0]: r for r in g["samples"]} for n, g in goldens.items()}
    top1_differs = [
        s for s, r in rows["tf_accurate"].items() if r[2][0] != rows["tf_fast"][s][2][0]
    ]
    scores_differ = [s for s, r in rows["tf_accurate"].items() if r[3] != rows["tf_fast"][s][3]]
    assert len(rows["tf_accurate"]) == 1000
    assert len(scores_differ) > 900  # nearly every photograph decodes to other pixels
    assert 10 <= len(top1_differs) <= 40  # measured: 16 (1.6%)

    # The owner edits the INTEGER_ACCURATE manifest to INTEGER_FAST (same name, so the golden is
    # still its own; the file moved, which a golden accepts once its old file is gone).
    (manifests / "accurate.yaml").unlink()
    (manifests / "fast.yaml").write_text(
        variant("INTEGER_FAST", "tf_accurate", golden="golden/tf_accurate.json")
    )
    checked = pytester.runpytest_subprocess(*quiet, timeout=1200)
    checked.assert_outcomes(failed=1)
    checked.stdout.fnmatch_lines(
        [
            "*manifests/fast.yaml [[]cpu]: results drifted from the golden*"
            "per-sample top-1 agreement*",
        ]
    )
    # The INTEGER_ACCURATE golden is Pillow's: the ONNX example's committed golden agrees.
    committed = json.loads((REPO / "golden" / "efficientnet_lite0_onnx.json").read_text())
    pil_top1 = {r[0]: r[2][0] for r in committed["samples"]}
    assert all(pil_top1[s] == r[2][0] for s, r in rows["tf_accurate"].items())
