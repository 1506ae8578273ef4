"""What the data's files are (bit depth, bands, alpha, axis order), read before ``mlrepro init``
proposes a recipe; a file no decoder reads is left to the run's checks."""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

import numpy as np

from ..pipeline import MAX_IMAGE_PIXELS
from ..runners import fixed_size
from ._data_folder import DataInfo, InitError
from ._presets import Bands

# How many files are opened (spread over the data set): enough to see a mixed data set.
PROBED = 200
_WIDE = ("I;16", "I;16B", "I;16L", "I;16N", "I")
_ALPHA_MODES = ("RGBA", "LA", "PA", "RGBa", "La")
Family = Literal["grey", "grey16", "colour", "rgba", "bands"]
_BANDS_DTYPES = ("uint8", "uint16", "float32")
T = TypeVar("T")


@dataclass(frozen=True)
class FileFacts:
    """One file as the decode step would see it."""

    name: str
    kind: Literal["image", "npy", "unknown"]
    shape: tuple[int, ...] = ()  # a .npy array's shape; an image's (pages, height, width, bands)
    dtype: str = "uint8"  # per sample: uint8, uint16, float32 (other .npy dtypes as numpy names)
    alpha: bool = False
    pages: int = 1
    top: float = 0.0  # the largest value in the file
    mode: str = ""  # Pillow's mode


@dataclass
class DataFacts:
    """The data set's family, read from its files (at most :data:`PROBED` of them)."""

    family: Family
    bands: int  # channels per sample as decoded (grey 1, colour 3, with alpha 4, or the bands)
    dtype: str  # the decoded samples' dtype
    top: float  # the largest value seen
    files: int  # files opened
    example: str  # a file of the family, for messages
    decode: Bands | None = None  # mode bands: how to decode
    without_alpha: list[str] = field(default_factory=list)  # rgba: the files that have none
    described: str = ""

    def range_divisors(self) -> list[tuple[float, str]]:
        """The divisors a recipe may scale these values by, each with why."""
        found: list[tuple[float, str]] = []
        if self.dtype == "uint16":
            found.append((65535.0, "the 16-bit range"))
            if 255 < self.top <= 4095:
                found.append((4095.0, "12-bit data stored in 16 bits"))
        elif self.dtype == "uint8":
            found.append((255.0, "the 8-bit range"))
        known = {d for d, _ in found}
        if self.top > 0 and self.top not in known and self.dtype != "uint8":
            found.append((float(self.top), "the data's own maximum"))
        return found


def _probe_npy(name: str, data: bytes) -> FileFacts:
    stream = io.BytesIO(data)
    try:
        version = np.lib.format.read_magic(stream)
        read = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, _, dtype = read(stream)
        if int(np.prod(shape, dtype=np.int64)) > MAX_IMAGE_PIXELS * 16:
            return FileFacts(name, "npy", tuple(shape), str(dtype))
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, SyntaxError, EOFError):
        return FileFacts(name, "unknown")
    top = float(np.max(array)) if array.size and array.dtype.kind in "uif" else 0.0
    return FileFacts(name, "npy", tuple(array.shape), str(array.dtype), top=top)


def probe_file(name: str, data: bytes) -> FileFacts:
    """What one file holds: a ``.npy`` array (by its magic) or an image Pillow reads."""
    if data[:6] == b"\x93NUMPY":
        return _probe_npy(name, data)
    from PIL import Image, ImageSequence

    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
            if width * height > MAX_IMAGE_PIXELS:
                return FileFacts(name, "unknown")
            mode = image.mode
            pages = int(getattr(image, "n_frames", 1))
            alpha = mode in _ALPHA_MODES or (mode == "P" and "transparency" in image.info)
            top = 0.0
            for page in ImageSequence.Iterator(image):
                array = np.asarray(page)
                top = max(top, float(array.max()) if array.size else 0.0)
                if pages == 1:
                    break
            dtype = "uint16" if mode in _WIDE else "float32" if mode == "F" else "uint8"
            bands = len(image.getbands())
    except Exception:  # not an image Pillow reads: the run's decode says so, naming the file
        return FileFacts(name, "unknown")
    return FileFacts(name, "image", (pages, height, width, bands), dtype, alpha, pages, top, mode)


def _npy_axes(shape: tuple[int, ...], channels: int | None) -> tuple[int, Literal["HWC", "CHW"]]:
    """A 3-D array's band count and axis order: the model's channel count if it tells, else the
    shortest axis (bands are fewer than a row's pixels), last when it ties."""
    if len(shape) == 2:
        return 1, "HWC"
    if channels is not None and shape[2] == channels:
        return channels, "HWC"
    if channels is not None and shape[0] == channels:
        return channels, "CHW"
    return (shape[0], "CHW") if shape[0] < min(shape[1], shape[2]) else (shape[2], "HWC")


