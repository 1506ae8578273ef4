"""Unit tests of the preprocessing ops, each against an independent computation.

Every expected value here is computed directly with numpy, Pillow or OpenCV (or by brute force),
never by calling the op under test a second time.
"""

from __future__ import annotations

import io
import math
import struct
import zlib
from typing import Literal

import cv2
import numpy as np
import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from pytest_mlrepro._schema import Invalid
from pytest_mlrepro.errors import SampleError
from pytest_mlrepro.pipeline._steps import (
    STEPS,
    Cast,
    CastDType,
    ChannelOrder,
    Color,
    Crop,
    Decode,
    Layout,
    Method,
    Normalize,
    Pipeline,
    Resize,
    Scale,
    State,
    Tensor,
)

HYPOTHESIS = settings(max_examples=examples(200), deadline=None)

# The Literal types of the steps' parameters, for the parametrised tests' arguments.
DecodeBackend = Literal["pil", "opencv", "tf", "numpy"]
ResizeBackend = Literal["pil", "opencv", "tf"]

# --- helpers ------------------------------------------------------------------------------------


def coords(height: int, width: int) -> np.ndarray:
    """An H×W×3 image whose pixels encode where they are: (row + 1, column + 1, 7).

    Offsets start at 1 so that zero padding is distinguishable from real pixels.
    """
    rows, cols = np.meshgrid(np.arange(height), np.arange(width), indexing="ij")
    return np.stack([rows + 1, cols + 1, np.full_like(rows, 7)], axis=2).astype(np.int32)


def random_image(height: int, width: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8)


def encode(image: Image.Image, fmt: str, **kwargs: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **kwargs)
    return buffer.getvalue()


def smooth_image(height: int, width: int, seed: int = 0) -> np.ndarray:
    """A photo-like image (smooth gradients plus noise) that compresses like a real JPEG."""
    rng = np.random.default_rng(seed)
    rows, cols = np.meshgrid(np.linspace(0, 1, height), np.linspace(0, 1, width), indexing="ij")
    base = np.stack([rows, cols, (rows + cols) / 2], axis=2) * 200
    return np.clip(base + rng.normal(0, 20, base.shape), 0, 255).astype(np.uint8)


def hwc(array: np.ndarray, order: str = "RGB") -> Tensor:
    return Tensor(array, order, "HWC")


def chw(array: np.ndarray, order: str = "RGB") -> Tensor:
    return Tensor(array, order, "CHW")


def round_half_even_offset(excess: int) -> int:
    """torchvision's ``int(round(excess / 2.0))``, by brute force over the candidate offsets."""
    candidates = range(math.floor(excess / 2) - 1, math.ceil(excess / 2) + 2)
    return min(candidates, key=lambda o: (abs(2 * o - excess), o % 2))


def torchvision_center_crop(image: np.ndarray, crop_h: int, crop_w: int) -> np.ndarray:
    """torchvision.transforms.functional.center_crop, transcribed for an H×W×C array."""
    height, width = image.shape[:2]
    if crop_w > width or crop_h > height:
        pad_left = (crop_w - width) // 2 if crop_w > width else 0
        pad_top = (crop_h - height) // 2 if crop_h > height else 0
        pad_right = (crop_w - width + 1) // 2 if crop_w > width else 0
        pad_bottom = (crop_h - height + 1) // 2 if crop_h > height else 0
        canvas = np.zeros(
            (height + pad_top + pad_bottom, width + pad_left + pad_right, image.shape[2]),
            image.dtype,
        )
        canvas[pad_top : pad_top + height, pad_left : pad_left + width] = image
        image = canvas
        height, width = image.shape[:2]
        if (crop_h, crop_w) == (height, width):
            return image
    top = round_half_even_offset(height - crop_h)
    left = round_half_even_offset(width - crop_w)
    return image[top : top + crop_h, left : left + crop_w]


def assert_window(out: np.ndarray, top: int, left: int, crop_h: int, crop_w: int) -> None:
    """``out`` is the crop_h × crop_w window of a :func:`coords` image starting at (top, left)."""
    assert out.shape == (crop_h, crop_w, 3)
    rows = np.arange(crop_h)[:, None] + top + 1
    cols = np.arange(crop_w)[None, :] + left + 1
    np.testing.assert_array_equal(out[:, :, 0], np.broadcast_to(rows, (crop_h, crop_w)))
    np.testing.assert_array_equal(out[:, :, 1], np.broadcast_to(cols, (crop_h, crop_w)))
    assert (out[:, :, 2] == 7).all()


def test_every_op_is_registered() -> None:
    assert {"decode", "color", "crop", "resize", "cast", "scale", "normalize", "layout"} <= set(
        STEPS
    )
    assert STEPS["resize"] is Resize and STEPS["decode"] is Decode


# --- crop ---------------------------------------------------------------------------------------


@HYPOTHESIS
@given(
    height=st.integers(1, 400),
    width=st.integers(1, 400),
    fraction=st.floats(0.01, 1.0, allow_nan=False),
)
def test_crop_google_fraction(height: int, width: int, fraction: float) -> None:
    side = int(fraction * min(height, width))
    if side < 1:
        return
    top, left = math.ceil((height - side) / 2), math.ceil((width - side) / 2)
    crop = Crop(fraction=fraction, rounding="google")
    crop.check()
    assert crop.box(height, width) == (top, left, side, side)
    out = crop.apply(hwc(coords(height, width))).array
    assert_window(out, top, left, side, side)
    # The crop is centred with the extra pixel (if any) left over at the top/left.
    assert (height - side - top) in (top, top - 1)


@HYPOTHESIS
@given(data=st.data(), height=st.integers(1, 300), width=st.integers(1, 300))
def test_crop_google_size(data: st.DataObject, height: int, width: int) -> None:
    crop_h = data.draw(st.integers(1, height))
    crop_w = data.draw(st.integers(1, width))
    crop = Crop(size=(crop_h, crop_w), rounding="google")
    crop.check()
    out = crop.apply(hwc(coords(height, width))).array
    assert_window(
        out, math.ceil((height - crop_h) / 2), math.ceil((width - crop_w) / 2), crop_h, crop_w
    )


