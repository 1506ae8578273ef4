"""A file that is not a valid model of its format, a fixed batch dimension, a class count or an
input size the manifest contradicts: one clear message naming the file (or the manifest line),
never a raw traceback; a fixed batch size is honoured by running at the model's batch.

The runs are in-process (``pytester.runpytest``): onnxruntime is imported here first, so that
pytester's restoring of ``sys.modules`` keeps it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import (
    BUILDERS_CONFTEST,
    QUIET,
    Project,
    line_of,
    make_onnx_with_channels,
    make_onnx_with_input,
    means_graph,
    save_onnx,
    sha256,
    state_dict_manifest,
)

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from onnx import helper, numpy_helper  # noqa: E402


def run(project: Project, *args: str) -> pytest.RunResult:
    """pytest on the project, in this process."""
    return project.pytester.runpytest(*QUIET, *args)


def test_a_file_that_is_not_an_onnx_model(serial_project: Project) -> None:
    serial_project.make({})
    bad = serial_project.path / "models" / "bad.onnx"
    for content in (
        b"this is not an ONNX model\n",
        (serial_project.path / "models" / "tiny.onnx").read_bytes()[:-40],
    ):
        bad.write_bytes(content)
        text = serial_project.manifest(
            "tiny_onnx", model_path="../models/bad.onnx", sha=sha256(bad)
        )
        (serial_project.path / "manifests" / "tiny_onnx.yaml").write_text(text)
        result = run(serial_project, "-q")
        result.assert_outcomes(failed=1)
        out = result.stdout.str()
        where = f"manifests/tiny_onnx.yaml:{line_of(text, 'path: ../models/bad.onnx') - 1}"
        assert f"{where}: model.file: " in out
        assert f"{bad} is not a" in out and "ONNX model" in out
        assert "Traceback" not in out and "onnxruntime_pybind11_state" not in out


def test_a_torch_weights_file_that_is_not_one(serial_project: Project) -> None:
    serial_project.make({})
    (serial_project.path / "conftest.py").write_text(BUILDERS_CONFTEST)
    bad = serial_project.path / "models" / "bad.pt"
    bad.write_bytes(b"this is not a torch file at all\n" * 4)
    text = state_dict_manifest(
        "bad_weights", "means", "../models/bad.pt", sha256(bad), assets=serial_project.assets
    )
    (serial_project.path / "manifests" / "bad.yaml").write_text(text)
    result = serial_project.run("-q")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    where = f"manifests/bad.yaml:{line_of(text, 'weights:')}: model.weights: "
    assert f"{where}{bad} is not a torch.save file" in out
    assert "Traceback" not in out and "IndexError: pop from empty list" not in out.splitlines()


@pytest.mark.parametrize("batch_size", [8, 5, 24])
def test_a_fixed_batch_model_runs_at_its_batch(serial_project: Project, batch_size: int) -> None:
    """Batch 5 fixed in the model: any runtime.batch_size, and the short last batch (24 = 4 × 5
    + 4), give the golden's results."""
    serial_project.make({}, goldens=["tiny_onnx"])
    path = serial_project.path / "models" / "fixed.onnx"
    make_onnx_with_input(path, [5, 3, "h", "w"])
    text = serial_project.manifest("tiny_onnx", model_path="../models/fixed.onnx", sha=sha256(path))
    text = text.replace("batch_size: 8", f"batch_size: {batch_size}")
    (serial_project.path / "manifests" / "tiny_onnx.yaml").write_text(text)
    result = run(serial_project, "-q")
    result.assert_outcomes(passed=1)


def write_with_background(path: Path) -> str:
    """The tiny model with a first "background" class: 4 outputs for 3 labelled classes."""
    model = means_graph(
        [helper.make_node("Concat", ["background", "scaled"], ["logits"], axis=1)],
        [numpy_helper.from_array(np.zeros((1, 1), np.float32), "background")],
        classes=4,
        batch=1,
    )
    return save_onnx(model, path)


