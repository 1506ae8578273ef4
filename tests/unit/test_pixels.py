"""Every step on 1 to N channels of uint8, uint16 and float32, pixel for pixel against the named
library's own output: Pillow's and OpenCV's resize for each mode × method × dtype they support
(bicubic on grey included: its overshoot is clipped, never wrapped), each decode mode against
Pillow's ``convert``, OpenCV's ``imdecode`` flags and tf.io, and the cheap steps on C ≠ 3."""

from __future__ import annotations

import io
from typing import Literal

import numpy as np
import pytest
from PIL import Image

from pytest_mlrepro._schema import Invalid
from pytest_mlrepro.errors import SampleError
from pytest_mlrepro.pipeline import (
    Cast,
    Color,
    Crop,
    Decode,
    Layout,
    Normalize,
    Pipeline,
    Resize,
    Scale,
    State,
    Tensor,
)
from pytest_mlrepro.pipeline._steps import Method

cv2 = pytest.importorskip("cv2")

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
# A shrink and an enlargement (Pillow's filters widen when shrinking; bicubic and Lanczos
# overshoot when enlarging sharp edges).
TARGETS = [(9, 13), (40, 57)]
# (channel names, channel count, dtype) of every kind of image the steps see.
KINDS = [
    ("L", 1, np.uint8),
    ("RGB", 3, np.uint8),
    ("RGBA", 4, np.uint8),
    ("bands", 4, np.uint8),
    ("bands", 5, np.uint8),
    ("L", 1, np.uint16),
    ("RGB", 3, np.uint16),
    ("L", 1, np.float32),
    ("RGB", 3, np.float32),
    ("bands", 6, np.float32),
]


