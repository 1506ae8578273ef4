"""Each preset against the arithmetic of the reference implementation it cites: the manifest
steps a preset writes, run through the pipeline's own ops, give the crop box, the resize and the
values that the source computes, for every size the preset accepts; other sizes are refused.

The sources' arithmetic is written out here from the files the presets cite:

* tensorflow/tpu models/official/efficientnet/preprocessing.py (f1a5906),
  ``_decode_and_center_crop``: ``crop = tf.cast(S / (S + 32) * tf.cast(min(h, w), float32),
  int32)``, ``offset = ((dim - crop) + 1) // 2``, ``resize_bicubic``; the Lite builder's
  ``MEAN_RGB = 127``, ``STDDEV_RGB = 128``;
* tensorflow/models slim inception_preprocessing.py ``preprocess_for_eval``:
  ``tf.image.central_crop(image, 0.875)``, whose offset is ``int((dim - dim * f) / 2)``;
* torchvision references/classification/presets.py ``ClassificationPresetEval``: Resize(256),
  CenterCrop(224) (offset ``int(round((dim - crop) / 2))``);
* timm/data/transforms_factory.py ``transforms_imagenet_eval``: ``floor(S / 0.875)``;
* BVLC/caffe python/caffe/classifier.py ``predict(oversample=False)``: resize to 256×256, crop
  ``center ± crop_dims / 2`` (a float slice, truncated);
* keras/src/applications/imagenet_utils.py ``_preprocess_numpy_input``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest

from pytest_mlrepro import pipeline
from pytest_mlrepro.onboarding import PRESETS, PresetSizeError, preset_steps

SHAPES = [(h, w) for h in (17, 100, 224, 259, 333, 375, 480, 500, 641, 1024, 2999) for w in
          (31, 224, 260, 299, 500, 640, 777)]  # fmt: skip


def steps(preset: str, size: int, dtype: str = "float32") -> list[pipeline.Step]:
    out = []
    for text in preset_steps(PRESETS[preset], size, size, "NHWC", dtype):
        ((op, params),) = text.items()
        converted = {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()}
        out.append(pipeline.STEPS[op](**converted))
    return out


S = TypeVar("S", bound=pipeline.Step)

def of(kind: type[S], chain: list[pipeline.Step]) -> list[S]:
    return [s for s in chain if isinstance(s, kind)]


def google_crop(size: int, height: int, width: int) -> tuple[int, int, int, int]:
    """preprocessing.py _decode_and_center_crop, as TensorFlow computes it (float32)."""
    side = int(np.float32(size / (size + 32)) * np.float32(min(height, width)))
    return ((height - side) + 1) // 2, ((width - side) + 1) // 2, side, side


LITE = {"efficientnet-lite0": 224, "efficientnet-lite1": 240, "efficientnet-lite2": 260,
        "efficientnet-lite3": 280, "efficientnet-lite4": 300}  # fmt: skip


@pytest.mark.parametrize(("name", "size"), LITE.items())
def test_efficientnet_lite_variants_crop_as_google_at_their_size(name: str, size: int) -> None:
    chain = steps(name, size)
    (crop,) = of(pipeline.Crop, chain)
    (resize,) = of(pipeline.Resize, chain)
    for height, width in SHAPES:
        assert crop.box(height, width) == google_crop(size, height, width), (height, width)
    assert (resize.size, resize.method) == ((size, size), "bicubic")
    (normalize,) = of(pipeline.Normalize, chain)
    assert normalize.mean == (127.0,) * 3 and normalize.std == (128.0,) * 3
    # At 260 the crop is 260/292 of the shorter side, not the 0.875 of 224.
    assert crop.box(292, 292)[2] == size * 292 // (size + 32)
    assert PRESETS[name].source.startswith("tensorflow/tpu models/official/efficientnet/")


@pytest.mark.parametrize("name", LITE)
def test_a_lite_variant_refuses_another_size(name: str) -> None:
    other = 224 if LITE[name] != 224 else 260
    with pytest.raises(PresetSizeError, match=f"{LITE[name]} only"):
        steps(name, other)


@pytest.mark.parametrize("size", [16, 96, 224, 256, 384, 512])
def test_the_generic_lite_preset_is_googles_formula_at_any_size(size: int) -> None:
    (crop,) = of(pipeline.Crop, steps("efficientnet-lite", size))
    for height, width in SHAPES:
        assert crop.box(height, width) == google_crop(size, height, width)


@pytest.mark.parametrize("size", [128, 224, 299, 331])
def test_inception_is_tf_central_crop(size: int) -> None:
    chain = steps("inception", size)
    (crop,) = of(pipeline.Crop, chain)
    for height, width in SHAPES:
        top, left = int((height - height * 0.875) / 2), int((width - width * 0.875) / 2)
        assert crop.box(height, width) == (top, left, height - 2 * top, width - 2 * left)
    (resize,) = of(pipeline.Resize, chain)
    assert (resize.size, resize.method) == ((size, size), "bilinear")


def test_torchvision_is_resize_256_crop_224_and_nothing_else() -> None:
    chain = steps("torchvision", 224)
    (resize,) = of(pipeline.Resize, chain)
    (crop,) = of(pipeline.Crop, chain)
    assert (resize.shorter_side, resize.method) == (256, "bilinear")
    for height, width in SHAPES:
        short_h, short_w = resize.target(height, width)
        assert min(short_h, short_w) == 256
        top, left = int(round((short_h - 224) / 2.0)), int(round((short_w - 224) / 2.0))
        assert crop.box(short_h, short_w) == (top, left, 224, 224)
    with pytest.raises(PresetSizeError, match="224 only"):
        steps("torchvision", 240)


@pytest.mark.parametrize("size", [16, 160, 224, 240, 256, 288, 299, 384, 448])
def test_timm_resizes_to_floor_size_over_crop_pct(size: int) -> None:
    chain = steps("timm", size)
    (resize,) = of(pipeline.Resize, chain)
    (crop,) = of(pipeline.Crop, chain)
    assert resize.shorter_side == math.floor(size / 0.875)
    assert crop.size == (size, size) and crop.rounding == "torchvision"


@pytest.mark.parametrize("size", [224, 227])
def test_caffe_squashes_to_256_and_crops_as_classifier_py(size: int) -> None:
    chain = steps("caffe", size)
    (resize,) = of(pipeline.Resize, chain)
    (crop,) = of(pipeline.Crop, chain)
    assert resize.size == (256, 256)
    # classifier.py: crop = center ± crop_dims / 2.0 on a 256×256 image, sliced (truncated).
    start = int(256 / 2.0 - size / 2.0)
    assert crop.box(256, 256) == (start, start, size, size)
    decode = chain[0]
    assert decode.order == "BGR"  # type: ignore[attr-defined]
    with pytest.raises(PresetSizeError, match="224, 227 only"):
        steps("caffe", 240)


def keras_reference(x: np.ndarray, mode: str) -> np.ndarray:
    """keras/src/applications/imagenet_utils.py _preprocess_numpy_input, channels_last, on RGB."""
    x = x.astype(np.float32)
    if mode == "tf":
        return x / 127.5 - 1.0
    if mode == "torch":
        mean, std = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])
        return ((x / 255.0 - mean) / std).astype(np.float32)
    return (x[..., ::-1] - np.array([103.939, 116.779, 123.68])).astype(np.float32)


def values_of(preset: str, rgb: np.ndarray, size: int = 8) -> np.ndarray:
    """The preset's colour order and value steps applied by the pipeline to ``rgb`` pixels."""
    chain = steps(preset, size)
    tensor = pipeline.Tensor(rgb, "RGB")
    if chain[0].order == "BGR":  # type: ignore[attr-defined]
        tensor = pipeline.Color(order="BGR").apply(tensor)
    for step in chain:
        if isinstance(step, (pipeline.Cast, pipeline.Scale, pipeline.Normalize)):
            tensor = step.apply(tensor)
    return tensor.array