def test_crop_google_square_size_int() -> None:
    out = Crop(size=3, rounding="google").apply(hwc(coords(6, 9))).array
    assert_window(out, 2, 3, 3, 3)  # offsets ceil(3/2) = 2 and ceil(6/2) = 3


def test_crop_google_larger_than_image_is_a_sample_error() -> None:
    with pytest.raises(ValueError, match="larger than"):
        Crop(size=10, rounding="google").apply(hwc(coords(8, 20)))
    pipe = Pipeline([Decode(), Crop(size=64, rounding="google")])
    data = encode(Image.fromarray(random_image(32, 48)), "PNG")
    with pytest.raises(SampleError, match=r"small\.png") as info:
        pipe(data, "small.png")
    assert info.value.sample == "small.png"
    assert "crop failed" in str(info.value)


def tf_central_crop_box(height: int, width: int, fraction: float) -> tuple[int, int, int, int]:
    """tf.image.central_crop: float64 arithmetic, int32 cast (truncation), size dim - 2*start."""
    img_h, img_w = np.float64(height), np.float64(width)
    frac = np.float64(fraction)
    start_h = int(np.int32((img_h - img_h * frac) / 2))
    start_w = int(np.int32((img_w - img_w * frac) / 2))
    return start_h, start_w, height - 2 * start_h, width - 2 * start_w


@HYPOTHESIS
@given(
    height=st.integers(1, 400),
    width=st.integers(1, 400),
    fraction=st.floats(0.01, 1.0, allow_nan=False),
)
def test_crop_tf(height: int, width: int, fraction: float) -> None:
    crop = Crop(fraction=fraction, rounding="tf")
    crop.check()
    top, left, crop_h, crop_w = tf_central_crop_box(height, width, fraction)
    assert crop.box(height, width) == (top, left, crop_h, crop_w)
    assert crop_h >= 1 and crop_w >= 1
    out = crop.apply(hwc(coords(height, width))).array
    assert_window(out, top, left, crop_h, crop_w)
    # tf keeps the margins equal on both sides (the crop size absorbs the odd pixel).
    assert height - crop_h - top == top and width - crop_w - left == left


@pytest.mark.parametrize(
    ("dim", "fraction", "google", "tf"),
    [
        # (dim, fraction, google (offset, size), tf (offset, size)), worked out by hand
        (299, 0.875, (19, 261), (18, 263)),  # google: int(261.625)=261, (38+1)//2=19
        (5, 0.5, (2, 2), (1, 3)),  # tf: int(1.25)=1 -> 5-2=3; google: int(2.5)=2, (3+1)//2=2
        (256, 0.875, (16, 224), (16, 224)),  # exact: both agree
        (10, 1.0, (0, 10), (0, 10)),
    ],
)
def test_crop_rounding_rules_differ_by_a_pixel(
    dim: int, fraction: float, google: tuple[int, int], tf: tuple[int, int]
) -> None:
    g = Crop(fraction=fraction, rounding="google").box(dim, dim)
    t = Crop(fraction=fraction, rounding="tf").box(dim, dim)
    assert (g[0], g[2]) == google
    assert (t[0], t[2]) == tf


@HYPOTHESIS
@given(data=st.data(), height=st.integers(1, 300), width=st.integers(1, 300))
def test_crop_torchvision_within_image(data: st.DataObject, height: int, width: int) -> None:
    crop_h = data.draw(st.integers(1, height))
    crop_w = data.draw(st.integers(1, width))
    crop = Crop(size=(crop_h, crop_w), rounding="torchvision")
    crop.check()
    out = crop.apply(hwc(coords(height, width))).array
    top, left = round_half_even_offset(height - crop_h), round_half_even_offset(width - crop_w)
    assert_window(out, top, left, crop_h, crop_w)
    np.testing.assert_array_equal(
        out, torchvision_center_crop(coords(height, width), crop_h, crop_w)
    )


def test_crop_torchvision_uses_bankers_rounding() -> None:
    # excess 1 -> round(0.5) = 0; excess 3 -> round(1.5) = 2; excess 5 -> round(2.5) = 2
    assert Crop(size=(9, 7), rounding="torchvision").box(10, 10) == (0, 2, 9, 7)
    assert Crop(size=(5, 5), rounding="torchvision").box(10, 10) == (2, 2, 5, 5)
    # google would put the odd pixel the other way: (excess + 1) // 2
    assert Crop(size=(9, 7), rounding="google").box(10, 10) == (1, 2, 9, 7)


@HYPOTHESIS
@given(
    height=st.integers(1, 60),
    width=st.integers(1, 60),
    extra_h=st.integers(2, 40),
    extra_w=st.integers(-59, 40),
)
def test_crop_torchvision_pads_when_image_is_smaller(
    height: int, width: int, extra_h: int, extra_w: int
) -> None:
    # At least one side is 2+ pixels short of the crop (the 1-pixel case is a known bug, below).
    crop_h, crop_w = height + extra_h, max(1, width + extra_w)
    crop = Crop(size=(crop_h, crop_w), rounding="torchvision")
    image = coords(height, width)
    out = crop.apply(hwc(image)).array
    assert out.shape == (crop_h, crop_w, 3)
    np.testing.assert_array_equal(out, torchvision_center_crop(image, crop_h, crop_w))
    # Every image pixel that is inside the crop survives and the rest is zero padding.
    real = out[:, :, 2] == 7
    assert real.sum() == min(height, crop_h) * min(width, crop_w)
    assert (out[~real] == 0).all()


@pytest.mark.parametrize(
    ("height", "width", "size"),
    [(10, 10, (11, 11)), (10, 20, (11, 5)), (7, 7, (8, 7)), (224, 300, (225, 224))],
)
def test_crop_torchvision_one_pixel_larger_than_image(
    height: int, width: int, size: tuple[int, int]
) -> None:
    image = coords(height, width)
    out = Crop(size=size, rounding="torchvision").apply(hwc(image)).array
    assert out.shape == (*size, 3)
    np.testing.assert_array_equal(out, torchvision_center_crop(image, *size))