def sharp(height: int, width: int, channels: int, dtype: type, seed: int = 0) -> np.ndarray:
    """Noise with hard black/white blocks: full-range edges, where an unclipped filter leaves
    the type's range."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        top = 1.0
        image: np.ndarray = rng.uniform(0, 1, (height, width, channels)).astype(dtype)
    else:
        top = np.iinfo(dtype).max
        image = rng.integers(0, top + 1, (height, width, channels)).astype(dtype)
    image[4:12, 4:12] = top
    image[4:12, 12:20] = 0
    return image


def pillow_own(image: np.ndarray, order: str, target: tuple[int, int], method: str) -> np.ndarray:
    """What Pillow itself gives for an image of this kind: one RGB (or RGBA) image, else each
    band as its own L, I;16 or F image."""
    size, resample = (target[1], target[0]), PIL_FILTERS[method]
    if image.dtype == np.uint8 and order in ("RGB", "RGBA"):
        mode = "RGB" if order == "RGB" else "RGBA"
        assert Image.fromarray(image).mode == mode
        return np.asarray(Image.fromarray(image).resize(size, resample))
    planes = []
    for c in range(image.shape[2]):
        plane = Image.fromarray(np.ascontiguousarray(image[:, :, c]))
        assert plane.mode == {"uint8": "L", "uint16": "I;16", "float32": "F"}[str(image.dtype)]
        planes.append(np.asarray(plane.resize(size, resample)))
    return np.stack(planes, axis=2)


@pytest.mark.parametrize("method", sorted(PIL_FILTERS))
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(("order", "channels", "dtype"), KINDS)
def test_resize_pil_is_pillows_own(
    order: str, channels: int, dtype: type, target: tuple[int, int], method: Method
) -> None:
    image = sharp(23, 31, channels, dtype)
    step = Resize(size=target, method=method, backend="pil")
    step.check()
    out = step.apply(Tensor(image, order)).array
    assert out.shape == (*target, channels) and out.dtype == dtype
    np.testing.assert_array_equal(out, pillow_own(image, order, target, method))


@pytest.mark.parametrize("method", sorted(CV2_FILTERS))
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(("order", "channels", "dtype"), KINDS)
def test_resize_opencv_is_cv2s_own(
    order: str, channels: int, dtype: type, target: tuple[int, int], method: Method
) -> None:
    image = sharp(23, 31, channels, dtype, seed=1)
    step = Resize(size=target, method=method, backend="opencv")
    step.check()
    out = step.apply(Tensor(image, order)).array
    assert out.shape == (*target, channels) and out.dtype == dtype
    size, interp = (target[1], target[0]), CV2_FILTERS[method]
    if channels <= 4 or method != "area":
        expected = cv2.resize(image, size, interpolation=interp)
    else:  # cv2's INTER_AREA takes at most 4 channels: each channel is filtered on its own
        expected = np.stack(
            [cv2.resize(image[:, :, c], size, interpolation=interp) for c in range(channels)],
            axis=2,
        )
    np.testing.assert_array_equal(out.reshape(expected.shape), expected)


@pytest.mark.parametrize("backend", ["pil", "opencv"])
def test_bicubic_on_grey_clips_its_overshoot_instead_of_wrapping(
    backend: Literal["pil", "opencv", "tf"],
) -> None:
    """The case of issue 29: a 1-channel uint8 image enlarged bicubic. The filter overshoots
    past 255 beside a white block; the step clips it there (as the library does), where a float
    resize cast back to bytes wrapped 255 + ε around to 0."""
    image = np.zeros((8, 8, 1), np.uint8)
    image[2:6, 2:6] = 255
    out = Resize(size=16, method="bicubic", backend=backend).apply(Tensor(image, "L")).array
    floats = (
        Resize(size=16, method="bicubic", backend=backend)
        .apply(Tensor(image.astype(np.float32), "L"))
        .array
    )
    assert floats.max() > 255.5 and floats.min() < -0.5  # it does overshoot both ways
    assert (out[..., 0][floats[..., 0] > 255.5] == 255).all()  # clipped at white, not wrapped
    assert (out[..., 0][floats[..., 0] < -0.5] == 0).all()  # and at black
    if backend == "pil":
        own = Image.fromarray(image[..., 0]).resize((16, 16), Image.Resampling.BICUBIC)
    else:
        own = cv2.resize(image[..., 0], (16, 16), interpolation=cv2.INTER_CUBIC)
    np.testing.assert_array_equal(out[..., 0], np.asarray(own))


def test_bilinear_on_grey_rounds_as_pillow_does() -> None:
    """A truncating cast is one level off Pillow on a fifth of the values; the step is none."""
    image = sharp(23, 31, 1, np.uint8, seed=4)
    out = Resize(size=(40, 57), method="bilinear").apply(Tensor(image, "L")).array[..., 0]
    own = np.asarray(Image.fromarray(image[..., 0]).resize((57, 40), Image.Resampling.BILINEAR))
    np.testing.assert_array_equal(out, own)
    floats = np.asarray(
        Image.fromarray(image[..., 0].astype(np.float32)).resize(
            (57, 40), Image.Resampling.BILINEAR
        )
    )
    truncated = floats.astype(np.uint8)
    assert np.mean(truncated != own) > 0.1  # what the old float path gave: a level off


# --- decode: each mode against the library's own conversion ------------------------------------


def encode(array: np.ndarray, fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, fmt)
    return buffer.getvalue()


def cv2_png(array: np.ndarray) -> bytes:
    ok, data = cv2.imencode(".png", array)
    assert ok
    return bytes(data)


RNG = np.random.default_rng(7)
RGB = RNG.integers(0, 256, (12, 17, 3), dtype=np.uint8)
RGBA = RNG.integers(0, 256, (12, 17, 4), dtype=np.uint8)
GREY = RNG.integers(0, 256, (12, 17), dtype=np.uint8)
GREY16 = RNG.integers(0, 65536, (12, 17), dtype=np.uint16)
BGR16 = RNG.integers(0, 65536, (12, 17, 3), dtype=np.uint16)
FILES = {
    "rgb.png": encode(RGB),
    "rgba.png": encode(RGBA),
    "grey.png": encode(GREY),
    "grey16.png": encode(GREY16),
    "rgb.jpg": encode(RGB, "JPEG"),
}
_palette = io.BytesIO()
Image.fromarray(RGB).convert("P", palette=Image.Palette.ADAPTIVE, colors=16).save(_palette, "PNG")
FILES["palette.png"] = _palette.getvalue()


@pytest.mark.parametrize("name", sorted(FILES))
def test_decode_l_by_luma_is_pillows_convert(name: str) -> None:
    out = Decode(backend="pil", mode="L").decode(FILES[name], name).array
    with Image.open(io.BytesIO(FILES[name])) as image:
        if image.mode.startswith("I"):  # 16-bit grey: the high byte, as mode RGB keeps it
            expected = (np.asarray(image, np.uint32) >> 8).astype(np.uint8)
        else:
            expected = np.asarray(image.convert("L"))
    assert out.shape == (12, 17, 1) and out.dtype == np.uint8
    np.testing.assert_array_equal(out[..., 0], expected)


@pytest.mark.parametrize("name", sorted(FILES))
def test_decode_l_by_luma_is_opencvs_imread_grayscale(name: str) -> None:
    out = Decode(backend="opencv", mode="L").decode(FILES[name], name).array
    expected = cv2.imdecode(
        np.frombuffer(FILES[name], np.uint8), cv2.IMREAD_GRAYSCALE | cv2.IMREAD_ANYDEPTH
    )
    if expected.dtype == np.uint16:
        expected = (expected >> 8).astype(np.uint8)
    np.testing.assert_array_equal(out[..., 0], expected)


def test_pillow_luma_is_itu_r_601_2() -> None:
    """Pillow's convert("L"): L = R × 299/1000 + G × 587/1000 + B × 114/1000, rounded."""
    out = Decode(mode="L").decode(FILES["rgb.png"], "rgb.png").array[..., 0].astype(float)
    luma = RGB @ np.array([0.299, 0.587, 0.114])
    assert np.abs(out - luma).max() <= 0.5 + 1e-6