@pytest.mark.parametrize("mode", ["caffe", "tf", "torch"])
def test_keras_presets_compute_preprocess_input(mode: str) -> None:
    rgb = np.random.default_rng(0).integers(0, 256, size=(8, 8, 3)).astype(np.uint8)
    np.testing.assert_allclose(values_of(f"keras-{mode}", rgb), keras_reference(rgb, mode),
                               rtol=1e-6, atol=1e-5)  # fmt: skip
    (resize,) = of(pipeline.Resize, steps(f"keras-{mode}", 8))
    assert resize.method == "nearest"  # keras.utils.load_img's default


def test_caffe_values_are_the_ilsvrc_mean_pixel_in_bgr() -> None:
    rgb = np.random.default_rng(1).integers(0, 256, size=(4, 4, 3)).astype(np.uint8)
    expected = rgb[..., ::-1].astype(np.float64) - np.array(
        [104.0069879317889, 116.66876761696767, 122.6789143406786])  # fmt: skip
    np.testing.assert_allclose(values_of("caffe", rgb, 224), expected, atol=1e-4)


def test_every_preset_cites_a_source_file() -> None:
    for preset in PRESETS.values():
        assert ".py" in preset.source, preset.name


@pytest.mark.parametrize(
    ("name", "mean", "std", "method", "divisor"),
    [
        ("grey-01", None, None, "bilinear", 255.0),
        ("mnist", (0.1307,), (0.3081,), "bilinear", 255.0),
        ("grey-255", None, None, "nearest", None),
    ],
)
def test_grey_presets_decode_one_channel_by_luma(
    name: str, mean: tuple | None, std: tuple | None, method: str, divisor: float | None
) -> None:
    """The grey presets: decode mode L (ITU-R 601-2 luma for a colour file), one channel to the
    model, the value transform of their source (torchvision's ToTensor, the PyTorch MNIST
    example's Normalize, Keras' img_to_array)."""
    chain = steps(name, 28)
    decode = chain[0]
    assert isinstance(decode, pipeline.Decode)
    assert (decode.mode, decode.convert) == ("L", "luma")
    final = pipeline.Pipeline(chain).final
    assert (final.order, final.channels, final.dtype) == ("L", 1, "float32")
    assert PRESETS[name].channels == 1 and PRESETS[name].order == "L"
    (resize,) = of(pipeline.Resize, chain)
    assert resize.method == method and resize.size == (28, 28)
    scales = of(pipeline.Scale, chain)
    assert [s.divisor for s in scales] == ([] if divisor is None else [divisor])
    norms = of(pipeline.Normalize, chain)
    assert [(n.mean, n.std) for n in norms] == ([] if mean is None else [(mean, std)])
    grey = np.arange(28 * 28, dtype=np.uint8).reshape(28, 28, 1)
    tensor = pipeline.Tensor(grey, "L")
    for step in chain[1:-1]:
        tensor = step.apply(tensor)
    expected = grey.astype(np.float32)
    if divisor is not None:
        expected = expected / np.float32(divisor)
    if mean is not None:
        expected = (expected - np.float32(mean[0])) / np.float32(std[0])  # type: ignore[index]
    np.testing.assert_array_equal(tensor.array, expected)


@pytest.mark.parametrize(
    ("name", "mean", "std"),
    [
        ("cifar10", (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
        ("cifar100", (0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
    ],
)
def test_cifar_presets_use_the_training_sets_statistics(
    name: str, mean: tuple, std: tuple
) -> None:
    chain = steps(name, 32)
    (norm,) = of(pipeline.Normalize, chain)
    np.testing.assert_allclose(norm.mean, mean, atol=5e-5)
    np.testing.assert_allclose(norm.std, std, atol=5e-5)
    assert [s.divisor for s in of(pipeline.Scale, chain)] == [255.0]
    assert PRESETS[name].channels == 3
    assert pipeline.Pipeline(chain).final.channels == 3


def test_the_preset_table_ships_with_the_package() -> None:
    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    assert '"onboarding/presets.yaml"' in pyproject.split("[tool.setuptools.package-data]")[1]
    assert list(PRESETS)[:6] == [*(f"efficientnet-lite{v}" for v in range(5)), "efficientnet-lite"]
