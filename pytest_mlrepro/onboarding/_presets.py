"""Preprocessing presets: reference implementations' evaluation recipes, exact for the sizes each
accepts and citing its source; the table: docs/onboarding.md, section 2."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from importlib import resources
from typing import Literal

import yaml

from ..errors import MlreproError
from ..pipeline import IMAGENET_MEAN, IMAGENET_STD, MNIST_MEAN, MNIST_STD

# A step as it is written in a manifest: {op: {parameter: value}}.
StepText = dict[str, dict[str, object]]

# keras/src/applications/imagenet_utils.py, _preprocess_numpy_input(mode="caffe"): the mean
# pixel, BGR, that the VGG and ResNet Caffe ports subtract.
KERAS_CAFFE_MEAN_BGR = (103.939, 116.779, 123.68)
# BVLC/caffe python/caffe/imagenet/ilsvrc_2012_mean.npy averaged over its pixels, BGR (as
# examples/00-classification.ipynb prints it): what python/caffe/classify.py subtracts.
ILSVRC_MEAN_BGR = (104.0069879317889, 116.66876761696767, 122.6789143406786)
# tensorflow/tpu models/official/efficientnet/preprocessing.py (at the release of the Lite
# checkpoints, 2020-03, commit f1a5906): CROP_PADDING = 32.
GOOGLE_CROP_PADDING = 32
# tensorflow/tpu .../lite/efficientnet_lite_builder.py, efficientnet_lite_params: the variants'
# resolutions.
LITE_SIZES = {0: 224, 1: 240, 2: 260, 3: 280, 4: 300}
# timm/data/constants.py DEFAULT_CROP_PCT.
TIMM_CROP_PCT = 0.875
# The CIFAR training sets' per-channel mean and std over every pixel, on 0..1 values: for
# CIFAR-10, torchvision/datasets/cifar.py CIFAR10(train=True).data (N×32×32×3 uint8)
# .mean(axis=(0, 1, 2)) / 255, likewise .std (kuangliu/pytorch-cifar issue #19: its main.py's
# std (0.2023, 0.1994, 0.2010) is another statistic; a model trained with it needs those values
# written in its manifest); for CIFAR-100, weiaicunzai/pytorch-cifar100
# conf/global_settings.py CIFAR100_TRAIN_MEAN, CIFAR100_TRAIN_STD.
CIFAR10_MEAN, CIFAR10_STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
CIFAR100_MEAN = (0.5070751592371323, 0.48654887331495095, 0.4409178433670343)
CIFAR100_STD = (0.2673342858792401, 0.2564384629170883, 0.27615047132568404)


class PresetSizeError(MlreproError):
    """A preset asked for a size its source does not define."""


@dataclass(frozen=True)
class Values:
    """A cast to float32, then ``scale`` and ``normalize``, each left out where None."""

    label: str
    divisor: float | None
    mean: tuple[float, ...] | None
    std: tuple[float, ...] | None


@dataclass(frozen=True)
class Geometry:
    """How the image becomes S×S: centre square of ``fraction`` then resize; plain resize; shorter
    side to ``scale`` (or S / ``fraction``) then centre crop; or ``scale``² then centre crop."""

    kind: Literal["crop_then_resize", "resize", "resize_then_crop", "squash_then_crop"]
    fraction: float = 0.875
    method: Literal["nearest", "bilinear", "bicubic"] = "bilinear"
    rounding: Literal["google", "tf"] = "google"
    scale: int | None = None

    @property
    def label(self) -> str:
        if self.kind == "resize":
            return f"resize {self.method}"
        if self.kind == "crop_then_resize":
            return f"crop {self.fraction:.6g} ({self.rounding}), resize {self.method}"
        if self.kind == "squash_then_crop":
            return f"resize {self.scale}×{self.scale} {self.method}, crop"
        if self.scale is not None:
            return f"resize shorter {self.scale} {self.method}, crop"
        return f"resize shorter /{self.fraction:g} {self.method}, crop"


Rule = Literal["crop_padding", "central_crop", "resize", "shorter_side", "squash"]


@dataclass(frozen=True)
class Preset:
    """A reference recipe: ``rule`` gives its geometry at size S, only for ``sizes`` (None: any)."""

    name: str
    order: Literal["RGB", "BGR", "L"]  # L: grey, one channel (decode mode L, by luma)
    rule: Rule
    method: Literal["nearest", "bilinear", "bicubic"]
    values: Values
    source: str
    sizes: tuple[int, ...] | None = None
    resize_to: int | None = None  # the fixed resize of "shorter_side" / "squash", if any

    def accepts(self, size: int) -> bool:
        return self.sizes is None or size in self.sizes

    @property
    def channels(self) -> int:
        return 1 if self.order == "L" else 3

    def geometry(self, height: int, width: int) -> Geometry:
        if height != width:
            raise PresetSizeError(
                f"preset {self.name!r} is defined for square inputs; the model takes "
                f"{height}×{width}: write the geometry in the manifest"
            )
        size = height
        if self.sizes is not None and size not in self.sizes:
            raise PresetSizeError(
                f"preset {self.name!r} is defined for size{'s' * (len(self.sizes) > 1)} "
                f"{', '.join(map(str, self.sizes))} only ({self.source.split(':')[0]}); the "
                f"model takes {size}×{size}: {_other_presets(self, size)}"
            )
        if self.rule == "crop_padding":
            # preprocessing.py _decode_and_center_crop: int(S / (S + 32) * shorter side),
            # offset (dim - crop + 1) // 2: the crop op's "google" rounding.
            fraction = size / (size + GOOGLE_CROP_PADDING)
            return Geometry("crop_then_resize", fraction, self.method, "google")
        if self.rule == "central_crop":
            return Geometry("crop_then_resize", 0.875, self.method, "tf")
        if self.rule == "resize":
            return Geometry("resize", method=self.method)
        if self.rule == "squash":
            assert self.resize_to is not None
            return Geometry("squash_then_crop", method=self.method, scale=self.resize_to)
        # timm transforms_imagenet_eval: scale_size = math.floor(img_size / crop_pct).
        scale = self.resize_to or math.floor(size / TIMM_CROP_PCT)
        return Geometry("resize_then_crop", method=self.method, scale=scale)


def _other_presets(preset: Preset, size: int) -> str:
    fitting = [
        p.name
        for p in PRESETS.values()
        if p.values == preset.values and p.order == preset.order and p.accepts(size)
    ]
    if fitting:
        return f"preset {', '.join(repr(f) for f in fitting)} fits that size"
    return "write the recipe in the manifest, or use --discover"


MINUS_ONE_ONE = Values("(x - 127.5) / 127.5", None, (127.5,) * 3, (127.5,) * 3)
LITE = Values("(x - 127) / 128", None, (127.0,) * 3, (128.0,) * 3)
IMAGENET = Values("/255, ImageNet mean/std", 255.0, IMAGENET_MEAN, IMAGENET_STD)
CAFFE = Values("x - Caffe BGR mean", None, KERAS_CAFFE_MEAN_BGR, (1.0,) * 3)
ILSVRC = Values("x - ILSVRC-2012 BGR mean pixel", None, ILSVRC_MEAN_BGR, (1.0,) * 3)
ZERO_ONE = Values("/255", 255.0, None, None)
RAW = Values("0..255 as float", None, None, None)
MNIST = Values("/255, (x - 0.1307) / 0.3081", 255.0, MNIST_MEAN, MNIST_STD)
CIFAR10 = Values("/255, CIFAR-10 mean/std", 255.0, CIFAR10_MEAN, CIFAR10_STD)
CIFAR100 = Values("/255, CIFAR-100 mean/std", 255.0, CIFAR100_MEAN, CIFAR100_STD)

NAMED_VALUES = {
    "minus-one-one": MINUS_ONE_ONE,
    "lite": LITE,
    "imagenet": IMAGENET,
    "caffe": CAFFE,
    "ilsvrc": ILSVRC,
    "zero-one": ZERO_ONE,
    "raw": RAW,
    "mnist": MNIST,
    "cifar10": CIFAR10,
    "cifar100": CIFAR100,
}


def _load_presets() -> dict[str, Preset]:
    """presets.yaml, each efficientnet-lite variant first at its own size."""
    text = resources.files(__package__).joinpath("presets.yaml").read_text(encoding="utf-8")
    listed = []
    for name, row in yaml.safe_load(text).items():
        values, sizes = NAMED_VALUES[row.pop("values")], row.pop("sizes", None)
        listed.append(Preset(name, values=values, sizes=sizes and tuple(sizes), **row))
    lite = listed[0]
    variants = [
        dataclasses.replace(
            lite,
            name=f"{lite.name}{variant}",
            source=f"{lite.source}; efficientnet_lite_params: efficientnet-lite{variant} at {size}",
            sizes=(size,),
        )
        for variant, size in LITE_SIZES.items()
    ]
    return {p.name: p for p in (*variants, *listed)}


PRESETS = _load_presets()


def geometry_steps(geometry: Geometry, height: int, width: int) -> list[StepText]:
    how = {"method": geometry.method, "backend": "pil"}
    resize: StepText = {"resize": {"size": [height, width], **how}}
    if geometry.kind == "resize":
        return [resize]
    if geometry.kind == "crop_then_resize":
        return [{"crop": {"fraction": geometry.fraction, "rounding": geometry.rounding}}, resize]
    centre: StepText = {"crop": {"size": [height, width], "rounding": "torchvision"}}
    if geometry.kind == "squash_then_crop":
        assert geometry.scale is not None
        return [{"resize": {"size": [geometry.scale] * 2, **how}}, centre]
    shorter = geometry.scale or int(round(min(height, width) / geometry.fraction))
    return [{"resize": {"shorter_side": shorter, **how}}, centre]


def value_steps(values: Values, dtype: str) -> list[StepText]:
    """The cast, scale and normalize steps; none for a model that takes raw bytes."""
    if dtype in ("uint8", "int8"):
        return [] if dtype == "uint8" else [{"cast": {"dtype": "int8"}}]
    steps: list[StepText] = [{"cast": {"dtype": "float32"}}]
    if values.divisor is not None:
        steps.append({"scale": {"divisor": values.divisor}})
    if values.mean is not None and values.std is not None:
        mean, std = list(map(float, values.mean)), list(map(float, values.std))
        steps.append({"normalize": {"mean": mean, "std": std}})
    if dtype == "float16":
        steps.append({"cast": {"dtype": "float16"}})
    return steps


# What a recipe's decode makes, by its ``order``: colour (RGB, BGR), colour and alpha (RGBA,
# BGRA), or grey (L: ITU-R 601-2 luma, as Pillow's convert("L") computes it; L-red, L-green,
# L-blue: one channel of the colour image).
GREY_CONVERT = {"L": "luma", "L-red": "red", "L-green": "green", "L-blue": "blue"}


@dataclass(frozen=True)
class Bands:
    """How a multi-band data set decodes: a multi-page TIFF (``pil``) or ``.npy`` arrays."""

    channels: int
    dtype: str
    backend: Literal["pil", "numpy"]
    axes: Literal["HWC", "CHW"] = "HWC"


def decode_steps(
    order: str, inverted: bool = False, bands: Bands | None = None, opaque: bool = False
) -> list[StepText]:
    """The decode step of a recipe in ``order``, then ``invert`` when ``inverted`` (white
    digits on black); ``opaque``: RGBA of files without alpha, declared."""
    decode: dict[str, object] = {"backend": "pil"}
    if order in GREY_CONVERT:
        decode.update(mode="L", convert=GREY_CONVERT[order])
    elif order == "L16":
        decode.update(mode="L16", convert="luma")
    elif order == "bands":
        if bands is None:
            raise ValueError("a bands decode needs its band count and dtype")
        decode.update(backend=bands.backend, mode="bands", channels=bands.channels,
                      dtype=bands.dtype)  # fmt: skip
        if bands.axes == "CHW":
            decode["axes"] = "CHW"
    elif order in ("RGBA", "BGRA"):
        decode.update(mode="RGBA", order=order[:3])
        if opaque:
            decode["alpha"] = "add-opaque"
    else:
        decode.update(order=order)
    if decode["backend"] != "numpy":
        decode["exif_orientation"] = False
    invert: list[StepText] = [{"invert": {}}] if inverted else []
    return [{"decode": decode}, *invert]


@dataclass(frozen=True)
class Candidate:
    """A recipe (a preset's, discovery's, or init's provisional one)."""

    order: str  # RGB, BGR, RGBA, BGRA, L16, bands, or a key of GREY_CONVERT
    geometry: Geometry
    values: Values
    inverted: bool = False  # 255 − x right after decoding (white digits on black, negatives)
    bands: Bands | None = None  # order "bands": how the files decode
    opaque: bool = False  # RGBA of files without alpha: an opaque one added, declared

    @property
    def label(self) -> str:
        grey = GREY_CONVERT.get(self.order)
        shown = f"L ({grey})" if grey else self.order
        if self.order == "L16":
            shown = "L16 (16-bit grey)"
        elif self.bands is not None:
            axes = ", C×H×W" if self.bands.axes == "CHW" else ""
            shown = f"{self.bands.channels} bands of {self.bands.dtype}{axes}"
        inverted = ", inverted (255 − x)" if self.inverted else ""
        return f"{shown}{inverted}, {self.geometry.label}, {self.values.label}"

    def steps(self, height: int, width: int, layout: str, dtype: str) -> list[StepText]:
        """Every step, written out in full (no default left implicit)."""
        return [
            *decode_steps(self.order, self.inverted, self.bands, self.opaque),
            *geometry_steps(self.geometry, height, width),
            *value_steps(self.values, dtype),
            {"layout": {"order": layout}},
        ]


def preset_steps(
    preset: Preset, height: int, width: int, layout: str, dtype: str
) -> list[StepText]:
    """``preset`` at ``height`` × ``width``; :class:`PresetSizeError` where it is undefined."""
    candidate = Candidate(preset.order, preset.geometry(height, width), preset.values)
    return candidate.steps(height, width, layout, dtype)