@pytest.mark.parametrize("backend", ["pil", "opencv"])
@pytest.mark.parametrize(("rule", "channel"), [("red", 0), ("green", 1), ("blue", 2)])
def test_decode_l_by_one_channel(backend: str, rule: str, channel: int) -> None:
    step = Decode(backend=backend, mode="L", convert=rule)  # type: ignore[arg-type]
    step.check()
    out = step.decode(FILES["rgb.png"], "rgb.png").array
    np.testing.assert_array_equal(out[..., 0], RGB[:, :, channel])


@pytest.mark.parametrize("order", ["RGB", "BGR"])
@pytest.mark.parametrize("name", ["rgba.png", "rgb.png", "grey.png", "palette.png"])
def test_decode_rgba_is_pillows_convert_and_opencvs_unchanged(name: str, order: str) -> None:
    """With ``alpha: add-opaque`` declared, a file without alpha gets an opaque one, as each
    backend converts (without it: the next test)."""
    pil = (
        Decode(backend="pil", mode="RGBA", order=order, alpha="add-opaque")  # type: ignore[arg-type]
        .decode(FILES[name], name)
        .array
    )
    with Image.open(io.BytesIO(FILES[name])) as image:
        expected = np.asarray(image.convert("RGBA"))
    if order == "BGR":
        expected = expected[..., [2, 1, 0, 3]]
    np.testing.assert_array_equal(pil, expected)
    if name == "palette.png":
        return  # OpenCV expands a palette without Pillow's alpha rules: compared above only
    cv = (
        Decode(backend="opencv", mode="RGBA", order=order, alpha="add-opaque")  # type: ignore[arg-type]
        .decode(FILES[name], name)
        .array
    )
    np.testing.assert_array_equal(cv, expected)
    assert Decode(mode="RGBA", order=order).state().order == f"{order}A"  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", ["pil", "opencv"])