@pytest.mark.parametrize(
    ("kwargs", "field", "words"),
    [
        ({}, (), "exactly one of 'fraction' and 'size'"),
        ({"fraction": 0.5, "size": 3}, (), "exactly one"),
        ({"fraction": 0.0}, ("fraction",), "not in (0, 1]"),
        ({"fraction": 1.5}, ("fraction",), "not in (0, 1]"),
        ({"size": 0}, ("size",), "positive"),
        ({"size": (4, -1)}, ("size",), "positive"),
        ({"fraction": 0.5, "rounding": "torchvision"}, ("rounding",), "takes a size"),
        ({"size": 224, "rounding": "tf"}, ("rounding",), "takes a fraction"),
    ],
)
def test_crop_check_rejects(kwargs: dict, field: tuple, words: str) -> None:
    with pytest.raises(Invalid) as info:
        Crop(**kwargs).check()
    assert info.value.path == field
    assert words in info.value.message


def test_crop_keeps_order_and_dtype() -> None:
    image = random_image(20, 30)
    out = Crop(size=(10, 10)).apply(hwc(image, "BGR"))
    assert out.order == "BGR" and out.layout == "HWC" and out.array.dtype == np.uint8
    assert out.array.flags.c_contiguous
    np.testing.assert_array_equal(out.array, image[5:15, 10:20])


# --- resize -------------------------------------------------------------------------------------

PIL_FILTERS = {
    "nearest": Image.Resampling.NEAREST,
    "bilinear": Image.Resampling.BILINEAR,
    "bicubic": Image.Resampling.BICUBIC,
    "box": Image.Resampling.BOX,
    "lanczos": Image.Resampling.LANCZOS,
}
CV2_FILTERS = {
    "nearest": cv2.INTER_NEAREST,
    "bilinear": cv2.INTER_LINEAR,
    "bicubic": cv2.INTER_CUBIC,
    "area": cv2.INTER_AREA,
    "lanczos": cv2.INTER_LANCZOS4,
}
RESIZE_SHAPES = [(37, 53), (224, 224), (301, 97), (8, 5)]


@pytest.mark.parametrize("method", sorted(PIL_FILTERS))
@pytest.mark.parametrize("target", RESIZE_SHAPES)
def test_resize_pil_equals_pillow(method: Method, target: tuple[int, int]) -> None:
    image = random_image(120, 160, seed=1)
    step = Resize(size=target, method=method, backend="pil")
    step.check()
    out = step.apply(hwc(image)).array
    expected = np.asarray(Image.fromarray(image).resize(target[::-1], PIL_FILTERS[method]))
    assert out.shape == (*target, 3) and out.dtype == np.uint8
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("method", sorted(PIL_FILTERS))
def test_resize_pil_float32_equals_pillow_mode_f(method: Method) -> None:
    image = np.random.default_rng(2).normal(0, 1, (50, 70, 3)).astype(np.float32)
    out = Resize(size=(31, 45), method=method, backend="pil").apply(hwc(image)).array
    planes = [
        np.asarray(
            Image.fromarray(np.ascontiguousarray(image[:, :, c]), mode="F").resize(
                (45, 31), PIL_FILTERS[method]
            )
        )
        for c in range(3)
    ]
    assert out.dtype == np.float32 and out.shape == (31, 45, 3)
    np.testing.assert_array_equal(out, np.stack(planes, axis=2))


@pytest.mark.parametrize("method", sorted(CV2_FILTERS))
@pytest.mark.parametrize("target", RESIZE_SHAPES)
@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_resize_opencv_equals_cv2(method: Method, target: tuple[int, int], dtype: type) -> None:
    image: np.ndarray = random_image(120, 160, seed=3).astype(dtype)
    step = Resize(size=target, method=method, backend="opencv")
    step.check()
    out = step.apply(hwc(image)).array
    expected = cv2.resize(image, (target[1], target[0]), interpolation=CV2_FILTERS[method])
    assert out.shape == (*target, 3) and out.dtype == dtype
    np.testing.assert_array_equal(out, expected)


def test_resize_square_int_size() -> None:
    image = random_image(40, 60)
    out = Resize(size=16, backend="pil").apply(hwc(image)).array
    np.testing.assert_array_equal(
        out, np.asarray(Image.fromarray(image).resize((16, 16), Image.Resampling.BILINEAR))
    )


@pytest.mark.parametrize(
    ("height", "width", "short", "expected"),
    [
        (375, 500, 256, (256, 341)),  # landscape: 256 * 500 / 375 = 341.33 -> 341
        (500, 375, 256, (341, 256)),  # portrait
        (500, 333, 256, (384, 256)),  # 256 * 500 / 333 = 384.38 -> 384
        (333, 500, 256, (256, 384)),
        (300, 300, 256, (256, 256)),
        (480, 640, 224, (224, 298)),  # 298.67 truncated, not rounded to 299
        (1, 1000, 3, (3, 3000)),
    ],
)
def test_resize_shorter_side_truncates(
    height: int, width: int, short: int, expected: tuple[int, int]
) -> None:
    step = Resize(shorter_side=short)
    step.check()
    assert step.target(height, width) == expected
    if max(height, width) <= 1000 and max(expected) <= 1000:
        out = step.apply(hwc(random_image(height, width))).array
        assert out.shape == (*expected, 3)