def test_class_count_refused_before_any_image(serial_project: Project) -> None:
    serial_project.make({})
    path = serial_project.path / "models" / "background.onnx"
    sha = write_with_background(path)
    text = serial_project.manifest("tiny_onnx", model_path="../models/background.onnx", sha=sha)
    (serial_project.path / "manifests" / "tiny_onnx.yaml").write_text(text)
    # Every image unreadable: the refusal must come before any is decoded.
    for image in (serial_project.path / "data" / "tiny").glob("*.png"):
        image.write_bytes(b"")
    (serial_project.path / "manifests" / "tiny.sha256").write_text(
        "".join(
            f"{sha256(p)}  {p.name}\n"
            for p in sorted((serial_project.path / "data" / "tiny").iterdir())
        )
    )
    result = run(serial_project, "-q")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    where = f"manifests/tiny_onnx.yaml:{line_of(text, 'dataset:')}"
    assert f"{where}: dataset.classes: the model's output 'logits' is [1, 4]: 4 classes" in out
    assert "declares 3" in out and "decode" not in out


def test_input_size_refused_with_the_step_that_sets_it(serial_project: Project) -> None:
    """A model taking 20 × 20 after a resize to 16 × 16 (the crop before it): the resize line."""
    serial_project.make({})
    path = serial_project.path / "models" / "sized.onnx"
    make_onnx_with_input(path, ["batch", 3, 20, 20])
    text = serial_project.manifest("tiny_onnx", model_path="../models/sized.onnx", sha=sha256(path))
    (serial_project.path / "manifests" / "tiny_onnx.yaml").write_text(text)
    result = run(serial_project, "-q")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    where = f"manifests/tiny_onnx.yaml:{line_of(text, '{resize:')}"
    assert f"{where}: inputs[0].preprocess[2].resize.size: the preprocessing makes 16×16" in out
    assert "it takes 20×20" in out


# --- channels: the model's count against the decode mode's -------------------------------------


@pytest.mark.parametrize(
    ("channels", "decode", "words"),
    [
        (1, "{decode: {backend: pil}}", "3-channel images (RGB)"),
        (4, "{decode: {backend: pil, mode: L}}", "1-channel images (L)"),
    ],
)
def test_a_channel_mismatch_is_refused_at_load_with_the_fix(
    serial_project: Project, channels: int, decode: str, words: str
) -> None:
    """A 1-channel model fed RGB, a 4-channel one fed grey: refused when the model loads, at the
    decode step's line, naming both counts and the decode mode that fits, before any image is
    read (every image here is unreadable)."""
    serial_project.make({})
    path = serial_project.path / "models" / "channels.onnx"
    sha = make_onnx_with_channels(path, channels)
    text = serial_project.manifest(
        "tiny_onnx", model_path="../models/channels.onnx", sha=sha, decode=decode
    )
    (serial_project.path / "manifests" / "tiny_onnx.yaml").write_text(text)
    for image in (serial_project.path / "data" / "tiny").glob("*.png"):
        image.write_bytes(b"")
    (serial_project.path / "manifests" / "tiny.sha256").write_text(
        "".join(
            f"{sha256(p)}  {p.name}\n"
            for p in sorted((serial_project.path / "data" / "tiny").iterdir())
        )
    )
    result = run(serial_project, "-q")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    where = f"manifests/tiny_onnx.yaml:{line_of(text, decode)}"
    assert f"{where}: inputs[0].preprocess[0].decode.mode: the preprocessing makes {words}" in out
    assert f"[batch, {channels}, h, w] (NCHW): it takes {channels} channel" in out
    fix = "decode with 'mode: L'" if channels == 1 else "decode with 'mode: RGBA'"
    assert fix in out
    assert "Traceback" not in out and "SampleError" not in out


def test_a_grey_model_records_and_passes_with_mode_l(serial_project: Project) -> None:
    """The same data decoded grey (ITU-R 601-2 luma) for a 1-channel model: recorded, then
    checked green; the golden records the mode and its conversion rule."""
    serial_project.make({})
    path = serial_project.path / "models" / "grey.onnx"
    sha = make_onnx_with_channels(path, 1)
    text = serial_project.manifest(
        "tiny_onnx",
        model_path="../models/grey.onnx",
        sha=sha,
        decode="{decode: {backend: pil, mode: L}}",
        extra="tolerances: {top1: 100, top5: 100, agreement: 0.0, score: 0.001}\n",
    )
    (serial_project.path / "manifests" / "tiny_onnx.yaml").write_text(text)
    run(serial_project, "-q", "--mlrepro-update").assert_outcomes(passed=1)
    golden = serial_project.golden("tiny_onnx").read_text()
    assert '"mode": "L"' in golden and '"convert": "luma"' in golden
    run(serial_project, "-q").assert_outcomes(passed=1)