@pytest.mark.parametrize("name", ["rgb.png", "grey.png"])
def test_decode_rgba_of_a_file_without_alpha_is_its_error(name: str, backend: str) -> None:
    """An opaque alpha is never invented silently: it would be recorded in a golden as data."""
    with pytest.raises(SampleError, match=r"it has no alpha channel .*'alpha: add-opaque'"):
        Decode(backend=backend, mode="RGBA").decode(FILES[name], name)  # type: ignore[arg-type]
    assert Decode(backend=backend, mode="RGBA").decode(FILES["rgba.png"], "r").array.shape[2] == 4  # type: ignore[arg-type]
    with pytest.raises(Invalid, match="only mode RGBA has an alpha"):
        Decode(mode="RGB", alpha="add-opaque").check()


@pytest.mark.parametrize("backend", ["pil", "opencv"])
def test_decode_l16_keeps_every_bit_and_refuses_8_bit_files(backend: str) -> None:
    step = Decode(backend=backend, mode="L16")  # type: ignore[arg-type]
    out = step.decode(FILES["grey16.png"], "g.png").array
    assert out.dtype == np.uint16
    np.testing.assert_array_equal(out[..., 0], GREY16)
    with pytest.raises(SampleError, match="8-bit samples and the manifest decodes mode L16"):
        step.decode(FILES["grey.png"], "grey.png")


@pytest.mark.parametrize("order", ["RGB", "BGR"])
def test_decode_rgb16_is_opencvs_anydepth(order: str) -> None:
    data = cv2_png(BGR16)
    out = Decode(backend="opencv", mode="RGB16", order=order).decode(data, "c.png").array  # type: ignore[arg-type]
    assert out.dtype == np.uint16
    np.testing.assert_array_equal(out, BGR16 if order == "BGR" else BGR16[..., ::-1])


def test_decode_tf_modes_are_tf_ios_own() -> None:
    tf = pytest.importorskip("tensorflow")
    grey = Decode(backend="tf", mode="L").decode(FILES["rgb.png"], "rgb.png").array
    np.testing.assert_array_equal(grey, tf.io.decode_png(FILES["rgb.png"], channels=1).numpy())
    rgba = (
        Decode(backend="tf", mode="RGBA", alpha="add-opaque")
        .decode(FILES["rgb.png"], "rgb.png")
        .array
    )
    np.testing.assert_array_equal(rgba, tf.io.decode_png(FILES["rgb.png"], channels=4).numpy())
    deep = Decode(backend="tf", mode="RGB16").decode(cv2_png(BGR16), "c.png").array
    np.testing.assert_array_equal(deep, BGR16[..., ::-1])
    out = Resize(size=(5, 7), method="bicubic", backend="tf").apply(Tensor(grey, "L")).array
    expected = tf.image.resize(grey, [5, 7], method="bicubic").numpy()
    np.testing.assert_array_equal(out, expected)


# --- decode: multi-band files -------------------------------------------------------------------