@HYPOTHESIS
@given(height=st.integers(1, 5000), width=st.integers(1, 5000), short=st.integers(1, 1024))
def test_resize_shorter_side_matches_torchvision_formula(
    height: int, width: int, short: int
) -> None:
    step = Resize(shorter_side=short)
    if width <= height:  # torchvision: the shorter side is the width (ties: either)
        expected = ((short * height) // width, short)
    else:
        expected = (short, (short * width) // height)
    assert step.target(height, width) == expected


@pytest.mark.parametrize("backend", ["pil", "opencv"])
def test_resize_to_same_size_is_identity(backend: ResizeBackend) -> None:
    image = random_image(24, 32)
    out = Resize(size=(24, 32), backend=backend).apply(hwc(image)).array
    np.testing.assert_array_equal(out, image)


def test_resize_bilinear_backends_differ_on_downscale() -> None:
    """The pitfall: same 'bilinear', different pixels (Pillow antialiases, OpenCV does not)."""
    image = random_image(224, 300, seed=4)
    pil = Resize(size=(56, 75), method="bilinear", backend="pil").apply(hwc(image)).array
    ocv = Resize(size=(56, 75), method="bilinear", backend="opencv").apply(hwc(image)).array
    assert pil.shape == ocv.shape == (56, 75, 3)
    assert pil.dtype == ocv.dtype == np.uint8
    diff = np.abs(pil.astype(int) - ocv.astype(int))
    assert (diff > 0).mean() > 0.5 and diff.max() > 20
    # Antialiasing averages the noise away: Pillow's output is much smoother.
    assert pil.std() < ocv.std()


@pytest.mark.parametrize(
    ("kwargs", "field", "words"),
    [
        ({"size": 8, "backend": "pil", "method": "area"}, ("method",), "'box'"),
        ({"size": 8, "backend": "opencv", "method": "box"}, ("method",), "'area'"),
        ({"size": 8, "backend": "pil", "antialias": False}, ("antialias",), "opencv"),
        ({"size": 8, "backend": "opencv", "antialias": True}, ("antialias",), "area"),
        ({}, (), "exactly one of 'size' and 'shorter_side'"),
        ({"size": 8, "shorter_side": 8}, (), "exactly one"),
        ({"size": 0}, ("size",), "positive"),
        ({"size": (8, 0)}, ("size",), "positive"),
        ({"shorter_side": 0}, ("shorter_side",), "positive"),
    ],
)
def test_resize_check_rejects(kwargs: dict, field: tuple, words: str) -> None:
    with pytest.raises(Invalid) as info:
        Resize(**kwargs).check()
    assert info.value.path == field
    assert words in info.value.message


@pytest.mark.parametrize(
    "kwargs",
    [
        {"size": 8, "backend": "pil", "antialias": True},
        {"size": 8, "backend": "pil", "method": "box"},
        {"size": 8, "backend": "opencv", "antialias": False},
        {"size": 8, "backend": "opencv", "method": "area"},
        {"shorter_side": 256, "backend": "opencv", "method": "lanczos"},
    ],
)
def test_resize_check_accepts(kwargs: dict) -> None:
    Resize(**kwargs).check()


def test_resize_pil_refuses_other_dtypes_statically() -> None:
    with pytest.raises(Invalid) as info:
        Pipeline([Decode(), Cast(dtype="float16"), Resize(size=8, backend="pil")])
    assert info.value.path == (2, "resize")
    assert "float16" in info.value.message


@pytest.mark.parametrize("dtype", ["float16", "int8"])
def test_resize_opencv_unsupported_dtype_is_rejected_statically(dtype: CastDType) -> None:
    """OpenCV's resize takes uint8 or float32: another dtype is refused when the pipeline is
    built, at the resize step, saying which dtype and what to do, before any image is read."""
    steps = [Decode(), Cast(dtype=dtype), Resize(size=8, method="bilinear", backend="opencv")]
    with pytest.raises(Invalid) as info:
        Pipeline(steps)
    assert info.value.path == (2, "resize")
    assert f"not {dtype}" in info.value.message
    assert "resize before the cast" in info.value.message


# --- cast and scale -----------------------------------------------------------------------------


def test_cast_float_to_uint8_rounds_and_clips() -> None:
    values = np.array([-3.0, -0.4, 0.4, 0.5, 1.5, 2.5, 127.49, 254.6, 255.0, 300.0, 1e9])
    expected = np.array([0, 0, 0, 0, 2, 2, 127, 255, 255, 255, 255], np.uint8)  # half to even
    image = np.stack([values] * 3, axis=1)[None].astype(np.float32)
    out = Cast(dtype="uint8").apply(hwc(image)).array
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out[0, :, 0], expected)


def test_cast_float_to_int8_rounds_and_clips() -> None:
    values = np.array([-1000.0, -128.6, -127.5, -0.5, 0.6, 126.5, 127.4, 200.0])
    expected = np.array([-128, -128, -128, 0, 1, 126, 127, 127], np.int8)
    out = Cast(dtype="int8").apply(hwc(values.reshape(1, -1, 1))).array
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out.ravel(), expected)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_cast_uint8_to_float_keeps_values(dtype: CastDType) -> None:
    image = random_image(5, 6)
    out = Cast(dtype=dtype).apply(hwc(image, "BGR"))
    assert out.array.dtype == np.dtype(dtype) and out.order == "BGR"
    np.testing.assert_array_equal(out.array, image.astype(dtype))  # 0..255 are exact
    assert Cast(dtype=dtype).transition(State()) == State(dtype=dtype)


@pytest.mark.parametrize(
    ("source", "target", "values", "expected"),
    [
        ("uint8", "int8", [0, 100, 127, 128, 200, 255], [0, 100, 127, 127, 127, 127]),
        ("int8", "uint8", [-128, -5, 0, 5, 127], [0, 0, 0, 5, 127]),
    ],
)
def test_cast_integer_to_integer_clips(
    source: str, target: CastDType, values: list, expected: list
) -> None:
    array = np.array(values, dtype=source).reshape(1, -1, 1)
    out = Cast(dtype=target).apply(hwc(array)).array
    np.testing.assert_array_equal(out.ravel(), np.array(expected, dtype=target))


def test_scale_divides() -> None:
    image = random_image(7, 9).astype(np.float32)
    out = Scale(divisor=255.0).apply(hwc(image)).array
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, image / np.float32(255))
    assert out.max() <= 1.0


def test_scale_rules() -> None:
    with pytest.raises(Invalid) as info:
        Scale(divisor=0).check()
    assert info.value.path == ("divisor",)
    with pytest.raises(Invalid, match="put a cast step before it"):
        Scale().transition(State(dtype="uint8"))
    assert Scale().transition(State(dtype="float16")) == State(dtype="float16")


# --- normalize ----------------------------------------------------------------------------------

