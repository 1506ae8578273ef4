"""The known preprocessing pitfalls (MLModelScope's Table 1, public incidents), each a pure flip
of a manifest's pipeline validated like its own; nothing here runs a model."""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import typing
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, takewhile
from typing import Any, ClassVar, TypeVar, get_args, get_origin

import numpy as np

from .._schema import Invalid, to_plain
from ..manifest import Input, Manifest
from ..pipeline import (
    COLOUR_ORDERS,
    IMAGENET_MEAN,
    IMAGENET_STD,
    MNIST_MEAN,
    MNIST_STD,
    Cast,
    CastDType,
    Color,
    Crop,
    Decode,
    Invert,
    Layout,
    Normalize,
    Pipeline,
    Resize,
    Scale,
    State,
    Step,
    Tensor,
)
from ._step_fingerprints import states

# Categories, in the order a report lists them.
COLOUR = "colour order"
CROP = "crop"
RESIZE = "resize"
DECODER = "decoder"
EXIF = "EXIF orientation"
LAYOUT = "layout"
NORM_ORDER = "normalisation order"
MEAN_STD = "mean/std scale"
INVERTED = "inverted pixels"
GREY = "grey conversion"
DEPTH = "bit depth"
CATEGORIES = (
    COLOUR, CROP, RESIZE, DECODER, EXIF, LAYOUT, NORM_ORDER, MEAN_STD, INVERTED, GREY, DEPTH,
)  # fmt: skip
_BACKEND_NAMES = {"pil": "Pillow", "opencv": "OpenCV", "tf": "TensorFlow"}
_OPENCV_METHODS = {
    "nearest": "INTER_NEAREST",
    "bilinear": "INTER_LINEAR",
    "bicubic": "INTER_CUBIC",
    "area": "INTER_AREA",
    "lanczos": "INTER_LANCZOS4",
}
# The interpolation methods tried on every backend: what real pipelines mix up.
_METHODS = ("nearest", "bilinear", "bicubic", "area", "box")


# What a flip changes: its kind and facts (values as shown), worded in report/ to read after
# "with" (_pitfall_words.py): ("instead", "BGR", "RGB") is "BGR instead of RGB".
Flip = tuple[str, ...]


@dataclass(frozen=True)
class Variant:
    """A pipeline (``steps``) with one pitfall flipped; ``key``: a stable id (``colour:BGR``)."""

    key: str
    pitfall: str
    flip: Flip
    steps: tuple[Step, ...]


def valid_steps(steps: Sequence[Step], inp: Input) -> bool:
    """Whether ``steps`` pass every static check a manifest's pipeline must pass, and end in the
    layout and dtype that ``inp`` declares (what the model takes)."""
    try:
        for step in steps:
            step.check()
        final = Pipeline(steps).final
    except Invalid:
        return False
    want = "CHW" if inp.layout == "NCHW" else "HWC"
    return final.layout == want and final.dtype == inp.dtype


def variants(manifest: Manifest, backends: Collection[str] | None = None) -> list[Variant]:
    """Every valid single-pitfall variant of the pipeline that differs from it, once, in category
    order; ``backends`` narrows the backends tried (TensorFlow's import costs seconds)."""
    steps = tuple(manifest.input.preprocess)
    seen = {steps}
    out: list[Variant] = []
    for generate in _GENERATORS:
        for variant in generate(steps):
            if variant.steps in seen or not valid_steps(variant.steps, manifest.input):
                continue
            if backends is not None and not backends_of(variant.steps) <= set(backends):
                continue
            seen.add(variant.steps)
            out.append(variant)
    return out


LIGHT_BACKENDS = frozenset({"pil", "opencv"})
"""Backends whose import costs little: their flips are always tried. TensorFlow's import alone
costs seconds (and its log noise): its flips are tried only where TensorFlow is in play."""


def backends_in_play(manifest: Manifest, *more: Sequence[Step]) -> set[str]:
    """The backends whose flips are worth their import: the light ones, those the pipelines use,
    and TensorFlow when the model runs on it."""
    backends = set(LIGHT_BACKENDS).union(*map(backends_of, (manifest.input.preprocess, *more)))
    if manifest.framework.name == "tensorflow":
        backends.add("tf")
    return backends


def left_out_backends(backends: Collection[str]) -> dict[str, str]:
    """Installed backends whose flips ``backends`` leaves out: ``{key: readable name}``."""
    return {
        b: _BACKEND_NAMES.get(b, b) for b in sorted(_MODULES) if b not in backends and _available(b)
    }