def tiff_pages(pages: list[np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    images = [Image.fromarray(p) for p in pages]
    images[0].save(buffer, "TIFF", save_all=True, append_images=images[1:])
    return buffer.getvalue()


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("dtype", "make"),
    [
        ("uint8", lambda: RNG.integers(0, 256, (3, 9, 11), dtype=np.uint8)),
        ("uint16", lambda: RNG.integers(0, 65536, (3, 9, 11), dtype=np.uint16)),
        ("float32", lambda: RNG.normal(0, 1, (3, 9, 11)).astype(np.float32)),
    ],
)
def test_decode_bands_of_a_multi_page_tiff(dtype: str, make: object) -> None:
    pages = make()  # type: ignore[operator]
    step = Decode(mode="bands", channels=3, dtype=dtype)  # type: ignore[arg-type]
    step.check()
    out = step.decode(tiff_pages(list(pages)), "t.tiff").array
    assert out.dtype == np.dtype(dtype) and out.shape == (9, 11, 3)
    np.testing.assert_array_equal(out, pages.transpose(1, 2, 0))
    with pytest.raises(SampleError, match=r"it holds 3 bands of .*the manifest decodes 4"):
        Decode(mode="bands", channels=4, dtype=dtype).decode(tiff_pages(list(pages)), "t.tiff")  # type: ignore[arg-type]


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "float32"])
def test_decode_bands_of_an_npy_array(dtype: str) -> None:
    array = (RNG.uniform(0, 200, (9, 11, 5))).astype(dtype)
    step = Decode(backend="numpy", mode="bands", channels=5, dtype=dtype)  # type: ignore[arg-type]
    np.testing.assert_array_equal(step.decode(npy(array), "a.npy").array, array)
    big_endian = npy(array.astype(array.dtype.newbyteorder(">")))
    np.testing.assert_array_equal(step.decode(big_endian, "b.npy").array, array)
    grey = Decode(backend="numpy", mode="bands", channels=1, dtype=dtype)  # type: ignore[arg-type]
    assert grey.decode(npy(array[:, :, 0]), "g.npy").array.shape == (9, 11, 1)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (npy(np.zeros((9, 11, 5), np.float64)), "5 bands of float64, the manifest decodes 5 of"),
        (npy(np.zeros((9, 11, 4), np.float32)), "4 bands of float32"),
        (npy(np.zeros((2, 9, 11, 5), np.float32)), "an image is H×W or H×W×C"),
        (npy(np.full((9, 11, 5), np.nan, np.float32)), "495 of its values are NaN or infinite"),
        (b"\x93NUMPY\x01\x00garbage", "numpy cannot read it"),
    ],
)
def test_decode_npy_refuses_what_it_does_not_declare(data: bytes, words: str) -> None:
    step = Decode(backend="numpy", mode="bands", channels=5, dtype="float32")
    with pytest.raises(SampleError) as info:
        step.decode(data, "x.npy")
    assert words in str(info.value) and info.value.sample == "x.npy"


def test_decode_npy_never_unpickles() -> None:
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    step = Decode(backend="numpy", mode="bands", channels=1, dtype="uint8")
    with pytest.raises(SampleError):
        step.decode(buffer.getvalue(), "evil.npy")


@pytest.mark.parametrize(
    ("kwargs", "field", "words"),
    [
        ({"mode": "bands"}, "channels", "states how many bands"),
        ({"mode": "bands", "channels": 2}, "dtype", "states how many bands"),
        ({"mode": "bands", "channels": 0, "dtype": "uint8"}, "channels", "at least 1"),
        ({"mode": "L", "channels": 1}, "channels", "only mode bands states them"),
        ({"mode": "RGB", "convert": "luma"}, "convert", "only modes L and L16"),
        ({"mode": "L", "order": "BGR"}, "order", "no colour order"),
        ({"mode": "RGB16"}, "mode", "Pillow reads 16-bit colour images as 8 bits"),
        ({"backend": "numpy"}, "mode", "use mode bands"),
        (
            {"backend": "opencv", "mode": "bands", "channels": 2, "dtype": "uint8"},
            "backend",
            "multi-page TIFFs",
        ),
    ],
)
def test_decode_check_refuses(kwargs: dict, field: str, words: str) -> None:
    with pytest.raises(Invalid) as info:
        Decode(**kwargs).check()
    assert info.value.path == (field,)
    assert words in info.value.message