MEAN = (123.675, 116.28, 103.53)
STD = (58.395, 57.12, 57.375)


def numpy_normalize(x: np.ndarray, mean: tuple, std: tuple, channel_axis: int) -> np.ndarray:
    out = np.empty_like(x, dtype=np.float32)
    for c in range(x.shape[channel_axis]):
        m = np.float32(mean[c % len(mean)])
        s = np.float32(std[c % len(std)])
        index = (slice(None),) * channel_axis + (c,)
        out[index] = (x[index] - m) / s
    return out


def test_normalize_hwc() -> None:
    x = random_image(30, 40).astype(np.float32)
    out = Normalize(mean=MEAN, std=STD).apply(hwc(x)).array
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, numpy_normalize(x, MEAN, STD, channel_axis=2))
    # the channels are not mixed up: channel 2 uses the third mean
    np.testing.assert_allclose(out[..., 2], (x[..., 2] - 103.53) / 57.375, rtol=1e-6)


def test_normalize_hwc_view_and_float64_match_channel_by_channel() -> None:
    # The HWC path works over rows of W·C values: a non-contiguous view (an image transposed
    # from CHW) and float64 data must give the channel-by-channel result and leave the input.
    for dtype in (np.float32, np.float64):
        chw_data = np.transpose(random_image(17, 23, seed=3), (2, 0, 1)).astype(dtype).copy()
        view = np.transpose(chw_data, (1, 2, 0))
        before = view.copy()
        out = Normalize(mean=MEAN, std=STD).apply(hwc(view)).array
        assert out.dtype == dtype and out.shape == (17, 23, 3)
        for c in range(3):
            # the manifest's values are float32 (as parsed), then widened to the data's dtype
            mean, std = dtype(np.float32(MEAN[c])), dtype(np.float32(STD[c]))
            expected = (before[..., c] - mean) / std
            np.testing.assert_array_equal(out[..., c], expected)
        np.testing.assert_array_equal(view, before)


def test_normalize_chw() -> None:
    x = np.transpose(random_image(30, 40), (2, 0, 1)).astype(np.float32)
    out = Normalize(mean=MEAN, std=STD).apply(chw(x)).array
    assert out.shape == (3, 30, 40)
    np.testing.assert_array_equal(out, numpy_normalize(x, MEAN, STD, channel_axis=0))


def test_normalize_single_value_broadcasts() -> None:
    x = random_image(8, 8).astype(np.float32)
    out = Normalize(mean=(127.0,), std=(128.0,)).apply(hwc(x)).array
    np.testing.assert_array_equal(out, (x - np.float32(127)) / np.float32(128))


def test_normalize_float16_stays_float16() -> None:
    x = random_image(8, 8).astype(np.float16)
    out = Normalize(mean=(0.5,), std=(2.0,)).apply(hwc(x)).array
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, (x - np.float16(0.5)) / np.float16(2.0))


@pytest.mark.parametrize("layout", ["HWC", "CHW"])
def test_normalize_uint8_saturate(layout: str) -> None:
    x = random_image(20, 30, seed=5)
    byte_mean = np.array([124, 116, 104])  # MEAN rounded (no .5 ties)
    if layout == "CHW":
        x = np.ascontiguousarray(np.transpose(x, (2, 0, 1)))
        shape = (3, 1, 1)
    else:
        shape = (1, 1, 3)
    expected = np.clip(x.astype(np.int64) - byte_mean.reshape(shape), 0, 255).astype(
        np.float32
    ) / np.array(STD, np.float32).reshape(shape)
    out = Normalize(mean=MEAN, std=STD, on_uint8="saturate").apply(Tensor(x, "RGB", layout))
    assert out.array.dtype == np.float32 and out.layout == layout
    np.testing.assert_array_equal(out.array, expected)
    assert (out.array >= 0).all()


@pytest.mark.parametrize("layout", ["HWC", "CHW"])
def test_normalize_uint8_wrap(layout: str) -> None:
    x = random_image(20, 30, seed=6)
    byte_mean = np.array([124, 116, 104])
    if layout == "CHW":
        x = np.ascontiguousarray(np.transpose(x, (2, 0, 1)))
        shape = (3, 1, 1)
    else:
        shape = (1, 1, 3)
    expected = np.mod(x.astype(np.int64) - byte_mean.reshape(shape), 256).astype(
        np.float32
    ) / np.array(STD, np.float32).reshape(shape)
    out = Normalize(mean=MEAN, std=STD, on_uint8="wrap").apply(Tensor(x, "RGB", layout)).array
    np.testing.assert_array_equal(out, expected)
    # a pixel below the mean wraps around to a large value, as unsigned C arithmetic does
    assert out[x < 100].min() > 0


def test_normalize_uint8_modes_on_known_values() -> None:
    x = np.array([[[0, 120, 255]]], np.uint8)
    sat = Normalize(mean=(124.0,), std=(2.0,), on_uint8="saturate").apply(hwc(x)).array
    wrap = Normalize(mean=(124.0,), std=(2.0,), on_uint8="wrap").apply(hwc(x)).array
    np.testing.assert_array_equal(sat, [[[0.0, 0.0, 65.5]]])
    np.testing.assert_array_equal(
        wrap, [[[66.0, 126.0, 65.5]]]
    )  # (0-124)%256=132, (120-124)%256=252


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"mean": ()}, ("mean",)),
        ({"std": ()}, ("std",)),
        ({"std": (1.0, 0.0, 1.0)}, ("std",)),
    ],
)
def test_normalize_check_rejects(kwargs: dict, field: tuple) -> None:
    with pytest.raises(Invalid) as info:
        Normalize(**kwargs).check()
    assert info.value.path == field


@pytest.mark.parametrize(
    ("kwargs", "field", "words"),
    [
        ({"mean": (1.0, 2.0)}, "mean", "2 values for 3 channels (RGB)"),
        ({"std": (1.0, 2.0, 3.0, 4.0)}, "std", "4 values for 3 channels (RGB)"),
    ],
)
def test_normalize_values_must_match_the_channels(kwargs: dict, field: str, words: str) -> None:
    """One value, or one per channel of the data at that point: counted against the channels
    the decode mode makes, when the pipeline is built."""
    with pytest.raises(Invalid) as info:
        Pipeline([Decode(), Cast(), Normalize(**kwargs)])
    assert info.value.path == (2, "normalize", field)
    assert words in info.value.message


