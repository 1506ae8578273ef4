"""Decoding in every mode: colour, grey, colour with alpha, 16-bit grey or colour, and multi-band
arrays (multi-page TIFFs, ``.npy`` files).

Each backend converts as its library does (Pillow's ``convert``, OpenCV's ``imdecode`` flags and
``cvtColor``, tf.io's ``channels``); where the libraries have no common rule the step refuses
instead of picking one silently: an 8-bit file where 16-bit samples are declared, a band count
or dtype other than the manifest's.
"""

from __future__ import annotations

import io
import re
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..errors import SampleError

if TYPE_CHECKING:
    import PIL.Image

MAX_IMAGE_PIXELS = 89_478_485
"""The most pixels (width × height) an image may declare in its header; larger ones are refused
before decoding, by every decode backend. It is Pillow's default ``Image.MAX_IMAGE_PIXELS``
(a quarter GiB as 24-bit RGB): a 100 kB PNG can declare 30000 × 30000 pixels, 2.7 GB decoded."""


def too_many(what: str) -> str:
    """The refusal of an image whose header declares ``what``, more than the pixel limit."""
    return (
        f"its header declares {what}, more than the limit of {MAX_IMAGE_PIXELS} pixels "
        "(pytest_mlrepro.pipeline._steps.MAX_IMAGE_PIXELS): refused before decoding (a "
        "decompression bomb, or an image far larger than a classifier's input)"
    )


class Decode(Protocol):
    """What these decoders read of the decode step (``_steps.Decode``)."""

    @property
    def backend(self) -> str: ...
    @property
    def order(self) -> str: ...
    @property
    def exif_orientation(self) -> bool: ...
    @property
    def dct_method(self) -> str | None: ...
    @property
    def mode(self) -> str: ...
    @property
    def convert(self) -> str | None: ...
    @property
    def channels(self) -> int | None: ...
    @property
    def dtype(self) -> str | None: ...
    @property
    def axes(self) -> str | None: ...


# Pillow modes whose samples are 16-bit unsigned integers (PNG, TIFF, PGM); "I" holds them too
# (checked by the header: no wider or signed samples get here).
_PIL_16 = ("I;16", "I;16B", "I;16L", "I;16N", "I")
_CHANNEL = {"red": 0, "green": 1, "blue": 2}
MAX_PAGES = 1024
"""The most pages of a multi-page file decoded as bands (a hyperspectral image has a few
hundred); a file with more is refused when the page after them is found."""
MAX_DECODED_BYTES = MAX_IMAGE_PIXELS * 4 * 2
"""The most bytes a multi-band sample may decode to: what the largest image any mode accepts
holds (``MAX_IMAGE_PIXELS`` pixels of 4 channels of 16 bits, 716 MB). A .npy array's header and
each page of a TIFF are checked against it before their pixels are read."""


_OBJECT_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>")


def library_words(exc: BaseException) -> str:
    """A library's error message as a report shows it: the file it names by an object's repr
    (Pillow: ``cannot identify image file <_io.BytesIO object at 0x7f…>``) said as "the file"
    (the sample's id names it), so that no memory address reaches a report."""
    return _OBJECT_REPR.sub("the file", str(exc))


def _too_large(sample: str, what: str, size: int) -> SampleError:
    return SampleError(
        sample,
        f"it would decode to {size} bytes ({what}), more than the limit of {MAX_DECODED_BYTES} "
        "(pytest_mlrepro.pipeline._decode.MAX_DECODED_BYTES): refused before decoding",
    )


def decode_mode(data: bytes, sample: str, step: Decode, header: PIL.Image.Image) -> np.ndarray:
    """``data`` as H×W×C in ``step.mode``, in the order the step's state names."""
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


def _wanted_16(sample: str, step: Decode, bits: int) -> None:
    if bits != 16:
        raise SampleError(
            sample,
            f"it has {bits}-bit samples and the manifest decodes mode {step.mode} (16-bit "
            "samples): a wrong file in the data set, or the mode should be "
            f"{step.mode.removesuffix('16')}",
        )


# --- Pillow -------------------------------------------------------------------------------------


def _mode_pil(data: bytes, sample: str, step: Decode) -> np.ndarray:
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


def _bands_pil(data: bytes, sample: str, step: Decode) -> np.ndarray:
    """Every page of the file (a TIFF may hold several), each page's bands in its order. Each
    page is checked from its header before its pixels are decoded: its pixel count, its sample
    format (32-bit and signed integers are refused as on the first page: never cast to 16 bits,
    which would wrap them) and the bytes all pages decode to; at most :data:`MAX_PAGES` pages
    (the pages are walked one by one: Pillow's page count reads every page's header first)."""
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
    """Whether the file has a page after the ``index`` read so far; if so, the image is there."""
    try:
        image.seek(index)
    except EOFError:
        return False
    return True


def _page_checked(image: PIL.Image.Image, sample: str, page: int, decoded: int) -> int:
    """The bytes page ``page`` (the image's current one) decodes to, from its header; this
    sample's error when its pixel count, its samples or the bytes of all pages so far pass
    their limits."""
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


def _as_declared(array: np.ndarray, sample: str, step: Decode) -> np.ndarray:
    """``array`` when it has the step's band count and dtype; else this sample's error."""
    if array.dtype.kind == "b":  # a bilevel image: Pillow's 0/255 bytes
        array = array.astype(np.uint8) * np.uint8(255)
    if array.dtype != np.dtype(str(step.dtype)) or array.shape[2] != step.channels:
        raise _other_bands(sample, array.shape[2], array.dtype, step)
    return array


def _other_bands(sample: str, bands: int, dtype: np.dtype, step: Decode) -> SampleError:
    return SampleError(
        sample,
        f"it holds {bands} band{'s' * (bands != 1)} of {dtype}, the manifest decodes "
        f"{step.channels} of {step.dtype} (decode.channels, decode.dtype)",
    )


def wide_samples(image: PIL.Image.Image) -> str | None:
    """What the image's samples are when they are not 8- or 16-bit unsigned integers (which
    every backend reduces to 8 bits by the high byte), else None. Read from the header (of the
    page the image is at: each page of a multi-page TIFF is checked so)."""
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


def _mode_opencv(data: bytes, sample: str, step: Decode) -> np.ndarray:
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


def _mode_tf(data: bytes, sample: str, step: Decode, file_format: str) -> np.ndarray:
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


def decode_npy(data: bytes, sample: str, step: Decode) -> np.ndarray:
    """A ``.npy`` array (H×W, H×W×C, or C×H×W with ``axes: CHW``), read without pickle, its
    header checked before the array is read: the pixel limit, and the band count and dtype the
    step declares."""
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
    """``array``; a float one with NaN or infinite values is this sample's error (they would
    go on into the model and come out as scores that compare as nothing)."""
    if array.dtype.kind == "f" and not np.isfinite(array).all():
        bad = int(np.count_nonzero(~np.isfinite(array)))
        raise SampleError(sample, f"{bad} of its values are NaN or infinite")
    return array