@pytest.mark.parametrize(
    ("decode", "state"),
    [
        (Decode(mode="L"), State("L", "HWC", "uint8", 1)),
        (Decode(mode="L16"), State("L", "HWC", "uint16", 1)),
        (Decode(mode="RGBA", order="BGR"), State("BGRA", "HWC", "uint8", 4)),
        (Decode(backend="opencv", mode="RGB16"), State("RGB", "HWC", "uint16", 3)),
        (Decode(mode="bands", channels=7, dtype="float32"), State("bands", "HWC", "float32", 7)),
    ],
)
def test_decode_states_its_output_before_any_data(decode: Decode, state: State) -> None:
    assert decode.transition(State(layout="CHW", dtype="float32")) == state
    assert (decode.convert == "luma") == (decode.mode in ("L", "L16"))  # filled in, recorded


# --- the cheap steps on C ≠ 3 -------------------------------------------------------------------


def test_a_grey_pipeline_ends_in_one_channel_nchw() -> None:
    steps = [
        Decode(mode="L"),
        Crop(size=10, rounding="google"),
        Resize(size=16, method="bicubic"),
        Cast(),
        Scale(),
        Normalize(mean=(0.1307,), std=(0.3081,)),
        Layout(),
    ]
    pipeline = Pipeline(steps)
    assert pipeline.final == State("L", "CHW", "float32", 1)
    out = pipeline(FILES["rgb.png"], "rgb.png")
    grey = np.asarray(Image.open(io.BytesIO(FILES["rgb.png"])).convert("L"))
    cropped = Image.fromarray(grey[1:11, 4:14]).resize((16, 16), Image.Resampling.BICUBIC)
    expected = (np.asarray(cropped, np.float32) / np.float32(255) - np.float32(0.1307)) / (
        np.float32(0.3081)
    )
    assert out.shape == (1, 16, 16)
    np.testing.assert_array_equal(out[0], expected)


def test_sixteen_bit_through_resize_cast_and_scale() -> None:
    steps = [Decode(mode="L16"), Resize(size=(6, 8), method="bilinear"), Cast(), Scale(65535.0)]
    out = Pipeline(steps)(FILES["grey16.png"], "g.png")
    own = np.asarray(Image.fromarray(GREY16).resize((8, 6), Image.Resampling.BILINEAR))
    np.testing.assert_array_equal(out[..., 0], own.astype(np.float32) / np.float32(65535))


def test_cast_to_uint16_rounds_half_to_even_and_clips() -> None:
    values = np.array([[[-3.0, 0.5, 1.5, 2.5, 65534.6, 70000.0]]], np.float32)
    out = Cast(dtype="uint16").apply(Tensor(values, "bands")).array
    assert out.dtype == np.uint16
    assert out.ravel().tolist() == [0, 0, 2, 2, 65535, 65535]


@pytest.mark.parametrize("layout", ["HWC", "CHW"])
@pytest.mark.parametrize("channels", [1, 5])
def test_normalize_per_channel_on_any_count(channels: int, layout: str) -> None:
    image = RNG.uniform(0, 1, (4, 6, channels)).astype(np.float32)
    mean = tuple(float(v) for v in np.linspace(0.1, 0.5, channels))
    std = tuple(float(v) for v in np.linspace(0.2, 0.3, channels))
    array = image if layout == "HWC" else image.transpose(2, 0, 1)
    out = Normalize(mean=mean, std=std).apply(Tensor(array, "bands", layout)).array
    expected = (image - np.asarray(mean, np.float32)) / np.asarray(std, np.float32)
    np.testing.assert_allclose(
        out if layout == "HWC" else out.transpose(1, 2, 0), expected, rtol=1e-6
    )
    state = State("bands", "HWC", "float32", channels)
    Normalize(mean=mean, std=std).transition(state)
    with pytest.raises(Invalid, match=f"{channels + 1} values for {channels} channel"):
        Normalize(mean=(*mean, 0.0), std=std).transition(state)


