"""The TensorFlow preprocessing backend against Pillow and OpenCV references: tf.io.decode_jpeg
(INTEGER_ACCURATE is Pillow's libjpeg-turbo to the bit, INTEGER_FAST is not), tf.image.resize
(its bilinear is OpenCV's INTER_LINEAR without antialias and Pillow's bilinear with it), and the
crop step's ``rounding: tf`` arithmetic against tf.image.central_crop."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import DATA, examples
from hypothesis import given, settings
from hypothesis import strategies as st

tf = pytest.importorskip("tensorflow")
cv2 = pytest.importorskip("cv2")

from PIL import Image  # noqa: E402

from pytest_mlrepro._schema import to_plain  # noqa: E402
from pytest_mlrepro.errors import ManifestError  # noqa: E402
from pytest_mlrepro.manifest._spec import parse_manifest  # noqa: E402
from pytest_mlrepro.pipeline._steps import Crop, Decode, Method, Pipeline, Resize, Tensor  # noqa: E402

SAMPLE = DATA / "imagenet-sample"
JPEGS = sorted(SAMPLE.glob("*.JPEG"))[:40] if SAMPLE.is_dir() else []
needs_jpegs = pytest.mark.skipif(not JPEGS, reason=f"no ImageNet sample JPEGs at {SAMPLE}")


def decoded(step: Decode, path: Path) -> np.ndarray:
    return step.decode(path.read_bytes(), path.name).array


# --- decode -------------------------------------------------------------------------------------


@needs_jpegs
def test_integer_accurate_is_bit_identical_to_pillow_and_integer_fast_is_not() -> None:
    pil = Decode(backend="pil")
    accurate = Decode(backend="tf", dct_method="INTEGER_ACCURATE")
    fast = Decode(backend="tf", dct_method="INTEGER_FAST")
    fast_differs = 0
    for path in JPEGS:
        reference = decoded(pil, path)
        assert np.array_equal(decoded(accurate, path), reference), path.name
        fast_differs += not np.array_equal(decoded(fast, path), reference)
    assert fast_differs >= len(JPEGS) * 0.9  # nearly every photograph differs somewhere


@needs_jpegs
def test_tf_decode_of_a_grayscale_jpeg_gives_three_equal_channels() -> None:
    gray = next(p for p in sorted(SAMPLE.glob("*.JPEG")) if Image.open(p).mode == "L")
    array = decoded(Decode(backend="tf", dct_method="INTEGER_ACCURATE"), gray)
    assert array.ndim == 3 and array.shape[2] == 3
    assert np.array_equal(array, decoded(Decode(backend="pil"), gray))


def test_tf_decode_of_png_and_bgr_order() -> None:
    rng = np.random.default_rng(3)
    image = rng.integers(0, 256, (9, 11, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")
    rgb = Decode(backend="tf").decode(buffer.getvalue(), "x.png")
    bgr = Decode(backend="tf", order="BGR").decode(buffer.getvalue(), "x.png")
    assert np.array_equal(rgb.array, image) and rgb.order == "RGB"
    assert np.array_equal(bgr.array, image[..., ::-1])


def test_tf_decode_of_garbage_names_the_sample() -> None:
    from pytest_mlrepro.errors import SampleError

    with pytest.raises(SampleError, match=r"sample 'bad.jpg': tf.io cannot decode it"):
        Decode(backend="tf").decode(b"\xff\xd8\xffnot a jpeg", "bad.jpg")


def test_tf_decode_records_its_dct_method_and_other_backends_have_none() -> None:
    assert Decode(backend="tf").dct_method == "INTEGER_FAST"  # TensorFlow's default, filled in
    assert to_plain(Decode(backend="tf"))["dct_method"] == "INTEGER_FAST"
    assert "dct_method" not in to_plain(Decode(backend="pil"))  # goldens of pil decodes unchanged


def _manifest(steps: list[Any]) -> dict:
    return {
        "name": "m",
        "version": "1",
        "framework": {"name": "onnxruntime"},
        "model": {"format": "onnx", "file": {"path": "m.onnx", "sha256": "0" * 64}},
        "inputs": [{"name": "input", "layout": "NHWC", "preprocess": steps}],
        "dataset": {"name": "d", "checksums": "d.sha256"},
    }


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        (
            [{"decode": {"backend": "pil", "dct_method": "INTEGER_ACCURATE"}}],
            "decode.dct_method: only backend 'tf' has a dct_method",
        ),
        (
            [{"decode": {"backend": "tf", "exif_orientation": True}}],
            "decode.exif_orientation: tf.io.decode_jpeg ignores EXIF orientation",
        ),
        (
            [{"decode": {"backend": "tf", "dct_method": "INTEGER_SLOW"}}],
            "'INTEGER_SLOW' is not one of 'INTEGER_FAST', 'INTEGER_ACCURATE'",
        ),
        (
            [{"decode": {}}, {"resize": {"size": 8, "backend": "tf", "method": "box"}}],
            "resize.method: tf.image.resize has no 'box' method",
        ),
    ],
)
def test_tf_options_are_validated_with_the_field(steps: list, message: str) -> None:
    with pytest.raises(ManifestError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_manifest(_manifest(steps), "m.yaml", {})


# --- resize -------------------------------------------------------------------------------------

IMAGE = np.random.default_rng(0).uniform(0, 255, (37, 53, 3)).astype(np.float32)
SIZES = [(74, 106), (20, 30), (16, 16)]


def tf_resize(
    h: int, w: int, method: Method, antialias: bool, image: np.ndarray = IMAGE
) -> np.ndarray:
    step = Resize(size=(h, w), method=method, backend="tf", antialias=antialias)
    return step.apply(Tensor(image, "RGB")).array


@pytest.mark.parametrize("size", SIZES)
def test_tf_bilinear_is_opencv_without_antialias_and_pillow_with_it(size: tuple) -> None:
    h, w = size
    opencv = cv2.resize(IMAGE, (w, h), interpolation=cv2.INTER_LINEAR)
    pillow = np.stack(
        [
            np.asarray(Image.fromarray(IMAGE[:, :, c]).resize((w, h), Image.Resampling.BILINEAR))
            for c in range(3)
        ],
        axis=2,
    )
    plain, smooth = tf_resize(h, w, "bilinear", False), tf_resize(h, w, "bilinear", True)
    np.testing.assert_allclose(plain, opencv, atol=1e-3)
    np.testing.assert_allclose(smooth, pillow, atol=1e-3)
    if h < IMAGE.shape[0]:  # shrinking: antialias changes pixels, by far more than float noise
        assert np.abs(plain - smooth).max() > 1.0


@pytest.mark.parametrize("size", SIZES)
def test_tf_area_and_nearest_are_opencvs(size: tuple) -> None:
    h, w = size
    area = cv2.resize(IMAGE, (w, h), interpolation=cv2.INTER_AREA)
    nearest = cv2.resize(IMAGE, (w, h), interpolation=cv2.INTER_NEAREST_EXACT)
    np.testing.assert_allclose(tf_resize(h, w, "area", False), area, atol=1e-3)
    assert np.array_equal(tf_resize(h, w, "nearest", False), nearest)


@pytest.mark.parametrize("method", ["bicubic", "lanczos"])
def test_tf_methods_are_tf_image_resize_methods_lanczos_its_lanczos3(method: Method) -> None:
    name = "lanczos3" if method == "lanczos" else method
    want = tf.image.resize(IMAGE, [20, 30], method=name, antialias=True).numpy()
    assert np.array_equal(tf_resize(20, 30, method, True), want)


def test_tf_resize_returns_float32_as_tensorflow_does() -> None:
    image = np.random.default_rng(1).integers(0, 256, (40, 60, 3), dtype=np.uint8)
    out = tf_resize(20, 30, "bilinear", False, image)
    assert out.dtype == np.float32
    assert tf_resize(20, 30, "nearest", False, image).dtype == np.uint8
    assert tf_resize(40, 60, "bilinear", False, image).dtype == np.float32  # same size too
    # The static state says so too: no cast needed before normalize after a tf resize.
    steps = [Decode(), Resize(size=8, backend="tf")]
    assert Pipeline(steps).final.dtype == "float32"
    assert Resize(size=8, backend="tf").antialias is False  # TensorFlow's default, filled in


def test_backends_mix_per_step() -> None:
    """tf decode, tf crop arithmetic, Pillow resize, then tf resize, in one pipeline."""
    from pytest_mlrepro.pipeline._steps import Layout, Normalize

    image = np.random.default_rng(5).integers(0, 256, (50, 70, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")
    steps = [
        Decode(backend="tf"),
        Crop(fraction=0.8, rounding="tf"),
        Resize(size=(30, 30), backend="pil"),
        Resize(size=(16, 16), backend="tf", antialias=True),
        Normalize(mean=(127.0,), std=(128.0,)),
        Layout(order="NHWC"),
    ]
    out = Pipeline(steps)(buffer.getvalue(), "x.png")
    crop = Crop(fraction=0.8, rounding="tf").apply(Tensor(image, "RGB")).array
    pil = np.asarray(Image.fromarray(crop).resize((30, 30), Image.Resampling.BILINEAR))
    want = (tf.image.resize(pil, [16, 16], antialias=True).numpy() - 127.0) / 128.0
    assert out.dtype == np.float32 and out.shape == (16, 16, 3)
    np.testing.assert_allclose(out, want, atol=1e-6)


# --- crop ---------------------------------------------------------------------------------------


@settings(max_examples=examples(60), deadline=None)
@given(
    height=st.integers(1, 400),
    width=st.integers(1, 400),
    fraction=st.floats(0.01, 1.0, allow_nan=False, exclude_min=False),
)
def test_crop_rounding_tf_is_tf_image_central_crop(
    height: int, width: int, fraction: float
) -> None:
    image = np.arange(height * width * 3, dtype=np.int32).reshape(height, width, 3) % 251
    ours = Crop(fraction=fraction, rounding="tf").apply(Tensor(image, "RGB")).array
    theirs = tf.image.central_crop(image, fraction).numpy()
    assert ours.shape == theirs.shape and np.array_equal(ours, theirs)


@pytest.mark.parametrize("fraction", [0.875, 0.5, 1.0, 0.3333])
@pytest.mark.parametrize("shape", [(224, 224), (333, 500), (500, 333), (7, 9)])
def test_crop_rounding_tf_on_common_shapes(fraction: float, shape: tuple) -> None:
    image = np.random.default_rng(2).integers(0, 256, (*shape, 3), dtype=np.uint8)
    ours = Crop(fraction=fraction, rounding="tf").apply(Tensor(image, "RGB")).array
    assert np.array_equal(ours, tf.image.central_crop(image, fraction).numpy())
