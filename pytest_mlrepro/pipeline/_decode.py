"""Decoding in every mode, each backend as its library does; where the libraries have no common
rule the sample is refused instead of one rule being picked silently."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np

from ..errors import SampleError

if TYPE_CHECKING:
    import PIL.Image

MAX_IMAGE_PIXELS = 89_478_485
"""The most pixels an image header may declare, checked before decoding by every backend:
Pillow's default (a 100 kB PNG can declare 30000 × 30000 pixels, 2.7 GB decoded)."""


def too_many(what: str) -> str:
    return (
        f"its header declares {what}, more than the limit of {MAX_IMAGE_PIXELS} pixels "
        "(pytest_mlrepro.pipeline._steps.MAX_IMAGE_PIXELS): refused before decoding (a "
        "decompression bomb, or an image far larger than a classifier's input)"
    )


ChannelOrder = Literal["RGB", "BGR"]
# What decode yields (docs/manifest.md#decode-modes): grey, colour, colour with alpha, 16-bit grey
# or colour, or every band of a multi-band file as it holds them.
DecodeMode = Literal["L", "RGB", "RGBA", "L16", "RGB16", "bands"]
# How a colour file becomes grey (mode L or L16): ITU-R 601-2 luma as the backend computes it, or
# one channel of the colour image.
GreyRule = Literal["luma", "red", "green", "blue"]
BandsDType = Literal["uint8", "uint16", "float32"]


@dataclass(frozen=True)
class DecodeOptions:
    """The decode step's fields (``_steps.Decode``, whose docstring says them): what decoding
    reads, here so that this module needs no import of the steps."""

    backend: Literal["pil", "opencv", "tf", "numpy"] = "pil"
    order: ChannelOrder = "RGB"
    exif_orientation: bool = False
    # Only the tf backend has a choice; left out of the normalised form when None.
    dct_method: Literal["INTEGER_FAST", "INTEGER_ACCURATE"] | None = field(
        default=None, metadata={"plain_omit_none": True}
    )
    mode: DecodeMode = "RGB"
    # Modes L and L16 only (filled in with "luma" when left out); None elsewhere.
    convert: GreyRule | None = field(default=None, metadata={"plain_omit_none": True})
    # Mode bands only: how many bands every sample has, and their element type.
    channels: int | None = field(default=None, metadata={"plain_omit_none": True})
    dtype: BandsDType | None = field(default=None, metadata={"plain_omit_none": True})
    # Mode bands, backend numpy only: the .npy array's axis order (None: HWC, channels last).
    axes: Literal["HWC", "CHW"] | None = field(default=None, metadata={"plain_omit_none": True})
    # Mode RGBA only: "add-opaque" gives a file without alpha an opaque one (None: its error).
    alpha: Literal["add-opaque"] | None = field(default=None, metadata={"plain_omit_none": True})


# Pillow modes whose samples are 16-bit unsigned integers (PNG, TIFF, PGM); "I" holds them too
# (checked by the header: no wider or signed samples get here).
_PIL_16 = ("I;16", "I;16B", "I;16L", "I;16N", "I")
_CHANNEL = {"red": 0, "green": 1, "blue": 2}
MAX_PAGES = 1024
"""The most pages decoded as bands (a hyperspectral image has a few hundred)."""
MAX_DECODED_BYTES = MAX_IMAGE_PIXELS * 4 * 2
"""The most bytes a multi-band sample may decode to: the largest image any mode accepts (4
channels of 16 bits), checked from the header before pixels are read."""


_OBJECT_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>")


def library_words(exc: BaseException) -> str:
    """A library's error message with an object's repr (Pillow: ``<_io.BytesIO object at 0x7f…>``)
    said as "the file", so that no memory address reaches a report."""
    return _OBJECT_REPR.sub("the file", str(exc))


def _too_large(sample: str, what: str, size: int) -> SampleError:
    return SampleError(
        sample,
        f"it would decode to {size} bytes ({what}), more than the limit of {MAX_DECODED_BYTES} "
        "(pytest_mlrepro.pipeline._decode.MAX_DECODED_BYTES): refused before decoding",
    )