@pytest.mark.parametrize("channels", [1, 4, 5])
def test_layout_and_crop_on_any_count(channels: int) -> None:
    image = RNG.integers(0, 256, (6, 8, channels), dtype=np.uint8)
    chw = Layout().apply(Tensor(image, "bands")).array
    np.testing.assert_array_equal(chw, image.transpose(2, 0, 1))
    reshaped = Layout(method="reshape").apply(Tensor(image, "bands")).array
    np.testing.assert_array_equal(reshaped, image.reshape(channels, 6, 8))
    cropped = Crop(size=(4, 4), rounding="torchvision").apply(Tensor(image, "bands")).array
    np.testing.assert_array_equal(cropped, image[1:5, 2:6])


def test_color_swaps_rgba_keeping_alpha_and_is_refused_on_grey_and_bands() -> None:
    out = Color(order="BGR").apply(Tensor(RGBA, "RGBA")).array
    np.testing.assert_array_equal(out, RGBA[..., [2, 1, 0, 3]])
    chw = Color(order="BGR").apply(Tensor(RGBA.transpose(2, 0, 1), "RGBA", "CHW")).array
    np.testing.assert_array_equal(chw, RGBA[..., [2, 1, 0, 3]].transpose(2, 0, 1))
    assert Color(order="BGR").transition(State("RGBA", channels=4)).order == "BGRA"
    with pytest.raises(Invalid, match="one grey channel, no colour order to change"):
        Pipeline([Decode(mode="L"), Color(order="BGR")])
    with pytest.raises(Invalid, match="5 bands, no colour order"):
        Pipeline([Decode(backend="numpy", mode="bands", channels=5, dtype="uint8"), Color()])


def test_resize_refuses_other_dtypes_and_takes_uint16() -> None:
    Pipeline([Decode(mode="L16"), Resize(size=4, backend="opencv")])
    with pytest.raises(Invalid, match="uint8, uint16 or float32 images, not float16"):
        Pipeline([Decode(mode="L"), Cast(dtype="float16"), Resize(size=4)])
    with pytest.raises(Invalid, match="normalize cannot work on uint16 data"):
        Pipeline([Decode(mode="L16"), Normalize()])


