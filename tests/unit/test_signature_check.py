"""The one signature check every runner family hands what its model declares
(``runners/_signature.py: check_signature``): one message per mismatch, at the manifest's file,
line and field, whatever the format; and the one batch check.

The runners' own tests (test_integrity.py for ONNX, test_tensorflow.py for Keras, SavedModel,
frozen graphs and TFLite, test_channel_check.py for torch) show each family reaches it with its
model's real signature; these tests pin the check itself, on described signatures.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from pytest_mlrepro.errors import SignatureError
from pytest_mlrepro.manifest import Manifest, load_manifest
from pytest_mlrepro.runners._signature import ModelSignature, check_batch_shape, check_signature

MANIFEST = """\
name: m
version: "1"
framework: {name: onnxruntime}
model: {format: onnx, file: {path: m.onnx, sha256: %s}}
inputs:
  - name: input
    layout: NCHW
    dtype: float32
    preprocess:
      - decode: {backend: pil}
      - resize: {size: 16}
      - cast: {dtype: float32}
      - layout: {order: NCHW}
dataset: {name: d, checksums: d.sha256, classes: 3}
""" % ("a" * 64)


@pytest.fixture
def manifest(tmp_path: Path) -> Manifest:
    path = tmp_path / "m.yaml"
    path.write_text(textwrap.dedent(MANIFEST))
    return load_manifest(path)


def with_output(manifest: Manifest, text: str) -> Manifest:
    path = Path(manifest.source)
    path.write_text(textwrap.dedent(MANIFEST) + text)
    return load_manifest(path)


def signature(**fields: object) -> ModelSignature:
    described: dict[str, object] = {
        "model": "the Keras model",
        "shape": [None, 3, 16, 16],
        "inputs": ["input"],
        "dtype": "float32",
        "outputs": {"logits": [None, 3]},
    }
    described.update(fields)
    return ModelSignature(**described)  # type: ignore[arg-type]


def refusal(manifest: Manifest, described: ModelSignature) -> str:
    with pytest.raises(SignatureError) as info:
        check_signature(manifest, described)
    return str(info.value)


def test_a_model_that_fits_gives_its_output(manifest: Manifest) -> None:
    assert check_signature(manifest, signature()) == "logits"
    # A model that names no outputs (its loader found the output): nothing to choose.
    assert check_signature(manifest, signature(outputs=None)) is None


def test_each_mismatch_is_named_at_its_manifest_field(manifest: Manifest) -> None:
    m = "m.yaml"
    wrong_name = refusal(manifest, signature(inputs=["images"]))
    assert f"{m}:6: inputs[0].name: the Keras model's inputs are ['images'], the manifest " in (
        wrong_name
    )
    wrong_dtype = refusal(manifest, signature(dtype="uint8"))
    assert f"{m}:8: inputs[0].dtype: model input 'input' is uint8, the manifest declares " in (
        wrong_dtype
    )
    wrong_layout = refusal(manifest, signature(shape=[None, 16, 16, 3]))
    assert f"{m}:7: inputs[0].layout: the model's input 'input' is [?, 16, 16, 3]: channels " in (
        wrong_layout
    )
    assert "a layout mismatch; set layout: NHWC" in wrong_layout
    wrong_size = refusal(manifest, signature(shape=[None, 3, 32, 32]))
    assert f"{m}:11: inputs[0].preprocess[1].resize.size: the preprocessing makes 16×16 " in (
        wrong_size
    )
    wrong_classes = refusal(manifest, signature(outputs={"logits": [None, 4]}))
    assert (
        f"{m}:14: dataset.classes: the model's output 'logits' is [?, 4]: 4 classes, the "
        "manifest declares 3"
    ) in wrong_classes


def test_an_alias_is_accepted_and_a_second_input_refused(manifest: Manifest) -> None:
    tflite = signature(model="the TFLite model", inputs=["x"], aliases=["input"])
    assert check_signature(manifest, tflite) == "logits"
    two = refusal(manifest, signature(inputs=["input", "mask"]))
    assert "the Keras model takes 2 inputs ['input', 'mask']; image classification feeds one" in two


def test_the_output_is_the_only_one_or_the_one_the_manifest_names(manifest: Manifest) -> None:
    outputs = {"logits": [None, 3], "probs": [None, 3]}
    several = refusal(manifest, signature(outputs=outputs))
    assert "postprocess.output: the Keras model has outputs ['logits', 'probs']: name the one" in (
        several
    )
    named = with_output(manifest, "postprocess: {output: probs}\n")
    assert check_signature(named, signature(outputs=outputs)) == "probs"
    missing = refusal(named, signature())
    assert "the Keras model's outputs are ['logits'], postprocess.output names 'probs'" in missing


def test_a_shape_read_from_a_module_checks_channels_not_layout(manifest: Manifest) -> None:
    # A torch module's first convolution tells only its channel axis, in the declared layout.
    source = "the model's first convolution 'conv' is Conv2d(1, 8, ...)"
    grey = ModelSignature("the model", ["?", 1, "?", "?"], source=source)
    assert "it takes 1 channel" in refusal(manifest, grey)
    colour = ModelSignature("the model", ["?", 3, "?", "?"], source=source)
    assert check_signature(manifest, colour) is None


def test_symbolic_dimensions_take_any_size(manifest: Manifest) -> None:
    described = signature(shape=["batch", 3, "h", "w"], outputs={"logits": ["batch", "classes"]})
    assert check_signature(manifest, described) == "logits"
    check_batch_shape("input", ["batch", 3, "h", "w"], np.zeros((2, 3, 9, 7)), "NCHW")
    with pytest.raises(SignatureError, match=r"expects \[batch, 3, 32, 32\], .*a size mismatch"):
        check_batch_shape("input", ["batch", 3, 32, 32], np.zeros((8, 3, 16, 16)), "NCHW")