@pytest.mark.parametrize(
    ("count", "fix"),
    [(4, "mode: RGBA (colour and alpha) or 'mode: bands, channels: 4'"),
     (13, "'mode: bands, channels: 13'")],
)  # fmt: skip
def test_more_normalize_values_than_channels_point_at_the_decode(count: int, fix: str) -> None:
    """Mode RGB before a normalize of 4 or 13 values: the decode is the likelier mistake (a
    model of colour and alpha, or of 13 bands), and the message says what to decode with."""
    with pytest.raises(Invalid) as info:
        Pipeline([Decode(), Cast(), Normalize(mean=(0.5,) * count, std=(0.5,) * count)])
    message = info.value.message
    assert f"{count} values for 3 channels (RGB)" in message
    assert f"if the model takes {count} channels, the decode is what to change" in message
    assert fix in message


def test_normalize_transition() -> None:
    with pytest.raises(Invalid, match=r"put 'cast: \{dtype: float32\}' before"):
        Normalize().transition(State(dtype="uint8"))
    with pytest.raises(Invalid, match="int8"):
        Normalize().transition(State(dtype="int8"))
    assert Normalize(on_uint8="wrap").transition(State(dtype="uint8")).dtype == "float32"
    assert Normalize().transition(State(dtype="float16")).dtype == "float16"


# --- colour order and layout --------------------------------------------------------------------


def test_color_hwc_swaps_channels() -> None:
    x = random_image(6, 7)
    out = Color(order="BGR").apply(hwc(x, "RGB"))
    assert out.order == "BGR" and out.layout == "HWC"
    np.testing.assert_array_equal(out.array, x[..., ::-1])
    back = Color(order="RGB").apply(out)
    assert back.order == "RGB"
    np.testing.assert_array_equal(back.array, x)


def test_color_chw_swaps_planes() -> None:
    x = np.ascontiguousarray(np.transpose(random_image(6, 7), (2, 0, 1)))
    out = Color(order="RGB").apply(chw(x, "BGR"))
    assert out.order == "RGB" and out.layout == "CHW"
    np.testing.assert_array_equal(out.array, x[::-1])
    np.testing.assert_array_equal(out.array[0], x[2])


@pytest.mark.parametrize("order", ["RGB", "BGR"])
def test_color_noop_when_already_in_order(order: ChannelOrder) -> None:
    x = random_image(6, 7)
    out = Color(order=order).apply(hwc(x, order))
    assert out.order == order
    np.testing.assert_array_equal(out.array, x)


def test_color_transition_tracks_order() -> None:
    assert Color(order="BGR").transition(State()) == State(order="BGR")
    assert Color(order="RGB").transition(State(layout="CHW", order="BGR")).order == "RGB"


def test_layout_transpose() -> None:
    x = random_image(5, 8)
    out = Layout(order="NCHW").apply(hwc(x))
    assert out.layout == "CHW" and out.array.shape == (3, 5, 8)
    np.testing.assert_array_equal(out.array, np.transpose(x, (2, 0, 1)))
    np.testing.assert_array_equal(out.array[1], x[:, :, 1])


def test_layout_reshape_reinterprets_the_buffer() -> None:
    x = random_image(5, 8)
    out = Layout(order="NCHW", method="reshape").apply(hwc(x))
    assert out.layout == "CHW" and out.array.shape == (3, 5, 8)
    reinterpreted = np.frombuffer(x.tobytes(), dtype=np.uint8).reshape(3, 5, 8)
    np.testing.assert_array_equal(out.array, reinterpreted)
    assert not np.array_equal(out.array, np.transpose(x, (2, 0, 1)))
    # The first "plane" is really the interleaved R, G, B, R, G, B... of the first rows.
    np.testing.assert_array_equal(out.array[0].ravel()[:6], x[0, :2].ravel())


def test_layout_nhwc_keeps_data() -> None:
    x = random_image(5, 8)
    out = Layout(order="NHWC").apply(hwc(x))
    assert out.layout == "HWC"
    np.testing.assert_array_equal(out.array, x)
    assert Layout(order="NHWC").transition(State()).layout == "HWC"
    assert Layout(order="NCHW").transition(State()).layout == "CHW"


def test_layout_transition_twice_is_invalid() -> None:
    with pytest.raises(Invalid, match="before the layout step"):
        Layout().transition(State(layout="CHW"))


# --- decode -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rgb() -> np.ndarray:
    return random_image(33, 47, seed=7)


def test_decode_png_backends_agree(rgb: np.ndarray) -> None:
    data = encode(Image.fromarray(rgb), "PNG")
    pil = Decode(backend="pil", order="RGB").decode(data, "a.png")
    ocv = Decode(backend="opencv", order="RGB").decode(data, "a.png")
    assert pil.order == ocv.order == "RGB" and pil.layout == ocv.layout == "HWC"
    assert pil.array.dtype == ocv.array.dtype == np.uint8
    np.testing.assert_array_equal(pil.array, rgb)
    np.testing.assert_array_equal(ocv.array, rgb)


@pytest.mark.parametrize("backend", ["pil", "opencv"])
def test_decode_bgr_reverses_channels(rgb: np.ndarray, backend: DecodeBackend) -> None:
    data = encode(Image.fromarray(rgb), "PNG")
    out = Decode(backend=backend, order="BGR").decode(data, "a.png")
    assert out.order == "BGR"
    np.testing.assert_array_equal(out.array, rgb[..., ::-1])
    assert out.array.flags.c_contiguous
    # and it matches what OpenCV itself returns
    np.testing.assert_array_equal(out.array, cv2.imdecode(np.frombuffer(data, np.uint8), 1))


def _grey() -> np.ndarray:
    return random_image(21, 34, seed=8)[:, :, 0]