def decode(data: bytes, sample: str, step: DecodeOptions) -> np.ndarray:
    """The decode step's H×W×C array; this sample's SampleError where it cannot be."""
    if not data:
        raise SampleError(sample, "the file is empty")
    if step.backend == "numpy":
        return decode_npy(data, sample, step)
    # Every backend reads the header first: the pixel limit and the sample depth are checked
    # there, before anything is allocated for the pixels, the same way for all three.
    header = _header(data, sample, step.backend, floats=step.dtype == "float32")
    # An alpha channel (or a palette transparency), from the header.
    alpha = header.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in header.info
    if step.mode == "RGBA" and step.alpha is None and not alpha:
        raise SampleError(
            sample,
            f"it has no alpha channel ({header.format} mode {header.mode}) and the manifest "
            "decodes mode RGBA: an opaque alpha would be invented for it and recorded as "
            "data; save it with its alpha, or declare 'alpha: add-opaque' in the decode "
            "step to give files without one an opaque alpha",
        )
    if step.mode == "bands":
        array = _bands_pil(data, sample, step)
    elif step.backend == "pil":
        array = _mode_pil(data, sample, step)
    elif step.backend == "opencv":
        array = _mode_opencv(data, sample, step)
    else:
        array = _mode_tf(data, sample, step, header.format or "")
    if array.ndim == 2:
        array = array[:, :, None]
    # OpenCV decodes colour as BGR(A), Pillow and tf.io as RGB(A): flipped to the step's order
    # (3 channels as a reversed view, whose copy below costs half a gather's).
    if array.shape[2] >= 3 and (step.order == "BGR") != (step.backend == "opencv"):
        array = array[..., ::-1] if array.shape[2] == 3 else array[..., [2, 1, 0, 3]]
    # Grey by one channel (decode.convert): every backend hands the colour image (mode L and L16
    # have order RGB), a grey file stays as it is.
    channel = _CHANNEL.get(step.convert or "")
    if channel is not None and array.shape[2] >= 3:
        array = array[:, :, channel : channel + 1]
    return np.ascontiguousarray(array)


_BOMB_PIXELS = re.compile(r"\((\d+) pixels\)")


def _header(data: bytes, sample: str, backend: str, floats: bool) -> PIL.Image.Image:
    """Pixel count and sample depth checked before any pixel is decoded (``floats``: 32-bit
    float samples)."""
    from PIL import Image, UnidentifiedImageError

    try:
        image = Image.open(io.BytesIO(data))
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        # Pillow's own limit (or its warning under -W error) stopped it: read the size anew.
        size = _declared_size(data)
        if size is not None:
            what = f"{size[0]}×{size[1]} = {size[0] * size[1]} pixels"
        else:
            found = _BOMB_PIXELS.search(str(exc))
            what = f"{found.group(1) if found else 'too many'} pixels"
        raise SampleError(sample, too_many(what)) from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        if backend == "pil":
            raise SampleError(sample, f"Pillow cannot decode it: {library_words(exc)}") from None
        # Without a header that can be read, the pixel limit cannot be enforced: not decoded.
        library = "OpenCV" if backend == "opencv" else "tf.io"
        raise SampleError(
            sample,
            f"{library} cannot decode it: its size cannot be read from its header "
            f"({library_words(exc)}), and the pixel limit is checked before decoding",
        ) from None
    with image:
        width, height = image.size
        if width * height > MAX_IMAGE_PIXELS:
            raise SampleError(sample, too_many(f"{width}×{height} = {width * height} pixels"))
        wide = wide_samples(image)
        if wide is not None and not (floats and wide == "floating-point" and image.mode == "F"):
            raise SampleError(
                sample,
                f"it has {wide} samples ({image.format} mode {image.mode}): only 8-bit and "
                "16-bit unsigned integer images are decoded (16-bit ones by their high byte, on "
                "every backend); wider samples would wrap around or be clipped, so convert the "
                "file to 8 or 16 bits with the range you mean",
            )
    return image