def test_a_multi_band_sample_larger_than_any_image_is_refused_before_decoding() -> None:
    """A .npy header (no pixels behind it) declaring 4000 × 4000 × 13 float32, 832 MB: more
    than the largest image any mode decodes (MAX_IMAGE_PIXELS of 4 × 16 bits), refused from the
    header alone, before numpy allocates it."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f4", "fortran_order": False, "shape": (4000, 4000, 13)}
    )
    step = Decode(backend="numpy", mode="bands", channels=13, dtype="float32")
    with pytest.raises(SampleError, match="it would decode to 832000000 bytes"):
        step.decode(header.getvalue(), "big.npy")


def test_a_file_pillow_cannot_identify_is_said_without_an_object_repr() -> None:
    """Pillow names the stream it was given (``<_io.BytesIO object at 0x…>``): a report says
    "the file", never a memory address."""
    with pytest.raises(SampleError) as info:
        Decode(backend="pil").decode(b"\x93NUMPY not an image", "tile.npy")
    assert "Pillow cannot decode it" in str(info.value)
    assert "object at 0x" not in str(info.value) and "the file" in str(info.value)


def test_no_decoder_flip_is_tried_between_npy_arrays_and_image_files() -> None:
    from pytest_mlrepro.diagnosis._pitfalls import _decoder

    steps = (Decode(backend="numpy", mode="bands", channels=13, dtype="uint16"),)
    assert list(_decoder(steps)) == []
    image_steps = (Decode(backend="pil", mode="bands", channels=5, dtype="uint16"),)
    assert all("numpy" not in v.key for v in _decoder(image_steps))


def test_an_rgba_resize_backend_flip_says_that_pillow_premultiplies() -> None:
    """The whole story of an RGBA resize through another library, said with the flip."""
    pytest.importorskip("cv2")
    from pytest_mlrepro.diagnosis._pitfalls import _resize
    from pytest_mlrepro.report import pitfall_words

    rgba = (Decode(mode="RGBA"), Resize(size=(8, 8), backend="pil"))
    words = {v.key: pitfall_words(v.flip) for v in _resize(rgba)}
    opencv = next(d for k, d in words.items() if ":opencv-" in k)
    assert "Pillow premultiplies the colours by alpha while it filters, OpenCV filters" in opencv
    assert not any("premultiplies" in d for k, d in words.items() if ":pil-" in k)
    rgb = (Decode(), Resize(size=(8, 8), backend="pil"))
    assert not any("premultiplies" in pitfall_words(v.flip) for v in _resize(rgb))


def test_a_16_bit_step_difference_is_said_in_16_bit_units() -> None:
    from pytest_mlrepro.diagnosis._step_fingerprints import describe_difference
    from pytest_mlrepro.report._diagnosis_lead import delta_text

    def print_of(value: float, sha: str) -> dict[str, object]:
        return {"sha256": sha, "shape": [4, 4, 1], "dtype": "uint16",
                "thumb": [[value]], "mean": [value], "detail": [1.0]}  # fmt: skip

    delta = describe_difference([print_of(30000.0, "a")], [print_of(6300.0, "b")])
    assert delta.differing == 1
    words = delta_text(delta)
    assert "thumbnail mean |Δ| 2.37e+04/65535" in words and "/255" not in words, words


def test_a_band_permutation_and_premultiplied_alpha_are_said_as_mechanisms() -> None:
    """The per-channel means of the decoded probes show both: the same means moved, or every
    colour mean scaled by one factor with alpha the same."""
    from pytest_mlrepro.diagnosis._step_fingerprints import (
        alpha_factor,
        channel_order,
        describe_difference,
    )
    from pytest_mlrepro.report._diagnosis_lead import delta_text

    rng = np.random.default_rng(3)
    bands = [rng.uniform(100, 5000, 5) for _ in range(3)]
    swapped = [(g, g[[0, 3, 2, 1, 4]]) for g in bands]
    assert channel_order(swapped) == (0, 3, 2, 1, 4) and alpha_factor(swapped) is None
    rgba = [np.asarray([120.0, 90.0, 60.0, 128.0]), np.asarray([100.0, 80.0, 70.0, 200.0])]
    premultiplied = [(g, np.concatenate([g[:3] * g[3] / 255, g[3:]])) for g in rgba]
    factor = alpha_factor(premultiplied)
    assert factor is not None and factor < 1 and channel_order(premultiplied) is None
    shifted = [(g, g + 3.0) for g in rgba]  # a shift: neither
    assert channel_order(shifted) is None and alpha_factor(shifted) is None

    def print_of(mean: np.ndarray, sha: str) -> dict[str, object]:
        return {"sha256": sha, "shape": [4, 4, 5], "dtype": "uint16", "thumb": [[1.0]],
                "mean": mean.tolist(), "detail": [1.0]}  # fmt: skip

    words = delta_text(describe_difference([print_of(g, "a") for g, _ in swapped],
                                           [print_of(n, "b") for _, n in swapped]))  # fmt: skip
    assert words.startswith(
        "the channels in another order (now ← golden, by their means: 1←3, 3←1)"
    ), words

    def rgba_print(mean: np.ndarray, sha: str) -> dict[str, object]:
        return {"sha256": sha, "shape": [4, 4, 4], "dtype": "uint8", "thumb": [[1.0]],
                "mean": mean.tolist(), "detail": [1.0]}  # fmt: skip

    golden_prints = [rgba_print(g, "a") for g, _ in premultiplied]
    now_prints = [rgba_print(n, "b") for _, n in premultiplied]
    words = delta_text(describe_difference(golden_prints, now_prints))
    assert words.startswith("the colours premultiplied by alpha (alpha the same, every"), words
