"""The model's channel count against the preprocessing's, before any image is read: one check
(``channel_mismatch``) that the runners call at load and ``mlrepro init`` can call, naming both
counts and the decode mode that fits; a torch module tells its count by its first convolution or
its export signature."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pytest_mlrepro.errors import SignatureError
from pytest_mlrepro.manifest import load_manifest
from pytest_mlrepro.pipeline import Decode, Pipeline
from pytest_mlrepro.runners._signature import (
    ModelSignature,
    channel_mismatch,
    check_signature,
    model_channels,
)


@pytest.mark.parametrize(
    ("shape", "layout", "channels", "fix"),
    [
        (["n", 1, 16, 16], "NCHW", 3, "decode with 'mode: L' (grey"),
        (["n", 16, 16, 1], "NHWC", 3, "decode with 'mode: L'"),
        (["n", 3, "h", "w"], "NCHW", 1, "decode with 'mode: RGB'"),
        (["n", 4, "h", "w"], "NCHW", 3, "decode with 'mode: RGBA'"),
        (["n", 13, "h", "w"], "NCHW", 3, "decode with 'mode: bands, channels: 13'"),
    ],
)
def test_a_mismatch_names_both_counts_and_the_fix(
    shape: list[object], layout: str, channels: int, fix: str
) -> None:
    found = channel_mismatch(shape, layout, "input", channels, "X")
    assert found is not None
    model = model_channels(shape, layout)
    assert f"the preprocessing makes {channels}-channel images (X)" in found
    assert f"it takes {model} channel" in found and fix in found


def test_a_count_on_the_other_axis_is_named_a_layout_mismatch() -> None:
    """A 5-band NCHW model declared NHWC: its shape alone does not tell the layout (5 is no
    usual channel count), but the pipeline's 5 bands sit on its channels-first axis."""
    found = channel_mismatch(["n", 5, 64, 64], "NHWC", "input", 5, "bands")
    assert found is not None
    assert "read as NHWC it would take 64 channels, as NCHW the 5 the preprocessing makes" in found
    assert "set layout: NCHW" in found and "mode: bands" not in found


@pytest.mark.parametrize(
    ("shape", "layout"),
    [(["n", "c", "h", "w"], "NCHW"), (["n", 3, "h", "w"], "NCHW"), (["n", 1000], "NCHW")],
)
def test_a_symbolic_or_matching_axis_passes(shape: list[object], layout: str) -> None:
    assert channel_mismatch(shape, layout, "input", 3) is None


def test_the_pipelines_count_comes_from_the_decode_mode() -> None:
    def made(step: Decode) -> tuple[int, str]:
        final = Pipeline([step]).final
        return final.channels, final.order

    assert made(Decode(mode="L")) == (1, "L")
    assert made(Decode(mode="RGBA", order="BGR")) == (4, "BGRA")
    assert made(Decode(backend="numpy", mode="bands", channels=9, dtype="uint16")) == (9, "bands")


MANIFEST = """\
name: m
version: "1"
framework: {name: onnxruntime}
model: {format: onnx, file: {path: m.onnx, sha256: %s}}
inputs:
  - name: input
    layout: NCHW
    preprocess:
      - decode: {backend: pil}
      - cast: {dtype: float32}
      - layout: {order: NCHW}
dataset: {name: d, checksums: d.sha256, classes: 3}
""" % ("a" * 64)


def test_the_channel_check_names_the_decode_line(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(textwrap.dedent(MANIFEST))
    manifest = load_manifest(path)
    check_signature(manifest, ModelSignature("the model", ["n", 3, "h", "w"]))
    with pytest.raises(SignatureError) as info:
        check_signature(manifest, ModelSignature("the model", ["n", 1, "h", "w"]))
    assert "m.yaml:9: inputs[0].preprocess[0].decode.mode: the preprocessing makes 3-channel" in (
        str(info.value)
    )


def test_torch_modules_tell_their_channels() -> None:
    torch = pytest.importorskip("torch")
    from pytest_mlrepro.runners.torch import input_shape

    grey = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.Flatten())
    shape, source = input_shape(grey, "NCHW")  # type: ignore[misc]
    assert shape == ["?", 1, "?", "?"] and source is not None
    found = channel_mismatch(shape, "NCHW", "input", 3, "RGB", source)
    assert found is not None
    assert "the model's first convolution '0' is Conv2d(1, 4" in found and "mode: L" in found
    # The first layer with weights is no convolution: nothing is read (no guess).
    dense = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(48, 3))
    assert input_shape(dense, "NCHW") is None
    exported = torch.export.export(grey, (torch.zeros(2, 1, 8, 8),)).module()
    shape, source = input_shape(exported, "NCHW")  # type: ignore[misc]
    assert model_channels(shape, "NCHW") == 1 and source is None