def _mode_cases() -> dict[str, tuple[bytes, np.ndarray | None]]:
    """name -> (encoded file, expected RGB pixels or None when only the shape is checked)."""
    rgb = random_image(21, 34, seed=9)
    grey = _grey()
    palette = np.random.default_rng(10).integers(0, 256, (256, 3), dtype=np.uint8)
    index = grey
    p_image = Image.frombytes("P", (index.shape[1], index.shape[0]), index.tobytes())
    p_image.putpalette(palette.ravel().tolist())
    rgba = np.dstack([rgb, np.random.default_rng(11).integers(0, 256, (21, 34), np.uint8)])
    deep = np.random.default_rng(12).integers(0, 65536, (21, 34)).astype(np.uint16)
    cmyk = Image.fromarray(rgb).convert("CMYK")
    return {
        "L": (encode(Image.fromarray(grey, mode="L"), "PNG"), np.dstack([grey] * 3)),
        "P": (encode(p_image, "PNG"), palette[index]),
        "RGBA": (encode(Image.fromarray(rgba, mode="RGBA"), "PNG"), rgb),
        "I;16": (
            encode(Image.fromarray(deep), "PNG"),
            np.dstack([(deep >> 8).astype(np.uint8)] * 3),
        ),
        "CMYK": (encode(cmyk, "JPEG", quality=95), None),
        "L-jpeg": (encode(Image.fromarray(grey, mode="L"), "JPEG"), None),
    }


MODE_CASES = _mode_cases()


@pytest.mark.parametrize("backend", ["pil", "opencv"])
@pytest.mark.parametrize("mode", sorted(MODE_CASES))
def test_decode_modes_become_three_channel_uint8(backend: DecodeBackend, mode: str) -> None:
    data, expected = MODE_CASES[mode]
    with Image.open(io.BytesIO(data)) as im:  # the file really is in that mode
        assert im.mode == mode.split("-")[0]
    out = Decode(backend=backend).decode(data, f"{mode}.img").array
    assert out.shape == (21, 34, 3) and out.dtype == np.uint8
    if expected is not None:
        np.testing.assert_array_equal(out, expected)
    if mode == "L-jpeg":
        assert (out[..., 0] == out[..., 1]).all() and (out[..., 1] == out[..., 2]).all()


def test_decode_cmyk_jpeg_backends_roughly_agree() -> None:
    data, _ = MODE_CASES["CMYK"]
    pil = Decode(backend="pil").decode(data, "c.jpg").array.astype(int)
    ocv = Decode(backend="opencv").decode(data, "c.jpg").array.astype(int)
    assert np.abs(pil - ocv).mean() < 8


@pytest.fixture(scope="module")
def rotated_jpeg() -> tuple[bytes, tuple[int, int]]:
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90° clockwise to display"
    image = Image.fromarray(smooth_image(30, 50, seed=13))
    return encode(image, "JPEG", exif=exif.tobytes(), quality=95), (30, 50)


@pytest.mark.parametrize("backend", ["pil", "opencv"])
def test_decode_exif_orientation(rotated_jpeg: tuple, backend: DecodeBackend) -> None:
    data, (height, width) = rotated_jpeg
    with Image.open(io.BytesIO(data)) as im:
        assert im.getexif()[0x0112] == 6
    stored = Decode(backend=backend, exif_orientation=False).decode(data, "r.jpg").array
    upright = Decode(backend=backend, exif_orientation=True).decode(data, "r.jpg").array
    assert stored.shape == (height, width, 3)
    assert upright.shape == (width, height, 3)
    np.testing.assert_array_equal(upright, np.rot90(stored, k=-1))  # clockwise


def test_decode_exif_orientation_backends_agree_on_geometry(rotated_jpeg: tuple) -> None:
    data, _ = rotated_jpeg
    pil = Decode(backend="pil", exif_orientation=True).decode(data, "r.jpg").array.astype(int)
    ocv = Decode(backend="opencv", exif_orientation=True).decode(data, "r.jpg").array.astype(int)
    assert pil.shape == ocv.shape
    assert np.abs(pil - ocv).mean() < 2  # the same picture, up to JPEG decoder differences


@pytest.fixture(scope="module")
def jpeg() -> bytes:
    return encode(Image.fromarray(smooth_image(120, 160, seed=14)), "JPEG")


@pytest.mark.parametrize("backend", ["pil", "opencv"])
@pytest.mark.parametrize(
    ("what", "cut"),
    [("empty", None), ("text", None), ("truncated", 0.5), ("header only", 300)],
)
def test_decode_bad_bytes_is_a_sample_error(
    jpeg: bytes, backend: DecodeBackend, what: str, cut: float | None
) -> None:
    if what == "empty":
        data = b""
    elif what == "text":
        data = b"this is not an image\n" * 10
    elif isinstance(cut, float):
        data = jpeg[: int(len(jpeg) * cut)]
    else:
        data = jpeg[:cut]
    name = f"n01440764/broken {what}.JPEG"
    with pytest.raises(SampleError) as info:
        Decode(backend=backend).decode(data, name)
    assert info.value.sample == name
    assert repr(name) in str(info.value)
    # and through a whole pipeline
    with pytest.raises(SampleError, match="broken"):
        Pipeline([Decode(backend=backend), Cast()])(data, name)


def _png_header_only(width: int, height: int) -> bytes:
    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b""))
        + chunk(b"IEND", b"")
    )


def test_decode_pil_decompression_bomb_is_a_sample_error() -> None:
    data = _png_header_only(20000, 20000)
    assert len(data) < 100
    with pytest.raises(SampleError, match=r"bomb\.png"):
        Decode(backend="pil").decode(data, "bomb.png")


def test_decode_transition_resets_state() -> None:
    state = Decode(order="BGR").transition(State(order="RGB", layout="CHW", dtype="float32"))
    assert state == State(order="BGR", layout="HWC", dtype="uint8")