def backends_of(steps: Sequence[Step]) -> set[str]:
    """The libraries a pipeline's steps run on (``pil``, ``opencv``, ``tf``)."""
    backends = (getattr(s, "backend", None) for s in steps)
    return {b for b in backends if isinstance(b, str)}


def show_value(value: object) -> str:
    """How a manifest value reads where a pitfall flip names it (``crop: {fraction: 0.875}``)."""
    if isinstance(value, dict) and len(value) == 1:
        ((op, params),) = value.items()
        if isinstance(params, dict):
            inner = ", ".join(f"{k}: {show_value(v)}" for k, v in params.items() if v is not None)
            return f"{op}: {{{inner}}}"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return "[" + ", ".join(show_value(v) for v in value) + "]"
    if isinstance(value, str) and len(value) > 24 and all(c in "0123456789abcdef" for c in value):
        return value[:12] + "…"  # a sha256
    return repr(value) if isinstance(value, str) else str(value)


def describe_step(step: Step) -> str:
    """A step as a manifest diff shows it, defaults left out: ``crop: {fraction: 0.875}``."""
    try:
        defaults = to_plain(type(step)())
    except Exception:  # a step without defaults for every field: all of them are shown
        defaults = {}
    plain = to_plain(step).items()
    return show_value({step.op: {k: v for k, v in plain if k == "order" or defaults.get(k) != v}})


# Not a flip of the manifest: tried when the step probes show the channels in another order.
BANDS = "band order"


@dataclass(frozen=True)
class Reorder(Step):
    """The channels taken in ``order``: a band permutation undone (diagnosis only)."""

    op: ClassVar[str] = "reorder"
    cheap: ClassVar[bool] = True
    order: tuple[int, ...] = ()

    def apply(self, t: Tensor) -> Tensor:
        index = list(self.order)
        array = t.array[..., index] if t.layout == "HWC" else t.array[index]
        return Tensor(np.ascontiguousarray(array), t.order, t.layout)


# --- helpers --------------------------------------------------------------------------------


def _replace(steps: tuple[Step, ...], index: int, *new: Step) -> tuple[Step, ...]:
    return (*steps[:index], *new, *steps[index + 1 :])


def _choices(cls: type, name: str) -> tuple[Any, ...]:
    """The values a ``Literal`` field of a step class allows (empty if it is not one)."""
    hint = typing.get_type_hints(cls).get(name)
    arms = (hint, *get_args(hint))  # Literal[...] or Optional[Literal[...]]
    return next((get_args(arm) for arm in arms if get_origin(arm) is typing.Literal), ())


_S = TypeVar("_S", bound=Step)


def _try(step: _S, **changes: Any) -> _S | None:
    """``step`` with ``changes``, or None when the result breaks the step's own rules."""
    try:
        new = dataclasses.replace(step, **changes)
        new.check()
    except (Invalid, TypeError, ValueError):
        return None
    return new


def _valid(step: _S, changes: Iterable[dict[str, Any]]) -> list[_S]:
    """``step`` with each of ``changes``, where the result keeps the step's rules, each once."""
    out: list[_S] = []
    for change in changes:
        new = _try(step, **change)
        if new is not None and new not in out:
            out.append(new)
    return out


def _flips(
    steps: tuple[Step, ...],
    index: int,
    pitfall: str,
    name: str,
    named: Mapping[Any, tuple[str, Flip]],
) -> Iterator[Variant]:
    """``steps[index]`` with its field ``name`` set to each value of ``named`` but its own, where
    the step's rules allow it; ``named[value]``: that flip's key and facts."""
    step = steps[index]
    for value, (key, flip) in named.items():
        new = None if value == getattr(step, name) else _try(step, **{name: value})
        if new is not None:
            yield Variant(key, pitfall, flip, _replace(steps, index, new))


def _indices(steps: Sequence[Step], cls: type[_S]) -> dict[int, _S]:
    return {i: s for i, s in enumerate(steps) if isinstance(s, cls)}


def _where(steps: Sequence[Step], index: int, kind: str) -> str:
    """``resize`` or ``resize[3]`` when a pipeline has several steps of a kind."""
    same = [i for i, s in enumerate(steps) if s.op == steps[index].op]
    return kind if len(same) == 1 else f"{kind}[{index}]"


