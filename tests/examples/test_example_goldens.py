"""The committed goldens of the example: readable, stable, and in agreement across runtimes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pytest_mlrepro.goldens import _store as golden_store
from pytest_mlrepro.manifest._spec import load_manifest

REPO = Path(__file__).resolve().parents[2]


def test_pytorch_and_onnx_goldens_agree_per_sample() -> None:
    torch_golden = golden_store.read(REPO / "golden" / "efficientnet_lite0_torch.json")
    onnx_golden = golden_store.read(REPO / "golden" / "efficientnet_lite0_onnx.json")
    assert torch_golden is not None and onnx_golden is not None
    a, b = torch_golden.results, onnx_golden.results
    assert a.ids == b.ids and len(a.ids) == 1000
    assert np.array_equal(a.topk, b.topk)  # same top-5 classes, in the same order, per sample
    assert np.abs(a.topk_scores - b.topk_scores).max() < 1e-4


def test_committed_goldens_round_trip_byte_identical() -> None:
    for path in sorted((REPO / "golden").glob("*.json")):
        golden = golden_store.read(path)
        assert golden is not None
        assert golden_store.dumps(golden) == path.read_text(encoding="utf-8"), path


def test_committed_goldens_record_their_manifest_as_it_is_now() -> None:
    for manifest_path in sorted((REPO / "manifests").glob("*.yaml")):
        manifest = load_manifest(manifest_path)
        golden = golden_store.read(REPO / "golden" / f"{manifest.name}.json")
        assert golden is not None, manifest_path
        # Options added to pytest-mlrepro since the recording count as their defaults.
        assert golden_store.manifest_is_current(golden.manifest, manifest), (
            f"{manifest_path} changed since its golden was recorded: "
            f"pytest {manifest_path.relative_to(REPO)} --mlrepro-update"
        )