# --- the pipeline -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "path", "words"),
    [
        ([Resize(size=8), Decode()], (0,), "first preprocessing step must be 'decode'"),
        ([], (0,), "first preprocessing step must be 'decode'"),
        ([Decode(), Resize(size=8), Decode()], (2,), "'decode' can only be the first step"),
        ([Decode(), Layout(), Resize(size=8)], (2, "resize"), "before the layout step"),
        ([Decode(), Layout(), Crop(size=8)], (2, "crop"), "before the layout step"),
        ([Decode(), Layout(), Layout()], (2, "layout"), "before the layout step"),
        ([Decode(), Crop(size=8), Normalize()], (2, "normalize"), "put 'cast: {dtype: float32}'"),
        ([Decode(), Scale()], (1, "scale"), "put a cast step before it"),
        ([Decode(), Cast(dtype="int8"), Normalize()], (2, "normalize"), "int8"),
    ],
)
def test_pipeline_static_validation(steps: list, path: tuple, words: str) -> None:
    with pytest.raises(Invalid) as info:
        Pipeline(steps)
    assert info.value.path == path
    assert words in info.value.message


def test_pipeline_final_state() -> None:
    pipe = Pipeline([Decode(order="BGR"), Cast(), Scale(), Layout()])
    assert pipe.final == State(order="BGR", layout="CHW", dtype="float32")
    assert pipe.decoder is pipe.steps[0]
    pipe = Pipeline([Decode(), Normalize(mean=(127.0,), std=(128.0,), on_uint8="saturate")])
    assert pipe.final == State(order="RGB", layout="HWC", dtype="float32")


def efficientnet_by_hand(data: bytes) -> np.ndarray:
    """The EfficientNet eval recipe written out with Pillow and numpy."""
    with Image.open(io.BytesIO(data)) as im:
        image = im.convert("RGB")
    width, height = image.size
    side = int(0.875 * min(height, width))
    top, left = (height - side + 1) // 2, (width - side + 1) // 2
    image = image.crop((left, top, left + side, top + side))
    image = image.resize((224, 224), Image.Resampling.BILINEAR)
    x = np.asarray(image).astype(np.float32)
    x = (x - np.float32(127.0)) / np.float32(128.0)
    return np.ascontiguousarray(x.transpose(2, 0, 1))


EFFICIENTNET = [
    Decode(backend="pil", order="RGB"),
    Crop(fraction=0.875, rounding="google"),
    Resize(size=224, method="bilinear", backend="pil"),
    Cast(dtype="float32"),
    Normalize(mean=(127.0,), std=(128.0,)),
    Layout(order="NCHW"),
]


@pytest.mark.parametrize(("height", "width"), [(300, 400), (400, 300), (224, 224), (500, 333)])
def test_pipeline_efficientnet_equals_hand_computation(height: int, width: int) -> None:
    for step in EFFICIENTNET:
        step.check()
    data = encode(Image.fromarray(smooth_image(height, width, seed=height)), "JPEG")
    pipe = Pipeline(EFFICIENTNET)
    assert pipe.final == State(order="RGB", layout="CHW", dtype="float32")
    out = pipe(data, "photo.jpg")
    assert out.shape == (3, 224, 224) and out.dtype == np.float32
    np.testing.assert_array_equal(out, efficientnet_by_hand(data))
    assert out.min() >= -1.0 and out.max() <= 1.0


def test_pipeline_trace_names_every_step() -> None:
    data = encode(Image.fromarray(smooth_image(300, 400)), "JPEG")
    trace = Pipeline(EFFICIENTNET).trace(data, "photo.jpg")
    assert [name for name, _ in trace] == [
        "decode",
        "crop",
        "resize",
        "cast",
        "normalize",
        "layout",
    ]
    shapes = [array.shape for _, array in trace]
    assert shapes == [
        (300, 400, 3),
        (262, 262, 3),
        (224, 224, 3),
        (224, 224, 3),
        (224, 224, 3),
        (3, 224, 224),
    ]
    np.testing.assert_array_equal(trace[-1][1], efficientnet_by_hand(data))


def test_pipeline_bgr_opencv_recipe_by_hand() -> None:
    """A Caffe-style recipe: OpenCV decode in BGR, shorter side 256, centre 224, mean subtract."""
    steps = [
        Decode(backend="opencv", order="BGR"),
        Resize(shorter_side=256, method="bilinear", backend="opencv"),
        Crop(size=224, rounding="torchvision"),
        Cast(dtype="float32"),
        Normalize(mean=(103.94, 116.78, 123.68), std=(1.0,)),
        Layout(order="NCHW"),
    ]
    pipe = Pipeline(steps)
    data = encode(Image.fromarray(smooth_image(300, 400, seed=15)), "PNG")
    out = pipe(data, "x.png")

    decoded = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    assert decoded is not None
    image = cv2.resize(decoded, (341, 256), interpolation=cv2.INTER_LINEAR)  # 256*400/300 = 341.3
    top, left = 16, 58  # round(32 / 2), round(117 / 2) = round(58.5) = 58 (half to even)
    image = image[top : top + 224, left : left + 224].astype(np.float32)
    image = image - np.array([103.94, 116.78, 123.68], np.float32)
    np.testing.assert_array_equal(out, image.transpose(2, 0, 1))


@pytest.mark.parametrize("fmt", [".tiff", ".png"])
@pytest.mark.parametrize("backend", ["pil", "opencv"])
def test_16_bit_rgb_keeps_the_high_byte_on_every_backend(backend: DecodeBackend, fmt: str) -> None:
    """OpenCV's own 16→8 reduction of an RGB TIFF (libtiff's RGBA reader) rounds: 0x01FF came
    out 2, 0xFF00 came out 254. Every backend keeps the high byte, whatever the container."""
    import cv2

    deep = np.random.default_rng(14).integers(0, 65536, (21, 34, 3)).astype(np.uint16)
    deep[0, :4, 0] = [0x01FF, 0xFF00, 0x00FF, 0x7F80]  # the values a rounding gets wrong
    ok, encoded = cv2.imencode(fmt, deep[..., ::-1])  # OpenCV writes BGR
    assert ok
    out = Decode(backend=backend).decode(encoded.tobytes(), f"deep{fmt}").array
    np.testing.assert_array_equal(out, (deep >> 8).astype(np.uint8))
