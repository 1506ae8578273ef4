"""The committed goldens of the TensorFlow ports agree, per sample, with the PyTorch golden: the
float ports on every top-5 list, the int8 model within its declared reference tolerances. And the
zoo's byte-level canonicalisation, on which the pinned checksums rest."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import pytest

from examples.efficientnet_lite0_tf import (
    block_plan,
    canonical_keras_zip,
    canonical_tar,
    static_same_padding,
    tf_same_padding,
)
from pytest_mlrepro.goldens import _store as golden_store
from pytest_mlrepro.goldens._reference import compare_to_reference
from pytest_mlrepro.manifest._spec import load_manifest

REPO = Path(__file__).resolve().parents[2]
FLOAT_PORTS = [
    "efficientnet_lite0_keras",
    "efficientnet_lite0_saved_model",
    "efficientnet_lite0_tflite",
]


def golden(name: str) -> golden_store.Golden:
    found = golden_store.read(REPO / "golden" / f"{name}.json")
    assert found is not None, name
    return found


@pytest.mark.parametrize("name", FLOAT_PORTS)
def test_float_ports_agree_with_pytorch_on_every_top5(name: str) -> None:
    torch, port = golden("efficientnet_lite0_torch").results, golden(name).results
    assert port.ids == torch.ids and len(port.ids) == 1000
    assert np.array_equal(port.topk, torch.topk)
    assert np.abs(port.topk_scores - torch.topk_scores).max() < 1e-4


def test_int8_golden_is_within_its_declared_reference_tolerances() -> None:
    manifest = load_manifest(REPO / "manifests" / "efficientnet_lite0_tflite_int8.yaml")
    spec = manifest.reference_spec
    assert spec is not None and spec.manifest == "efficientnet_lite0_torch"
    torch, int8 = golden("efficientnet_lite0_torch").results, golden(manifest.name).results
    # The golden keeps top-5 scores only: a score matrix with those, zero elsewhere.
    scores = np.zeros((len(int8.ids), 1000))
    np.put_along_axis(scores, int8.topk, int8.topk_scores, axis=1)
    comparison, ref_top1, now_top1 = compare_to_reference(torch, int8, scores)
    assert spec.agreement <= comparison.agreement < 1.0  # quantisation moves a few samples
    assert now_top1 >= spec.top1 * ref_top1


def test_the_port_follows_the_pytorch_block_table() -> None:
    plan = block_plan()
    assert len(plan) == 16  # 1 + 2 + 2 + 3 + 3 + 4 + 1
    assert plan[0] == (3, 1, 1, 32, 16) and plan[-1] == (3, 1, 6, 192, 320)
    for size in (224, 112, 56, 28, 14, 7, 225, 31):
        for kernel in (1, 3, 5):
            for stride in (1, 2):
                assert static_same_padding(size, kernel, stride) == tf_same_padding(
                    size, kernel, stride
                )


ZipTime = tuple[int, int, int, int, int, int]


def _zip(entries: dict[str, bytes], when: ZipTime) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, content in entries.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=when), content)
    return out.getvalue()


def test_canonical_keras_zip_removes_time_and_memory_addresses() -> None:
    def saved(when: ZipTime, date: str, address: int, weights: bytes = b"weights") -> bytes:
        config = {
            "layers": [{"dtype": {"shared_object_id": address}}, {"shared_object_id": address}]
        }
        return _zip(
            {
                "metadata.json": json.dumps({"keras_version": "3", "date_saved": date}).encode(),
                "config.json": json.dumps(config).encode(),
                "model.weights.h5": weights,
            },
            when,
        )

    a = saved((2024, 1, 2, 3, 4, 6), "2024-01-02@03:04:05", 140001)
    b = saved((2025, 6, 7, 8, 9, 10), "2025-06-07@08:09:10", 139999)
    assert a != b and canonical_keras_zip(a) == canonical_keras_zip(b)
    with zipfile.ZipFile(io.BytesIO(canonical_keras_zip(a))) as archive:
        config = json.loads(archive.read("config.json"))
        assert archive.read("model.weights.h5") == b"weights"
    assert config["layers"][0]["dtype"]["shared_object_id"] == 1
    assert config["layers"][1]["shared_object_id"] == 1  # still the same shared object
    c = saved((2024, 1, 2, 3, 4, 6), "2024-01-02@03:04:05", 140001, weights=b"weightz")
    assert canonical_keras_zip(c) != canonical_keras_zip(a)  # content still counts


def test_canonical_tar_ignores_times_and_owners(tmp_path: Path) -> None:
    folder = tmp_path / "saved_model"
    (folder / "variables").mkdir(parents=True)
    (folder / "saved_model.pb").write_bytes(b"graph")
    (folder / "variables" / "variables.index").write_bytes(b"index")
    first = canonical_tar(folder)
    import os

    os.utime(folder / "saved_model.pb", (0, 1_700_000_000))
    assert canonical_tar(folder) == first
    with tarfile.open(fileobj=io.BytesIO(first)) as archive:
        names = archive.getnames()
        assert names == ["saved_model.pb", "variables", "variables/variables.index"]
        assert {m.mtime for m in archive.getmembers()} == {0}
