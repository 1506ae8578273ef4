"""Hash what you load: the bytes checked against a sha256 are the bytes used, for data files and
model files alike, even when the file is replaced after it was checked (a shared mirror being
updated, a concurrent job)."""

from __future__ import annotations

import dataclasses
import hashlib
import os
from pathlib import Path

import pytest

from pytest_mlrepro.data import Sample
from pytest_mlrepro.errors import IntegrityError
from pytest_mlrepro.manifest._spec import Manifest, parse_manifest
from pytest_mlrepro.runners._artifacts import verified
from pytest_mlrepro.settings import Settings


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def replace_atomically(path: Path, data: bytes) -> None:
    """What a mirror update or another job does: a new file renamed over the old one."""
    temp = path.with_name(path.name + ".new")
    temp.write_bytes(data)
    os.replace(temp, path)


def test_a_data_file_replaced_after_verification_is_refused_not_decoded(tmp_path: Path) -> None:
    image = tmp_path / "a.png"
    image.write_bytes(b"the verified picture")
    sample = Sample(id="a.png", path=image, label=0, sha256=sha(b"the verified picture"))
    assert sample.read() == b"the verified picture"
    replace_atomically(image, b"another picture")
    with pytest.raises(IntegrityError) as caught:
        sample.read()
    message = str(caught.value)
    assert f"{image} changed after it was verified" in message
    assert sha(b"another picture") in message and sha(b"the verified picture") in message


def test_a_sample_without_a_pin_is_read_as_is(tmp_path: Path) -> None:
    image = tmp_path / "a.png"
    image.write_bytes(b"bytes")
    assert Sample(id="a.png", path=image, label=0).read() == b"bytes"


STEPS = [{"decode": {}}, {"cast": {"dtype": "float32"}}, {"layout": {"order": "NCHW"}}]


def manifest(tmp_path: Path, digest: str) -> Manifest:
    data = {
        "name": "m",
        "version": "1",
        "framework": {"name": "onnxruntime"},
        "model": {"format": "onnx", "file": {"path": "m.onnx", "sha256": digest}},
        "inputs": [{"name": "x", "layout": "NCHW", "preprocess": STEPS}],
        "dataset": {"name": "tiny", "checksums": "tiny.sha256", "classes": 3},
    }
    parsed = parse_manifest(data, "m.yaml", {})
    return dataclasses.replace(parsed, path=tmp_path / "m.yaml")


def test_the_runner_loads_the_bytes_that_were_hashed_whatever_happens_to_the_file(
    tmp_path: Path,
) -> None:
    model = tmp_path / "m.onnx"
    model.write_bytes(b"verified model bytes")
    m = manifest(tmp_path, sha(b"verified model bytes"))
    settings = Settings.for_project(tmp_path, cache_dir=tmp_path / "cache")
    pinned = m.model.file
    assert pinned is not None
    with verified(m, pinned, ("model", "file"), settings) as file:
        assert file.path == model.resolve()
        replace_atomically(model, b"a swapped model")  # after the check, before the load
        assert file.local.read_bytes() == b"verified model bytes"
        assert file.local.name == "m.onnx" and file.local.parent != model.parent
        assert (file.local.parent.stat().st_mode & 0o077) == 0, "its folder is private to this user"
        private = file.local.parent
    assert not private.exists(), "the private copy is removed once the model is loaded"


def test_a_model_that_does_not_match_its_pin_is_refused_before_anything_is_yielded(
    tmp_path: Path,
) -> None:
    model = tmp_path / "m.onnx"
    model.write_bytes(b"other bytes")
    m = manifest(tmp_path, sha(b"verified model bytes"))
    settings = Settings.for_project(tmp_path, cache_dir=tmp_path / "cache")
    pinned = m.model.file
    assert pinned is not None
    with (
        pytest.raises(IntegrityError, match="tampered, truncated or replaced"),
        verified(m, pinned, ("model", "file"), settings),
    ):
        pytest.fail("a mismatching model must not be handed to a runner")
