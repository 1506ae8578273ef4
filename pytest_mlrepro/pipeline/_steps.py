"""Preprocessing, one explicit op per step: each declares the state it accepts and produces, so a
misordered pipeline is a manifest error before any data flows, not a silent accuracy drop."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np

from .._schema import Invalid, unbuildable
from ..errors import MlreproError, SampleError, Unavailable
from ._decode import MAX_IMAGE_PIXELS as MAX_IMAGE_PIXELS  # re-exported: its documented home
from ._decode import ChannelOrder, DecodeOptions, decode

Method = Literal["nearest", "bilinear", "bicubic", "area", "box", "lanczos"]
# What a cast may produce: a model input's element types (float32, float16, uint8, int8), and
# uint16 (16-bit images before a resize).
CastDType = Literal["float32", "float16", "uint8", "uint16", "int8"]
# Channel names (State.order) whose first three channels are colours that a color step reorders.
COLOUR_ORDERS = ("RGB", "BGR", "RGBA", "BGRA")


@dataclass(frozen=True)
class State:
    """What flows between steps, known before any data does. ``order`` names the channels (``L``:
    one grey channel, ``bands``: channels with no colour meaning); ``channels`` counts them."""

    order: str = "RGB"
    layout: Literal["HWC", "CHW"] = "HWC"
    dtype: str = "uint8"
    channels: int = 3


@dataclass
class Tensor:
    array: np.ndarray
    order: str
    layout: str = "HWC"


def channels_last(array: np.ndarray, layout: str) -> np.ndarray | None:
    """An H×W×C view, None when it is not an image: the one rule fingerprints and pictures use."""
    if array.ndim == 2:
        return array[:, :, None]
    if array.ndim != 3:
        return None
    return array.transpose(1, 2, 0) if layout == "CHW" else array


class Step:
    """Base of all preprocessing ops. Subclasses are frozen dataclasses named by ``op``."""

    op: ClassVar[str]
    # Costs little next to decoding and resizing: a preprocessing prefix shared between manifests
    # ends before such steps, so the session keeps the smaller tensor (the uint8 image, not its
    # float32 cast) and each manifest repeats them. A registered step is assumed costly.
    cheap: ClassVar[bool] = False
    if TYPE_CHECKING:
        # Every concrete step is a dataclass (register_step refuses others): declared so that
        # dataclasses.fields() and the schema's converter accept a Step.
        __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]

    def check(self) -> None:
        """Rules between this op's own parameters; raise Invalid(field, message)."""

    def transition(self, state: State) -> State:
        """The state after this op, or Invalid("", why) if it cannot follow ``state``."""
        return state

    def apply(self, t: Tensor) -> Tensor:
        raise NotImplementedError

    def params(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


STEPS: dict[str, type[Step]] = {}


class StepRegistrationError(MlreproError):
    """A preprocessing step that cannot be registered."""


def is_builtin(cls: type[Step]) -> bool:
    """Whether ``cls`` is one of pytest-mlrepro's own steps (not a registered custom one)."""
    return cls.__module__.split(".")[0] == __name__.split(".")[0]


def register_step(cls: type[Step]) -> type[Step]:
    """Register an op under ``cls.op``; a bad step is refused here, not at the first manifest."""
    name = getattr(cls, "__name__", repr(cls))
    if not dataclasses.is_dataclass(cls):
        raise StepRegistrationError(f"step {name} must be a dataclass")
    op = getattr(cls, "op", None)
    if not isinstance(op, str) or not op:
        raise StepRegistrationError(f"step {name} must name its op (op = 'my_step')")
    existing = STEPS.get(op)
    if existing not in (None, cls) and is_builtin(existing) and not is_builtin(cls):
        raise StepRegistrationError(
            f"step {name} (op {op!r}): {op!r} is a built-in step; registering it would replace "
            "the built-in for every manifest: give the step another op name"
        )
    try:
        hints = typing.get_type_hints(cls)
    except Exception as exc:
        raise StepRegistrationError(
            f"step {name} (op {op!r}): its field types cannot be resolved "
            f"({type(exc).__name__}: {exc})"
        ) from None
    for f in dataclasses.fields(cls):
        why = unbuildable(hints.get(f.name, Any)) if f.init else None
        if why is not None:
            raise StepRegistrationError(
                f"step {name} (op {op!r}): field {f.name!r}: {why}; a manifest could not give it"
            )
    STEPS[op] = cls
    return cls


def _need_hwc(state: State, op: str) -> None:
    if state.layout != "HWC":
        raise Invalid(
            "",
            f"{op} works on height × width × channels images; it must come before the layout step",
        )


# --- decode -------------------------------------------------------------------------------------


@register_step
@dataclass(frozen=True)
class Decode(Step, DecodeOptions):
    """Bytes → H×W×C array, in the ``mode`` the manifest states (docs/manifest.md#decode-modes):

    * ``RGB`` (the default): 3 × uint8, in ``order``. Grey, palette and CMYK files are converted
      as the backend converts them, an alpha channel is dropped, 16-bit samples keep their high
      byte (every backend alike).
    * ``RGBA``: 4 × uint8 (``order: BGR`` gives BGRA). A file without alpha is this sample's
      error (an opaque alpha invented for it would be recorded as data), unless the step declares
      ``alpha: add-opaque``: then it gets an opaque one, as the backend converts.
    * ``L``: 1 × uint8 grey. A colour file becomes grey by ``convert``: ``luma`` (ITU-R 601-2,
      L = 0.299 R + 0.587 G + 0.114 B, with the backend's own integer rounding: Pillow's
      ``convert("L")``, OpenCV's ``IMREAD_GRAYSCALE``, tf.io's ``channels=1``) or one of its
      channels (``red``, ``green``, ``blue``).
    * ``L16``, ``RGB16``: 1 or 3 × uint16, for files with 16-bit samples (an 8-bit file is this
      sample's error, never widened silently). Pillow reads 16-bit colour as 8 bits: ``RGB16``
      needs backend ``opencv`` or ``tf`` (PNG).
    * ``bands``: every band the file holds, as it holds them: ``channels`` of ``dtype``
      (uint8, uint16 or float32); a multi-page TIFF gives one band per page (backend ``pil``),
      a ``.npy`` array (H×W or H×W×C, backend ``numpy``, read without pickle) its own. A sample
      with another band count or dtype is its error. ``axes: CHW`` reads a ``.npy`` array
      stored bands first (C×H×W, as rasterio and most satellite tools write them).

    ``exif_orientation``: apply the EXIF rotation (OpenCV does by default, Pillow and tf.io do
    not). ``backend: tf`` decodes with ``tf.io.decode_jpeg`` (other formats:
    ``tf.io.decode_image``). Its ``dct_method`` changes pixels: ``INTEGER_FAST`` (TensorFlow's
    default, filled in when the manifest leaves it out) or ``INTEGER_ACCURATE`` (what Pillow's
    libjpeg-turbo does).
    """

    op: ClassVar[str] = "decode"  # its fields are DecodeOptions', which the decoders read

    def __post_init__(self) -> None:
        if self.backend == "tf" and self.dct_method is None:
            object.__setattr__(self, "dct_method", "INTEGER_FAST")  # recorded as it ran
        if self.mode in ("L", "L16") and self.convert is None:
            object.__setattr__(self, "convert", "luma")  # recorded as it runs

    def check(self) -> None:
        if self.backend != "tf" and self.dct_method is not None:
            raise Invalid(
                "dct_method",
                f"only backend 'tf' has a dct_method; {self.backend!r} decodes with the "
                "accurate integer DCT",
            )
        if self.backend == "tf" and self.exif_orientation:
            raise Invalid(
                "exif_orientation",
                "tf.io.decode_jpeg ignores EXIF orientation; use backend 'pil' or 'opencv' "
                "to apply it",
            )
        if self.backend == "numpy" and self.exif_orientation:
            raise Invalid("exif_orientation", "a .npy array has no EXIF orientation")
        if self.convert is not None and self.mode not in ("L", "L16"):
            raise Invalid(
                "convert",
                f"only modes L and L16 convert colour to grey; mode {self.mode} keeps colour",
            )
        if self.mode == "bands":
            if self.backend not in ("pil", "numpy"):
                raise Invalid(
                    "backend",
                    "mode bands reads multi-page TIFFs (backend pil) or .npy arrays (backend "
                    f"numpy), not with {self.backend!r}",
                )
            if self.channels is None or self.dtype is None:
                raise Invalid(
                    "channels" if self.channels is None else "dtype",
                    "mode bands states how many bands every sample has and their type, e.g. "
                    "'decode: {mode: bands, channels: 5, dtype: uint16}'",
                )
            if self.channels < 1:
                raise Invalid("channels", "must be at least 1")
        else:
            for name in ("channels", "dtype"):
                if getattr(self, name) is not None:
                    raise Invalid(
                        name,
                        f"mode {self.mode} fixes its {name} ({_MODE_STATE[self.mode][1:]}); "
                        f"only mode bands states them",
                    )
            if self.backend == "numpy":
                raise Invalid(
                    "mode",
                    "backend numpy reads .npy arrays as they are: use mode bands with their "
                    "channels and dtype",
                )
        if self.alpha is not None and self.mode != "RGBA":
            raise Invalid("alpha", f"only mode RGBA has an alpha to add; mode {self.mode} has none")
        if self.axes is not None and (self.mode, self.backend) != ("bands", "numpy"):
            raise Invalid(
                "axes",
                "only a .npy array (mode bands, backend numpy) has an axis order to state",
            )
        if self.mode in ("L", "L16", "bands") and self.order != "RGB":
            raise Invalid("order", f"mode {self.mode} has no colour order; leave 'order' out")
        if self.mode == "RGB16" and self.backend == "pil":
            raise Invalid(
                "mode",
                "Pillow reads 16-bit colour images as 8 bits; use backend 'opencv' (or 'tf' for "
                "PNG) for mode RGB16",
            )

    def transition(self, state: State) -> State:
        return self.state()

    def state(self) -> State:
        """What this decode yields: channel names, count and dtype, before any data."""
        if self.mode == "bands":
            assert self.channels is not None and self.dtype is not None  # check()
            return State(order="bands", layout="HWC", dtype=self.dtype, channels=self.channels)
        names, channels, dtype = _MODE_STATE[self.mode]
        if names in ("RGB", "RGBA") and self.order == "BGR":
            names = "BGR" + names[3:]
        return State(order=names, layout="HWC", dtype=dtype, channels=channels)

    def decode(self, data: bytes, sample: str) -> Tensor:
        return Tensor(decode(data, sample, self), self.state().order)


# Each mode but bands: (channel names in RGB order, channel count, dtype).
_MODE_STATE: dict[str, tuple[str, int, str]] = {
    "L": ("L", 1, "uint8"),
    "RGB": ("RGB", 3, "uint8"),
    "RGBA": ("RGBA", 4, "uint8"),
    "L16": ("L", 1, "uint16"),
    "RGB16": ("RGB", 3, "uint16"),
}


# --- colour order -------------------------------------------------------------------------------


@register_step
@dataclass(frozen=True)
class Color(Step):
    """Reorder the colour channels to ``order`` (a no-op when they already are): RGB ↔ BGR, and
    RGBA ↔ BGRA (alpha stays last). Refused on grey and multi-band data, where it could change
    nothing (grey) or would name colours the bands do not have."""

    op: ClassVar[str] = "color"
    cheap: ClassVar[bool] = True
    order: ChannelOrder = "RGB"

    def transition(self, state: State) -> State:
        if state.order not in COLOUR_ORDERS:
            what = "one grey channel" if state.order == "L" else f"{state.channels} bands"
            raise Invalid(
                "",
                f"the data has {what}, no colour order to change: remove this step (or decode "
                "a colour mode)",
            )
        return dataclasses.replace(state, order=self.order + state.order[3:])

    def apply(self, t: Tensor) -> Tensor:
        if t.order[:3] == self.order:
            return t
        axis = -1 if t.layout == "HWC" else 0
        swapped = [2, 1, 0, *range(3, t.array.shape[axis])]  # alpha stays last
        return Tensor(np.take(t.array, swapped, axis=axis), self.order + t.order[3:], t.layout)


# --- crop ---------------------------------------------------------------------------------------


@register_step
@dataclass(frozen=True)
class Crop(Step):
    """Center crop, by ``fraction`` or by ``size`` ([height, width] or one int for a square).

    ``rounding`` names whose arithmetic is used, because they differ by a pixel:

    * ``google``: EfficientNet/Inception eval: a square of ``int(fraction × shorter side)``,
      offset ``(dim − crop + 1) // 2``.
    * ``torchvision``: ``CenterCrop(size)``: offset ``round((dim − crop) / 2)`` (banker's rounding),
      zero padding when the image is smaller than the crop. Takes ``size`` only.
    * ``tf``: ``tf.image.central_crop(fraction)``: per side, offset ``int((dim − dim × f) / 2)``,
      crop ``dim − 2 × offset``. Takes ``fraction`` only.
    """

    op: ClassVar[str] = "crop"
    cheap: ClassVar[bool] = True
    fraction: float | None = None
    size: int | tuple[int, int] | None = None
    rounding: Literal["google", "torchvision", "tf"] = "google"

    def check(self) -> None:
        if (self.fraction is None) == (self.size is None):
            raise Invalid("", "give exactly one of 'fraction' and 'size'")
        if self.fraction is not None and not 0.0 < self.fraction <= 1.0:
            raise Invalid("fraction", f"{self.fraction} is not in (0, 1]")
        if self.size is not None and min(_pair(self.size)) < 1:
            raise Invalid("size", "sizes must be positive")
        if self.rounding == "torchvision" and self.fraction is not None:
            raise Invalid(
                "rounding",
                "torchvision's CenterCrop takes a size, not a fraction; "
                "use rounding 'google' or 'tf' with a fraction",
            )
        if self.rounding == "tf" and self.size is not None:
            raise Invalid(
                "rounding",
                "tf.image.central_crop takes a fraction; use 'google' or 'torchvision' with a size",
            )

    def transition(self, state: State) -> State:
        _need_hwc(state, "crop")
        return state

    def box(self, height: int, width: int) -> tuple[int, int, int, int]:
        """(top, left, crop height, crop width) for an image of this size; may exceed it."""
        if self.rounding == "tf":
            assert self.fraction is not None
            top = int((height - height * self.fraction) / 2)
            left = int((width - width * self.fraction) / 2)
            return top, left, height - 2 * top, width - 2 * left
        if self.fraction is not None:
            side = int(self.fraction * min(height, width))
            ch, cw = side, side
        else:
            assert self.size is not None  # check(): exactly one of fraction and size
            ch, cw = _pair(self.size)
        if self.rounding == "google":
            return (height - ch + 1) // 2, (width - cw + 1) // 2, ch, cw
        return int(round((height - ch) / 2.0)), int(round((width - cw) / 2.0)), ch, cw

    def apply(self, t: Tensor) -> Tensor:
        height, width = t.array.shape[:2]
        top, left, ch, cw = self.box(height, width)
        if ch < 1 or cw < 1:  # an empty crop would go on as an all-black image
            raise ValueError(
                f"the crop of this {height}×{width} image is {ch}×{cw} pixels, empty: the "
                f"image is too small for fraction {self.fraction}"
            )
        array = t.array
        if ch > height or cw > width:
            if self.rounding != "torchvision":
                raise ValueError(f"crop {ch}×{cw} is larger than the {height}×{width} image")
            pad_t, pad_l = max(0, (ch - height) // 2), max(0, (cw - width) // 2)
            pad_b, pad_r = max(0, (ch - height + 1) // 2), max(0, (cw - width + 1) // 2)
            array = np.pad(array, ((pad_t, pad_b), (pad_l, pad_r), (0, 0)))
            height, width = array.shape[:2]
            top, left = int(round((height - ch) / 2.0)), int(round((width - cw) / 2.0))
        return Tensor(
            np.ascontiguousarray(array[top : top + ch, left : left + cw]), t.order, t.layout
        )


def _pair(size: int | tuple[int, int]) -> tuple[int, int]:
    return (size, size) if isinstance(size, int) else (size[0], size[1])


# --- resize -------------------------------------------------------------------------------------


@register_step
@dataclass(frozen=True)
class Resize(Step):
    """Resize to ``size`` ([height, width], or one int for a square) or so that the shorter side is
    ``shorter_side`` (aspect kept, the longer side truncated as torchvision does).

    Pillow always antialiases when it shrinks (its filters widen with the scale) and OpenCV never
    does (``area`` averages instead), so ``antialias`` may only state what the backend does.
    ``lanczos`` is Lanczos-3 in Pillow and Lanczos-4 in OpenCV; ``box`` is Pillow's, ``area``
    OpenCV's.

    ``backend: tf`` is ``tf.image.resize``: it computes in float32 and returns float32 (uint8
    input included; ``nearest`` keeps the dtype), ``lanczos`` is its ``lanczos3``, and
    ``antialias`` is its switch (TensorFlow's default, false, filled in when left out).
    """

    op: ClassVar[str] = "resize"
    size: int | tuple[int, int] | None = None
    shorter_side: int | None = None
    method: Method = "bilinear"
    backend: Literal["pil", "opencv", "tf"] = "pil"
    antialias: bool | None = None

    def __post_init__(self) -> None:
        if self.backend == "tf" and self.antialias is None:
            object.__setattr__(self, "antialias", False)  # recorded as it ran

    def check(self) -> None:
        if (self.size is None) == (self.shorter_side is None):
            raise Invalid("", "give exactly one of 'size' and 'shorter_side'")
        if self.size is not None and min(_pair(self.size)) < 1:
            raise Invalid("size", "sizes must be positive")
        if self.shorter_side is not None and self.shorter_side < 1:
            raise Invalid("shorter_side", "must be positive")
        lacking, refusal = _NO_FILTER[self.backend]
        if self.method == lacking:
            raise Invalid("method", refusal)
        if self.backend == "pil" and self.antialias is False:
            raise Invalid(
                "antialias",
                "Pillow always antialiases when downscaling; use "
                "backend 'opencv' for a resize without antialias",
            )
        if self.backend == "opencv" and self.antialias:
            raise Invalid(
                "antialias",
                "OpenCV has no antialias switch; method 'area' averages when downscaling",
            )

    def transition(self, state: State) -> State:
        _need_hwc(state, "resize")
        if state.dtype not in ("uint8", "uint16", "float32"):
            raise Invalid(
                "",
                f"resize works on uint8, uint16 or float32 images, not {state.dtype}: "
                "resize before the cast",
            )
        if self.backend == "tf" and self.method != "nearest":
            return dataclasses.replace(state, dtype="float32")
        return state

    def target(self, height: int, width: int) -> tuple[int, int]:
        if self.size is not None:
            return _pair(self.size)
        assert self.shorter_side is not None
        short = self.shorter_side
        if height <= width:
            return short, int(short * width / height)
        return int(short * height / width), short

    def apply(self, t: Tensor) -> Tensor:
        height, width = t.array.shape[:2]
        th, tw = self.target(height, width)
        if self.backend == "tf":
            from ._tf_ops import resize_tf

            # Even at the same size: tf.image.resize still returns float32, as TF pipelines see.
            out = resize_tf(t.array, th, tw, self.method, bool(self.antialias))
            return Tensor(out, t.order, t.layout)
        if (th, tw) == (height, width):
            return t
        if self.backend == "pil":
            return Tensor(_resize_pil(t.array, th, tw, self.method, t.order), t.order, t.layout)
        return Tensor(_resize_opencv(t.array, th, tw, self.method), t.order, t.layout)


# The resize method each backend lacks, and the refusal that names its nearest equivalent.
_NO_FILTER = {
    "pil": ("area", "Pillow has no 'area' filter; its nearest equivalent is 'box'"),
    "opencv": ("box", "OpenCV has no 'box' filter; its nearest equivalent is 'area'"),
    "tf": ("box", "tf.image.resize has no 'box' method; its nearest equivalent is 'area'"),
}
_PIL_FILTERS = {"nearest": 0, "bilinear": 2, "bicubic": 3, "box": 4, "lanczos": 1}


def _resize_pil(
    array: np.ndarray, height: int, width: int, method: str, order: str = "RGB"
) -> np.ndarray:
    """Pillow's own resize and rounding: uint8 RGB or RGBA as one image (Pillow premultiplies
    alpha while it filters), anything else band by band, as Pillow filters a multi-band image."""
    from PIL import Image

    resample = Image.Resampling(_PIL_FILTERS[method])
    channels = array.shape[2]
    if array.dtype == np.uint8 and (channels == 3 or (channels == 4 and order in ("RGBA", "BGRA"))):
        # Image.fromarray makes uint8 H×W×3 an RGB image, H×W×4 an RGBA one.
        image = Image.fromarray(np.ascontiguousarray(array))
        return np.asarray(image.resize((width, height), resample))
    # A 2-D uint8 plane is mode L, uint16 I;16, float32 F.
    return _planes(
        array, lambda p: np.asarray(Image.fromarray(p).resize((width, height), resample))
    )


def _planes(array: np.ndarray, resize: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    planes = [resize(np.ascontiguousarray(array[:, :, c])) for c in range(array.shape[2])]
    return np.stack(planes, axis=2)


_CV2_AREA_CHANNELS = 4  # cv2.resize's INTER_AREA takes at most 4 channels (the others more)


def _resize_opencv(array: np.ndarray, height: int, width: int, method: str) -> np.ndarray:
    """``area`` on more than 4 channels, which OpenCV refuses, goes channel by channel."""
    import cv2

    interp = {
        "nearest": cv2.INTER_NEAREST,
        "bilinear": cv2.INTER_LINEAR,
        "bicubic": cv2.INTER_CUBIC,
        "area": cv2.INTER_AREA,
        "lanczos": cv2.INTER_LANCZOS4,
    }[method]
    if method == "area" and array.shape[2] > _CV2_AREA_CHANNELS:
        return _planes(array, lambda p: cv2.resize(p, (width, height), interpolation=interp))
    out = cv2.resize(array, (width, height), interpolation=interp)
    return out[:, :, None] if out.ndim == 2 else out


# --- types and values ---------------------------------------------------------------------------


@register_step
@dataclass(frozen=True)
class Cast(Step):
    """Convert the element type; values are kept (no scaling). To an integer type: rounded
    (half to even), clipped to its range."""

    op: ClassVar[str] = "cast"
    cheap: ClassVar[bool] = True
    dtype: CastDType = "float32"

    def transition(self, state: State) -> State:
        return dataclasses.replace(state, dtype=self.dtype)

    def apply(self, t: Tensor) -> Tensor:
        target = np.dtype(self.dtype)
        array = t.array
        if target.kind in "iu" and array.dtype != target:
            info = np.iinfo(target)
            if array.dtype.kind == "f":
                array = np.rint(array)
            array = np.clip(array, info.min, info.max)
        return Tensor(array.astype(target, copy=False), t.order, t.layout)


@register_step
@dataclass(frozen=True)
class Scale(Step):
    """Divide every value by ``divisor`` (``255`` maps bytes to 0..1). Needs float data."""

    op: ClassVar[str] = "scale"
    cheap: ClassVar[bool] = True
    divisor: float = 255.0

    def check(self) -> None:
        if self.divisor == 0:
            raise Invalid("divisor", "must not be zero")

    def transition(self, state: State) -> State:
        if not state.dtype.startswith("float"):
            raise Invalid("", f"scale receives {state.dtype} data; put a cast step before it")
        return state

    def apply(self, t: Tensor) -> Tensor:
        return Tensor(t.array / np.asarray(self.divisor, t.array.dtype), t.order, t.layout)


@register_step
@dataclass(frozen=True)
class Invert(Step):
    """A negative: ``max − x``, 255 − x on uint8 data and 65535 − x on uint16 (what
    ``PIL.ImageOps.invert`` does to 8-bit images). For models trained on inverted data (white
    digits on black where the files are black on white), and the diagnosis of a data set whose
    files were inverted. Integer data only, before the cast: float data has no maximum."""

    op: ClassVar[str] = "invert"
    cheap: ClassVar[bool] = True

    def transition(self, state: State) -> State:
        if state.dtype not in ("uint8", "uint16"):
            raise Invalid(
                "",
                f"invert works on uint8 or uint16 data (max − x), not {state.dtype}: put it "
                "before the cast",
            )
        return state

    def apply(self, t: Tensor) -> Tensor:
        top = np.iinfo(t.array.dtype).max
        return Tensor(np.asarray(top - t.array, t.array.dtype), t.order, t.layout)


# The constants most models are trained with, on 0..1 values: torchvision's ImageNet mean and
# std, and pytorch/examples mnist/main.py's Normalize((0.1307,), (0.3081,)).
IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
MNIST_MEAN, MNIST_STD = (0.1307,), (0.3081,)


@register_step
@dataclass(frozen=True)
class Normalize(Step):
    """``(x − mean) / std`` per channel, in the value range the data has at this point.

    On uint8 data this is refused unless ``on_uint8`` reproduces a byte-domain pipeline on purpose:
    ``saturate`` (OpenCV's saturating subtract, then divide) or ``wrap`` (C-style unsigned
    wrap-around, then divide). The result is float32.
    """

    op: ClassVar[str] = "normalize"
    cheap: ClassVar[bool] = True
    mean: tuple[float, ...] = (0.0,)
    std: tuple[float, ...] = (1.0,)
    on_uint8: Literal["error", "saturate", "wrap"] = "error"

    def check(self) -> None:
        for name in ("mean", "std"):
            if not getattr(self, name):
                raise Invalid(name, "give one value, or one per channel")
        if any(s == 0 for s in self.std):
            raise Invalid("std", "must not contain zero")

    def transition(self, state: State) -> State:
        if state.dtype == "uint8" and self.on_uint8 == "error":
            raise Invalid(
                "",
                "normalize receives uint8 data: put 'cast: {dtype: float32}' before "
                "it (convert, then normalise), or set on_uint8 to reproduce byte-domain "
                "arithmetic on purpose",
            )
        if state.dtype in ("int8", "uint16"):
            raise Invalid(
                "",
                f"normalize cannot work on {state.dtype} data: put 'cast: {{dtype: float32}}' "
                "before it",
            )
        for name in ("mean", "std"):
            count = len(getattr(self, name))
            if count not in (1, state.channels):
                # More values than the decode makes channels: most often the decode is what is
                # wrong (mode RGB for a model of colour and alpha, or of N bands).
                decode = (
                    f"; or, if the model takes {count} channels, the decode is what to change "
                    f"(it makes {state.channels}): "
                    + ("mode: RGBA (colour and alpha) or " if count == 4 else "")
                    + f"'mode: bands, channels: {count}'"
                    if count > state.channels
                    else ""
                )
                raise Invalid(
                    name,
                    f"{count} values for {state.channels} channel"
                    f"{'s' * (state.channels != 1)} ({state.order}): give one value, or one "
                    f"per channel{decode}",
                )
        return dataclasses.replace(
            state, dtype="float32" if state.dtype == "uint8" else state.dtype
        )

    def apply(self, t: Tensor) -> Tensor:
        shape = (1, 1, -1) if t.layout == "HWC" else (-1, 1, 1)
        mean = np.asarray(self.mean, np.float32).reshape(shape)
        std = np.asarray(self.std, np.float32).reshape(shape)
        array = t.array
        if array.dtype == np.uint8:
            byte_mean = np.rint(mean).astype(np.int16)
            shifted = array.astype(np.int16) - byte_mean
            array = np.clip(shifted, 0, 255) if self.on_uint8 == "saturate" else shifted % 256
            return Tensor((array.astype(np.float32) / std), t.order, t.layout)
        mean, std = mean.astype(array.dtype), std.astype(array.dtype)
        if t.layout == "HWC" and array.ndim == 3 and array.shape[2] > 1:
            # Over a last axis of 3 channels numpy's inner loop is 3 elements long; over rows of
            # W·C values with the channels' values tiled, the same arithmetic (the same bits)
            # takes a tenth of the time (docs/measurements.md).
            h, w, c = array.shape
            row_mean = np.broadcast_to(mean, (1, w, c)).reshape(w * c)
            row_std = np.broadcast_to(std, (1, w, c)).reshape(w * c)
            rows = np.ascontiguousarray(array).reshape(h, w * c)
            return Tensor(((rows - row_mean) / row_std).reshape(h, w, c), t.order, t.layout)
        out = (array - mean) / std
        return Tensor(out, t.order, t.layout)


@register_step
@dataclass(frozen=True)
class Layout(Step):
    """Per-sample memory layout of the batch: ``NCHW`` (channels first) or ``NHWC``.

    ``method: reshape`` reinterprets the H×W×C buffer as C×H×W without moving data, the bug that
    MLModelScope lists; it exists so that diagnosis can reproduce it, never use it on purpose.
    """

    op: ClassVar[str] = "layout"
    cheap: ClassVar[bool] = True
    order: Literal["NCHW", "NHWC"] = "NCHW"
    method: Literal["transpose", "reshape"] = "transpose"

    def transition(self, state: State) -> State:
        _need_hwc(state, "layout")
        return dataclasses.replace(state, layout="CHW" if self.order == "NCHW" else "HWC")

    def apply(self, t: Tensor) -> Tensor:
        if self.order == "NHWC":
            return t
        h, w, c = t.array.shape
        if self.method == "reshape":
            return Tensor(np.ascontiguousarray(t.array).reshape(c, h, w), t.order, "CHW")
        return Tensor(np.ascontiguousarray(t.array.transpose(2, 0, 1)), t.order, "CHW")


# --- the pipeline -------------------------------------------------------------------------------


# The exception for a registered step that broke its contract: (index, op, message) -> exception.
StepBroken = Callable[[int, str, str], Exception]


def _broken(index: int, op: str, message: str) -> Exception:
    return MlreproError(f"preprocessing step {index} ({op}): {message}")


class Pipeline:
    """An ordered, validated list of steps, ``decode`` first. What a registered step's ``apply``
    returns is checked against its ``transition`` (dtype, channels, layout) before the next step
    sees it, so a broken custom step is never recorded into a golden."""

    def __init__(self, steps: Sequence[Step], broken: StepBroken = _broken) -> None:
        self.steps = list(steps)
        if not self.steps or not isinstance(self.steps[0], Decode):
            raise Invalid((0,), "the first preprocessing step must be 'decode'")
        self.decoder: Decode = self.steps[0]
        self.broken = broken
        self.states: list[State] = []  # each step's output, as its transition declared it
        state = State()
        for index, step in enumerate(self.steps):
            if index > 0 and isinstance(step, Decode):
                raise Invalid((index,), "'decode' can only be the first step")
            try:
                state = step.transition(state)
            except Invalid as exc:
                raise Invalid((index, step.op, *exc.path), exc.message) from None
            except Exception as exc:  # a registered step's rule that failed to say Invalid
                raise Invalid(
                    (index, step.op),
                    f"{type(step).__name__}.transition() failed with {type(exc).__name__}: "
                    f"{exc} (it should raise pytest_mlrepro.Invalid naming the problem)",
                ) from None
            self.states.append(state)
        self.final = state

    def _checked(self, index: int, t: object) -> Tensor:
        """``t`` when it keeps step ``index``'s declared contract (built-in steps are tested)."""
        step = self.steps[index]
        if isinstance(t, Tensor) and is_builtin(type(step)):
            return t
        declared = self.states[index]
        if not isinstance(t, Tensor):
            shown = repr(t) if len(repr(t)) <= 40 else type(t).__name__
            problem = f"{shown}, not a pytest_mlrepro.Tensor"
        elif not isinstance(t.array, np.ndarray):
            problem = f"a Tensor of a {type(t.array).__name__}, not of a numpy array"
        elif t.array.dtype != np.dtype(declared.dtype):
            problem = (
                f"{t.array.dtype} samples, its transition() declared {declared.dtype}: cast "
                "them, or declare what it returns"
            )
        elif (image := channels_last(t.array, declared.layout)) is None or (
            image.shape[2] != declared.channels
        ):
            problem = (
                f"a {'×'.join(map(str, t.array.shape))} array, its transition() declared "
                f"{declared.channels} channel(s) in layout {declared.layout}"
            )
        else:
            return t
        name = f"registered step {step.op!r} ({type(step).__name__}.apply)"
        raise self.broken(index, step.op, f"{name} returned {problem}")

    def __call__(self, data: bytes, sample: str) -> np.ndarray:
        return self.run(self.decode(data, sample), 1, len(self.steps), sample).array

    def decode(self, data: bytes, sample: str) -> Tensor:
        """The decode step; any failure is this sample's, named."""
        try:
            return self.decoder.decode(data, sample)
        except (SampleError, Unavailable):  # a missing backend library skips, it is no bad sample
            raise
        except Exception as exc:  # e.g. cv2.error: still this sample's failure, not the run's
            raise SampleError(sample, f"decode failed: {exc}") from exc

    def run(self, t: Tensor, start: int, stop: int, sample: str) -> Tensor:
        """A pipeline run in parts (a shared prefix, then the rest) computes what one run does."""
        for index in range(start, stop):
            step = self.steps[index]
            try:
                t = step.apply(t)
            except (SampleError, Unavailable):
                raise
            except Exception as exc:  # a step failing on one sample names that sample
                raise SampleError(sample, f"{step.op} failed: {exc}") from exc
            t = self._checked(index, t)
            if t.array.size == 0:  # no pixels left: never passed on as a (black) image
                raise SampleError(
                    sample,
                    f"{step.op} (preprocessing step {index}) produced an empty "
                    f"{'×'.join(map(str, t.array.shape))} image",
                )
        return t

    def trace(self, data: bytes, sample: str) -> list[tuple[str, np.ndarray]]:
        """The output after every step, for diagnosis."""
        t = self.decoder.decode(data, sample)
        out = [(self.decoder.op, t.array)]
        for index, step in enumerate(self.steps[1:], start=1):
            t = self._checked(index, step.apply(t))
            out.append((step.op, t.array))
        return out