def _resize_name(step: Resize) -> str:
    backend = _BACKEND_NAMES.get(step.backend, step.backend)
    if step.backend == "opencv":
        return f"{backend} {_OPENCV_METHODS.get(step.method, step.method)}"
    name = f"{backend} {step.method}"
    if step.antialias is not None and step.backend not in ("pil", "opencv"):
        name += " with antialias" if step.antialias else " without antialias"
    return name


# --- colour order ---------------------------------------------------------------------------


def _colour(steps: tuple[Step, ...]) -> Iterator[Variant]:
    colours = _indices(steps, Color)
    index = max(colours, default=0)
    step = steps[index]
    if not isinstance(step, (Color, Decode)):
        return
    final = Pipeline(steps).final.order
    if final not in COLOUR_ORDERS:
        return  # one grey channel or bands: no colour order to flip, nothing it could change
    new_final = ("BGR" if final.startswith("RGB") else "RGB") + final[3:]
    flipped = "BGR" if step.order == "RGB" else "RGB"
    named = {flipped: (f"colour:{new_final}", ("instead", new_final, final))}
    yield from _flips(steps, index, COLOUR, "order", named)


# --- crop -----------------------------------------------------------------------------------


def _crop(steps: tuple[Step, ...]) -> Iterator[Variant]:
    crops = _indices(steps, Crop)
    if not crops:
        # The crop that ImageNet evaluation recipes use, right after decoding.
        added = (steps[0], Crop(fraction=0.875, rounding="google"), *steps[1:])
        yield Variant("crop:add-0.875", CROP, ("crop added", "0.875"), added)
        return
    for index, step in crops.items():
        where = _where(steps, index, "crop")
        yield Variant(f"{where}:none", CROP, ("crop removed",), _replace(steps, index))
        if step.fraction is not None:
            named = {
                f: (f"{where}:{f}", ("crop fraction", str(f), str(step.fraction)))
                for f in (1.0, 0.875)
                if not math.isclose(f, step.fraction)
            }
            yield from _flips(steps, index, CROP, "fraction", named)


# --- resize ---------------------------------------------------------------------------------


def _resize(steps: tuple[Step, ...]) -> Iterator[Variant]:
    for index, step in _indices(steps, Resize).items():
        where = _where(steps, index, "resize")
        # Interpolation method on the same backend.
        methods = [m for m in _METHODS if m != step.method and m in _choices(Resize, "method")]
        candidates = _valid(step, ({"method": m} for m in methods))
        # Another library with the same method (Pillow antialiases when shrinking, OpenCV never:
        # this is the antialias pitfall as well as the backend one).
        mapped = {"box": "area", "area": "box"}.get(step.method, step.method)
        for backend in _choices(Resize, "backend"):
            if backend == step.backend or not _available(backend):
                continue
            for method in dict.fromkeys((step.method, mapped)):
                # The backend's default; and with and without antialias where the backend has
                # a real switch (both values accepted: tf.image.resize).
                change = {"backend": backend, "method": method}
                unique = _valid(step, ({**change, "antialias": v} for v in (True, False)))
                if len(unique) < 2:  # no real switch: the backend's default
                    unique = _valid(step, [{**change, "antialias": None}])
                candidates += unique
                if unique:
                    break
        # An explicit antialias switch, where the backend has one (tf.image.resize).
        if step.antialias is not None:
            candidates += _valid(step, [{"antialias": not step.antialias}])
        alpha = isinstance(steps[0], Decode) and steps[0].mode == "RGBA"
        for new in candidates:
            yield Variant(
                f"{where}:{new.backend}-{new.method}"
                + ("" if new.antialias is None else f"-aa{int(new.antialias)}"),
                RESIZE,
                ("resize", _resize_name(new), _resize_name(step), _premultiplied(step, new, alpha)),
                _replace(steps, index, new),
            )


def _premultiplied(was: Resize, now: Resize, alpha: bool) -> str:
    """On RGBA, a flip between Pillow (it filters premultiplied by alpha) and another library:
    that library's name ("" otherwise), for report/ to say why the flip matters."""
    if not alpha or "pil" not in (was.backend, now.backend) or was.backend == now.backend:
        return ""
    other = now.backend if was.backend == "pil" else was.backend
    return _BACKEND_NAMES.get(other, other)


# --- decoder and EXIF -----------------------------------------------------------------------