def _declared_size(data: bytes) -> tuple[int, int] | None:
    """Read without ``Image.open``'s bomb check, which raises before telling the size."""
    from PIL import Image

    prefix = data[:16]
    for name in list(Image.ID):
        factory, accept = Image.OPEN[name]
        if accept is not None and accept(prefix) is not True:
            continue
        try:
            with factory(io.BytesIO(data), "") as image:  # the header only
                size: tuple[int, int] = image.size
                return size
        except Exception:  # not this format after all: the next plugin may know it
            continue
    return None


def _wanted_16(sample: str, step: DecodeOptions, bits: int) -> None:
    if bits != 16:
        raise SampleError(
            sample,
            f"it has {bits}-bit samples and the manifest decodes mode {step.mode} (16-bit "
            "samples): a wrong file in the data set, or the mode should be "
            f"{step.mode.removesuffix('16')}",
        )


# --- Pillow -------------------------------------------------------------------------------------


def _mode_pil(data: bytes, sample: str, step: DecodeOptions) -> np.ndarray:
    from PIL import Image, ImageOps

    try:
        with Image.open(io.BytesIO(data)) as image:
            im = ImageOps.exif_transpose(image) if step.exif_orientation else image
            wide = im.mode in _PIL_16
            if step.mode == "L16":
                _wanted_16(sample, step, 16 if wide else 8)
                return np.asarray(im, dtype=np.uint32).astype(np.uint16)
            if wide:  # 16-bit grey to 8 bits: the high byte, as mode RGB does
                grey = (np.asarray(im, dtype=np.uint32) >> 8).astype(np.uint8)
                if step.mode == "L":
                    return grey
                im = Image.fromarray(grey, "L")
            if step.mode == "L":
                # ITU-R 601-2 luma, Pillow's integer arithmetic; a grey file stays as it is
                as_grey = step.convert == "luma" or im.mode in ("L", "1", "LA", "La")
                return np.asarray(im.convert("L" if as_grey else "RGB"))
            return np.asarray(im.convert(step.mode))  # RGB or RGBA: alpha stays last
    except (Image.DecompressionBombError, OSError, SyntaxError, ValueError) as exc:
        raise SampleError(sample, f"Pillow cannot decode it: {library_words(exc)}") from None