def spread(items: Sequence[T], count: int) -> list[T]:
    """``count`` items evenly spread over ``items`` (sorted by id, so often by class)."""
    if count >= len(items):
        return list(items)
    index = np.linspace(0, len(items) - 1, count).round().astype(int)
    return [items[i] for i in dict.fromkeys(index.tolist())]


def read_facts(data: DataInfo, channels: int | None) -> DataFacts | None:
    """The data set's family from up to :data:`PROBED` of its images, or None when none reads;
    ``channels``: the model's count, if known (which axis of a ``.npy`` holds the bands)."""
    facts = [probe_file(n, (data.folder / n).read_bytes()) for n in spread(data.images, PROBED)]
    known = [f for f in facts if f.kind != "unknown"]
    if not known:
        return None
    top = max(f.top for f in known)
    arrays = [f for f in known if f.kind == "npy"]
    paged = [f for f in known if f.pages > 1]
    if arrays or paged:
        first = (arrays or paged)[0]
        decode, described = _npy_bands(arrays, channels, top) if arrays else _tiff_bands(first, top)
        return DataFacts("bands", decode.channels, decode.dtype, top, len(known), first.name,
                         decode, [], described)  # fmt: skip
    wide = [f for f in known if f.dtype == "uint16"]
    if wide and all(f.shape[3] == 1 for f in wide):
        described = (
            f"16-bit grey ({'12-bit values, up to' if top <= 4095 else 'values up to'} "
            f"{top:g}; Pillow mode {wide[0].mode}, e.g. {wide[0].name!r})"
        )
        return DataFacts("grey16", 1, "uint16", top, len(known), wide[0].name, described=described)
    with_alpha = [f for f in known if f.alpha]
    if with_alpha and len(with_alpha) * 2 >= len(known):
        without = [f.name for f in known if not f.alpha]
        described = f"colour with alpha ({len(with_alpha)} of {len(known)} files read)"
        return DataFacts("rgba", 4, "uint8", top, len(known), with_alpha[0].name, None, without,
                         described)  # fmt: skip
    grey = all(f.mode in ("L", "1", "LA") for f in known)
    family: Family = "grey" if grey else "colour"
    return DataFacts(family, 1 if grey else 3, "uint8", top, len(known), known[0].name,
                     described="8-bit grey" if grey else "8-bit colour")  # fmt: skip


def _npy_bands(arrays: list[FileFacts], channels: int | None, top: float) -> tuple[Bands, str]:
    """How the arrays decode (their most common shape and dtype), and the words for them."""
    shape = Counter(f.shape for f in arrays).most_common(1)[0][0]
    dtype = Counter(f.dtype for f in arrays).most_common(1)[0][0]
    if len(shape) not in (2, 3):
        raise InitError(
            f"{arrays[0].name}: a .npy array of shape {list(shape)}: an image is H×W, H×W×C or "
            "C×H×W"
        )
    if dtype not in _BANDS_DTYPES:
        raise InitError(
            f"{arrays[0].name}: a .npy array of {dtype}: mode bands decodes "
            f"{', '.join(_BANDS_DTYPES)}; save the arrays in one of them"
        )
    bands, axes = _npy_axes(shape, channels)
    described = (
        f"{bands}-band {dtype} .npy arrays, {'bands first (C×H×W)' if axes == 'CHW' else 'H×W×C'}"
        f" (shape {list(shape)}), values up to {top:g}"
    )
    return Bands(bands, dtype, "numpy", axes), described


def _tiff_bands(first: FileFacts, top: float) -> tuple[Bands, str]:
    bands = first.pages * first.shape[3]
    return Bands(bands, first.dtype, "pil"), (
        f"{first.pages}-page TIFFs ({bands} bands of {first.dtype}, e.g. {first.name!r}), "
        f"values up to {top:g}"
    )


def layout_from_bands(shape: tuple[int | None, ...], bands: int) -> Literal["NCHW", "NHWC"] | None:
    """The layout a signature leaves open (``[?, 32, 32, 13]``), by the one axis of the data's
    band count."""
    if len(shape) != 4:
        return None
    first, last = fixed_size(shape[1]) == bands, fixed_size(shape[3]) == bands
    if last and not first:
        return "NHWC"
    if first and not last:
        return "NCHW"
    return None


def family_refusal(facts: DataFacts, what: str) -> str | None:
    """Why ``what`` (a preset, 8-bit by construction) cannot decode these files, or None."""
    if facts.family == "grey16":
        return (
            f"{what} decodes 8-bit images, and the data's files are {facts.described}: it would "
            "read their high byte only. Use --discover (it searches 16-bit conventions: decode "
            "mode L16, /65535, /4095 for 12-bit data, the data's own range and mean/std) or "
            "write 'decode: {mode: L16}' and the scale by hand"
        )
    if facts.family == "bands":
        assert facts.decode is not None
        return (
            f"{what} decodes image files of 1 or 3 channels, and the data's files are "
            f"{facts.described}. Use --discover (it searches band-wise conventions) or write "
            f"'decode: {{mode: bands, channels: {facts.bands}, dtype: {facts.dtype}}}' by hand"
        )
    return None