def _decoder(steps: tuple[Step, ...]) -> Iterator[Variant]:
    step = steps[0]
    if not isinstance(step, Decode):
        return
    current = _BACKEND_NAMES.get(step.backend, step.backend)
    dct_values = [d for d in _choices(type(step), "dct_method") if d is not None]
    current_dct = step.dct_method
    if current_dct:
        current += f" ({current_dct})"
    for backend in _choices(type(step), "backend"):
        if backend == step.backend or not _available(backend):
            continue
        if "numpy" in (backend, step.backend):
            # A .npy array has one reader and an image file none in numpy: a flip between them
            # cannot apply to the data, it could only fail on every file.
            continue
        name = _BACKEND_NAMES.get(backend, backend)
        # A decoder with a DCT method (tf.io.decode_jpeg): each method is its own decoder.
        for new in _valid(
            step, ({"backend": backend, "dct_method": d} for d in (None, *dct_values))
        ):
            dct = new.dct_method
            yield Variant(
                f"decode:{backend}" + (f"-{dct}" if dct else ""),
                DECODER,
                ("decoder", name, dct or "", current),
                _replace(steps, 0, new),
            )
    if current_dct is not None:
        named = {d: (f"decode:dct-{d}", ("dct", d, current_dct)) for d in dct_values}
        yield from _flips(steps, 0, DECODER, "dct_method", named)


_MODULES = {"opencv": "cv2", "tf": "tensorflow"}


def _available(backend: str) -> bool:
    """Whether a backend's library is installed: a flip that cannot run here is not offered."""
    module = _MODULES.get(backend)
    return module is None or importlib.util.find_spec(module) is not None


def _exif(steps: tuple[Step, ...]) -> Iterator[Variant]:
    if isinstance(steps[0], Decode):
        named = {
            True: ("exif:on", ("exif on",)),
            False: ("exif:off", ("exif off",)),
        }
        yield from _flips(steps, 0, EXIF, "exif_orientation", named)


# --- layout ---------------------------------------------------------------------------------


def _layout(steps: tuple[Step, ...]) -> Iterator[Variant]:
    named = {
        "reshape": ("layout:reshape", ("reshape",)),
        "transpose": ("layout:transpose", ("transpose",)),
    }
    for index, step in _indices(steps, Layout).items():
        if step.order == "NCHW":  # NHWC keeps the buffer as it is: there is nothing to reshape
            yield from _flips(steps, index, LAYOUT, "method", named)


# --- normalisation: order and mean/std scale ------------------------------------------------


@dataclass(frozen=True)
class _ValueStage:
    """``steps[start:end]`` turn bytes ``u`` into ``(u − mean) / std`` (per channel, in byte
    units): a cast to float, scales, an optional normalize, or a normalize on uint8 data."""

    start: int
    end: int
    dtype: CastDType  # the float type of the cast
    mean: tuple[float, ...]  # in byte units
    std: tuple[float, ...]
    byte_domain: str | None  # 'saturate' | 'wrap' when normalised on uint8 before the cast
    divisor: float = 1.0  # the scale steps' product: the declared constants are mean/divisor


def _value_stage(steps: tuple[Step, ...]) -> _ValueStage | None:
    dtypes = [s.dtype for s in (State(), *states(steps))]  # the dtype going into each step
    # The first step that leaves uint8 starts the value stage.
    leaving = (
        i for i, s in enumerate(steps) if dtypes[i] == "uint8" and isinstance(s, (Cast, Normalize))
    )
    start = next(leaving, None)
    if start is None:
        return None
    first, rest = steps[start], steps[start + 1 :]
    if isinstance(first, Normalize):
        cast = rest[0] if rest and isinstance(rest[0], Cast) else None
        dtype: CastDType = "float32" if cast is None else cast.dtype
        if first.on_uint8 == "error" or not dtype.startswith("float"):
            return None
        end = start + (2 if cast else 1)
        return _ValueStage(start, end, dtype, first.mean, first.std, first.on_uint8, 1.0)
    assert isinstance(first, Cast)
    if not first.dtype.startswith("float"):
        return None
    scales = [s for s in takewhile(lambda s: isinstance(s, Scale), rest) if isinstance(s, Scale)]
    divisor = math.prod((s.divisor for s in scales), start=1.0)
    end = start + 1 + len(scales)
    norm = steps[end] if end < len(steps) else None
    if not isinstance(norm, Normalize):
        return _ValueStage(start, end, first.dtype, (0.0,), (divisor,), None, divisor)
    mean = tuple(m * divisor for m in norm.mean)
    std = tuple(s * divisor for s in norm.std)
    return _ValueStage(start, end + 1, first.dtype, mean, std, None, divisor)