def _bands_pil(data: bytes, sample: str, step: DecodeOptions) -> np.ndarray:
    """Pages walked one by one, each checked before its pixels are decoded: Pillow's page count
    reads every page's header first."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as image:
            pages: list[np.ndarray] = []
            decoded = 0
            while True:
                decoded += _page_checked(image, sample, len(pages) + 1, decoded)
                array = np.asarray(image)
                if image.mode in _PIL_16:  # 16-bit unsigned (checked): exact in uint16
                    array = array.astype(np.uint16)
                pages.append(array[:, :, None] if array.ndim == 2 else array)
                if len(pages) == MAX_PAGES and _has_next(image, MAX_PAGES):
                    raise SampleError(
                        sample,
                        f"it has more than {MAX_PAGES} pages (pytest_mlrepro.pipeline._decode."
                        "MAX_PAGES): refused before the pages after them are read",
                    )
                if not _has_next(image, len(pages)):
                    break
    except (Image.DecompressionBombError, OSError, SyntaxError, ValueError) as exc:
        raise SampleError(sample, f"Pillow cannot decode it: {library_words(exc)}") from None
    shapes = {p.shape[:2] for p in pages}
    if len(shapes) != 1:
        raise SampleError(
            sample,
            f"its {len(pages)} pages differ in size ({', '.join(f'{h}×{w}' for h, w in shapes)}):"
            " bands must be the same size",
        )
    dtypes = {p.dtype for p in pages}
    if len(dtypes) != 1:
        raise SampleError(sample, f"its pages differ in sample type ({sorted(map(str, dtypes))})")
    return _finite(_as_declared(np.concatenate(pages, axis=2), sample, step), sample)


def _has_next(image: PIL.Image.Image, index: int) -> bool:
    """Whether the file has a page after the ``index`` read so far (seeking to it)."""
    try:
        image.seek(index)
    except EOFError:
        return False
    return True


def _page_checked(image: PIL.Image.Image, sample: str, page: int, decoded: int) -> int:
    """From the header; wider or signed samples are refused, never cast to 16 bits (would wrap)."""
    width, height = image.size
    where = f"page {page}" if page > 1 else "its first page"
    if width * height > MAX_IMAGE_PIXELS:
        raise SampleError(
            sample, f"{where}: " + too_many(f"{width}×{height} = {width * height} pixels")
        )
    wide = wide_samples(image)
    if wide is not None and not (wide == "floating-point" and image.mode == "F"):
        raise SampleError(
            sample,
            f"{where} has {wide} samples ({image.format} mode {image.mode}): only 8-bit and "
            "16-bit unsigned integer (and 32-bit floating-point) bands are decoded; wider or "
            "signed samples would wrap around, so convert the file with the range you mean",
        )
    depth = 4 if image.mode == "F" else 2 if image.mode in _PIL_16 else 1
    size = width * height * len(image.getbands()) * depth
    if decoded + size > MAX_DECODED_BYTES:
        raise _too_large(sample, f"{page} pages so far, the last {width}×{height}", decoded + size)
    return size


def _as_declared(array: np.ndarray, sample: str, step: DecodeOptions) -> np.ndarray:
    if array.dtype.kind == "b":  # a bilevel image: Pillow's 0/255 bytes
        array = array.astype(np.uint8) * np.uint8(255)
    if array.dtype != np.dtype(str(step.dtype)) or array.shape[2] != step.channels:
        raise _other_bands(sample, array.shape[2], array.dtype, step)
    return array


def _other_bands(sample: str, bands: int, dtype: np.dtype, step: DecodeOptions) -> SampleError:
    return SampleError(
        sample,
        f"it holds {bands} band{'s' * (bands != 1)} of {dtype}, the manifest decodes "
        f"{step.channels} of {step.dtype} (decode.channels, decode.dtype)",
    )


def wide_samples(image: PIL.Image.Image) -> str | None:
    """What the current page's samples are, from its header, when they are not 8- or 16-bit
    unsigned integers (which every backend reduces to 8 bits by the high byte), else None."""
    mode = image.mode
    if mode == "F" or mode.startswith("F;"):
        return "floating-point"
    if mode.startswith("I;16"):
        return "16-bit signed integer" if mode.endswith("S") else None
    if mode == "I" or mode.startswith("I;32"):
        # Pillow's mode "I" (int32) holds 16-bit PGM files as well as 32-bit TIFF ones.
        bits, signed = 32, True
        if image.format == "PPM":
            bits, signed = 16, False  # maxval is at most 65535
        elif image.format == "TIFF":
            tags = getattr(image, "tag_v2", {})
            bits = max(_ints(tags.get(258)) or [32])  # BitsPerSample
            signed = any(kind != 1 for kind in _ints(tags.get(339)) or [1])  # SampleFormat
        if bits > 16 or signed:
            return f"{bits}-bit {'signed ' if signed else ''}integer"
    return None


def _ints(value: object) -> list[int]:
    if isinstance(value, int):
        return [value]
    if isinstance(value, tuple | list):
        return [int(v) for v in value if isinstance(v, int)]
    return []


# --- OpenCV -------------------------------------------------------------------------------------


def _mode_opencv(data: bytes, sample: str, step: DecodeOptions) -> np.ndarray:
    import cv2

    deep = step.mode in ("L16", "RGB16")
    if step.mode in ("L", "L16") and step.convert == "luma":
        flags = cv2.IMREAD_GRAYSCALE  # OpenCV's own grey read (its luma, its rounding)
    elif step.mode == "RGBA":
        flags = cv2.IMREAD_UNCHANGED  # the file's own channels: alpha kept when there is one
    else:
        flags = cv2.IMREAD_COLOR
    # IMREAD_ANYDEPTH keeps 16-bit samples, reduced to 8 bits by their high byte below: OpenCV's
    # own reduction (IMREAD_COLOR alone) rounds 16-bit RGB TIFFs through libtiff's RGBA reader,
    # one level off the high byte that Pillow, tf.io and OpenCV's PNG path keep.
    flags |= cv2.IMREAD_ANYDEPTH
    if not step.exif_orientation:
        flags |= cv2.IMREAD_IGNORE_ORIENTATION
    array = cv2.imdecode(np.frombuffer(data, np.uint8), flags)
    if array is None:
        raise SampleError(sample, "OpenCV cannot decode it")
    if array.dtype not in (np.uint8, np.uint16):  # not expected after the header check
        raise SampleError(sample, f"OpenCV decoded it to {array.dtype}, not 8- or 16-bit samples")
    if deep:
        _wanted_16(sample, step, 16 if array.dtype == np.uint16 else 8)
    elif array.dtype == np.uint16:  # 16-bit samples to 8 bits: the high byte, as mode RGB does
        array = np.right_shift(array, 8).astype(np.uint8)
    if step.mode == "RGBA":
        if array.ndim == 2 or array.shape[2] == 1:
            array = cv2.cvtColor(array, cv2.COLOR_GRAY2BGRA)
        elif array.shape[2] == 3:
            array = cv2.cvtColor(array, cv2.COLOR_BGR2BGRA)
    return array


# --- tf.io --------------------------------------------------------------------------------------


def _mode_tf(data: bytes, sample: str, step: DecodeOptions, file_format: str) -> np.ndarray:
    from ._tf_ops import decode_tf_channels

    deep = step.mode in ("L16", "RGB16")
    if deep and file_format != "PNG":
        raise SampleError(
            sample,
            f"tf.io decodes 16-bit samples from PNG only, this is {file_format or 'unknown'}: "
            "use backend 'opencv' for it",
        )
    if deep:  # tf.io would widen 8-bit samples (× 257): refused before, as the others do
        _wanted_16(sample, step, 16 if len(data) > 24 and data[24] == 16 else 8)  # IHDR depth
    one = step.mode in ("L", "L16") and step.convert == "luma"
    channels = 1 if one else 4 if step.mode == "RGBA" else 3
    return decode_tf_channels(data, channels, deep, step.dct_method or "INTEGER_FAST", sample)


# --- numpy --------------------------------------------------------------------------------------


def decode_npy(data: bytes, sample: str, step: DecodeOptions) -> np.ndarray:
    """Read without pickle, its header checked before the array is read."""
    stream = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(stream)
    except (ValueError, OSError, SyntaxError) as exc:
        raise SampleError(sample, f"numpy cannot read it as a .npy array: {exc}") from None
    first = step.axes == "CHW"
    if len(shape) not in (2, 3):
        layout = "C×H×W (axes: CHW)" if first else "H×W×C (channels last)"
        raise SampleError(sample, f"its array has shape {shape}: an image is H×W or {layout}")
    height, width = shape[-2:] if first and len(shape) == 3 else shape[:2]
    if height * width > MAX_IMAGE_PIXELS:
        pixels = f"{width}×{height} = {height * width} pixels"
        raise SampleError(sample, too_many(pixels))
    bands = (shape[0] if first else shape[2]) if len(shape) == 3 else 1
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if size > MAX_DECODED_BYTES:
        raise _too_large(sample, "×".join(map(str, shape)) + f" {dtype}", size)
    want = np.dtype(str(step.dtype))
    if (dtype.kind, dtype.itemsize) != (want.kind, want.itemsize) or bands != step.channels:
        raise _other_bands(sample, bands, dtype, step)
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise SampleError(sample, f"numpy cannot read it as a .npy array: {exc}") from None
    if fortran:
        array = np.ascontiguousarray(array)
    if array.ndim == 2:
        array = array[:, :, None]
    elif first:
        array = array.transpose(1, 2, 0)
    # Native byte order: a big-endian file's values, in the layout every step expects.
    return _finite(np.ascontiguousarray(array.astype(want, copy=False)), sample)


def _finite(array: np.ndarray, sample: str) -> np.ndarray:
    """NaN or infinite values are this sample's error: they give scores that compare as nothing."""
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        bad = int(np.count_nonzero(~np.isfinite(array)))
        raise SampleError(sample, f"{bad} of its values are NaN or infinite")
    return array