def _affine(mean: Sequence[float], std: Sequence[float]) -> tuple[tuple[float, ...], ...]:
    """(scale, offset) per channel of ``(u − mean) / std`` on bytes ``u``, for comparisons."""
    mean3 = tuple(mean) * 3 if len(mean) == 1 else tuple(mean)
    std3 = tuple(std) * 3 if len(std) == 1 else tuple(std)
    return tuple((1.0 / s, -m / s) for m, s in zip(mean3, std3))


def _same_affine(a: tuple[tuple[float, ...], ...], b: tuple[tuple[float, ...], ...]) -> bool:
    pairs = zip(chain(*a), chain(*b))
    return all(math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-9) for x, y in pairs)


def _fmt_affine(mean: Sequence[float], std: Sequence[float], divisor: float = 1.0) -> str:
    """``(x − 127) / 128`` or ``(x/255 − [0.485, ...]) / [0.229, ...]``."""

    def nums(values: Sequence[float]) -> str:
        shown = [f"{v / divisor:.4g}" for v in values]
        return shown[0] if len(set(shown)) == 1 else "[" + ", ".join(shown) + "]"

    x = "x" if divisor == 1.0 else f"x/{divisor:g}"
    if all(m == 0 for m in mean):
        return x if all(s == divisor for s in std) else f"{x} / {nums(std)}"
    return f"({x} − {nums(mean)}) / {nums(std)}"


def _describe_stage(stage: _ValueStage) -> str:
    if stage.byte_domain:
        return f"{_fmt_affine(stage.mean, stage.std)} on uint8 ({stage.byte_domain})"
    if all(m == 0 for m in stage.mean) and len(set(stage.std)) == 1:
        return "x (0..255)" if stage.std[0] == 1 else f"x/{stage.std[0]:g}"
    return _fmt_affine(stage.mean, stage.std, stage.divisor)


def _normalisation(steps: tuple[Step, ...]) -> Iterator[Variant]:
    stage = _value_stage(steps)
    if stage is None:
        return
    head, tail = steps[: stage.start], steps[stage.end :]
    cast = Cast(dtype=stage.dtype)
    current = _affine(stage.mean, stage.std)
    declared = _describe_stage(stage)
    has_mean = any(m != 0 for m in stage.mean)

    def variant(key: str, pitfall: str, flip: Flip, middle: Sequence[Step]) -> Variant:
        return Variant(key, pitfall, flip, (*head, *middle, *tail))

    # Normalisation order: in bytes before the cast (OpenCV's saturating subtract, or C's
    # unsigned wrap-around), or in float after it.
    if has_mean:
        for mode in ("saturate", "wrap"):
            if stage.byte_domain == mode:
                continue
            yield variant(
                f"normalize:uint8-{mode}",
                NORM_ORDER,
                ("uint8 first", mode, stage.byte_domain or ""),
                [Normalize(mean=stage.mean, std=stage.std, on_uint8=mode), cast],
            )
        if stage.byte_domain is not None:
            yield variant(
                "normalize:float",
                NORM_ORDER,
                ("float after", stage.byte_domain),
                [cast, Normalize(mean=stage.mean, std=stage.std)],
            )
    # Mean/std scale: other conventions in place of the declared one, each skipped when it is
    # the declared one. Each: (key, its constants shown or "", divisor, mean, std), the constants
    # in the units the data has after the divisor (None: no normalize step).
    Convention = tuple[str, str, float, tuple[float, ...] | None, tuple[float, ...] | None]
    conventions: list[Convention] = [
        ("imagenet", "", 255.0, IMAGENET_MEAN, IMAGENET_STD),
        ("x255", "", 255.0, None, None),
        ("tf", "", 1.0, (127.5,), (127.5,)),
    ]
    if Pipeline(steps).final.channels == 1:
        conventions.append(("mnist", "", 255.0, MNIST_MEAN, MNIST_STD))
    if has_mean and stage.byte_domain is None:
        # The declared constants in the wrong units: a /255 dropped (0..1 constants on 0..255
        # data) or added (0..255 constants on 0..1 data).
        declared_mean = tuple(m / stage.divisor for m in stage.mean)
        declared_std = tuple(s / stage.divisor for s in stage.std)
        if stage.divisor == 255.0:
            desc = _fmt_affine(declared_mean, declared_std)
            conventions.append(("units-no-255", desc, 1.0, declared_mean, declared_std))
        elif stage.divisor == 1.0:
            big = (tuple(m * 255 for m in stage.mean), tuple(s * 255 for s in stage.std))
            desc = _fmt_affine(*big, 255.0)
            conventions.append(("units-extra-255", desc, 255.0, stage.mean, stage.std))
    for key, desc, divisor, mean, std in conventions:
        scale = [Scale(divisor=divisor)] if divisor != 1.0 else []
        norm = [Normalize(mean=mean, std=std)] if mean is not None and std is not None else []
        middle = [cast, *scale, *norm]
        # In byte units, to compare with the declared stage.
        in_bytes = [m * divisor for m in mean or (0.0,)], [s * divisor for s in std or (1.0,)]
        if _same_affine(_affine(*in_bytes), current) and stage.byte_domain is None:
            continue
        yield variant(f"normalize:{key}", MEAN_STD, ("mean/std", key, desc, declared), middle)


# --- grey and deep images: inversion, the grey conversion, the bit depth ---------------------


_GREY_RULES = ("luma", "red", "green", "blue")


def _inverted(steps: tuple[Step, ...]) -> Iterator[Variant]:
    """An ``invert`` added after a grey integer decode, or the pipeline's own removed."""
    inverts = _indices(steps, Invert)
    if inverts:
        for index in inverts:
            key = f"{_where(steps, index, 'invert')}:none"
            yield Variant(key, INVERTED, ("invert removed",), _replace(steps, index))
        return
    decoded = Pipeline(steps[:1]).final
    if decoded.dtype not in ("uint8", "uint16") or decoded.channels != 1:
        return  # a grey pitfall: negatives are a grey data set's (digits, scans, X-rays)
    top = 255 if decoded.dtype == "uint8" else 65535
    yield Variant(
        "invert:add", INVERTED, ("invert added", str(top)), (steps[0], Invert(), *steps[1:])
    )


def _grey(steps: tuple[Step, ...]) -> Iterator[Variant]:
    """ITU-R 601-2 luma or one channel of it (the weights mixed up, a channel taken for grey)."""
    step = steps[0]
    if isinstance(step, Decode) and step.mode in ("L", "L16") and step.convert is not None:
        named = {r: (f"grey:{r}", ("grey", r, step.convert)) for r in _GREY_RULES}
        yield from _flips(steps, 0, GREY, "convert", named)


def _depth(steps: tuple[Step, ...]) -> Iterator[Variant]:
    """A 16-bit image read as 8-bit (high byte): its values 256 times smaller than expected."""
    step = steps[0]
    if not isinstance(step, Decode) or step.mode not in ("L16", "RGB16"):
        return
    mode = step.mode.removesuffix("16")
    new = _try(step, mode=mode, convert=step.convert if mode == "L" else None)
    if new is not None:
        yield Variant(f"depth:{mode}", DEPTH, ("depth", mode, step.mode), _replace(steps, 0, new))


_GENERATORS: tuple[Callable[[tuple[Step, ...]], Iterator[Variant]], ...] = (
    _colour,
    _crop,
    _resize,
    _decoder,
    _exif,
    _layout,
    _normalisation,
    _inverted,
    _grey,
    _depth,
)


# The category of a manifest edit: by (op, field) first, then by the op alone.
_CATEGORY_OF_FIELD = {
    ("decode", "order"): COLOUR,
    ("decode", "exif_orientation"): EXIF,
    ("decode", "convert"): GREY,
    ("decode", "mode"): DEPTH,
    ("normalize", "on_uint8"): NORM_ORDER,
}
_CATEGORY_OF_OP = {
    "color": COLOUR,
    "invert": INVERTED,
    "decode": DECODER,
    "crop": CROP,
    "resize": RESIZE,
    "layout": LAYOUT,
    "cast": MEAN_STD,
    "scale": MEAN_STD,
    "normalize": MEAN_STD,
}


def category_of_change(op: str, field: str | None) -> str | None:
    """The pitfall category a manifest edit of ``op``'s ``field`` (None: the whole step) is."""
    return _CATEGORY_OF_FIELD.get((op, field or ""), _CATEGORY_OF_OP.get(op))
