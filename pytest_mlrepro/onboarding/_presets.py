"""Preprocessing presets: the conventions found in the wild, each with its source.

A preset is only a starting point: ``mlrepro init`` writes it out step by step in the manifest
(the manifest stays the single, explicit truth), adapted to the model's resolution and layout.
Values are written as the ``pipeline/_steps.py`` ops compute them: ``(x - mean) / std`` per
channel in the value range the data has at that point.

=================  =================================================================  ==========
preset             recipe (S = the model's resolution)                                source
=================  =================================================================  ==========
inception          RGB, central crop 0.875, resize S×S bilinear, (x − 127.5) / 127.5   TF-slim
efficientnet-lite  RGB, centre crop 0.875, resize S×S bilinear, (x − 127) / 128        Google
torchvision        RGB, resize shorter side S/0.875 (256), centre crop S, /255,       torchvision
                   ImageNet mean/std
caffe              BGR, resize shorter side S/0.875, centre crop S, x − [103.939,       Caffe
                   116.779, 123.68] (B, G, R), no scaling
keras-caffe        BGR, resize S×S nearest (load_img), x − [103.939, 116.779, 123.68]  Keras
keras-tf           RGB, resize S×S nearest (load_img), x / 127.5 − 1                   Keras
keras-torch        RGB, resize S×S nearest (load_img), /255, ImageNet mean/std          Keras
=================  =================================================================  ==========

What a preset cannot capture: the original TF-slim and Google pipelines resize with
``tf.image.resize`` (no antialias); the presets use Pillow (antialiased when shrinking), as the
project's example manifest does; a manifest that must match TensorFlow's pixels uses
``backend: tf`` (see docs/tensorflow.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# A step as it is written in a manifest: {op: {parameter: value}}.
StepText = dict[str, dict[str, object]]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
CAFFE_MEAN_BGR = (103.939, 116.779, 123.68)


@dataclass(frozen=True)
class Values:
    """The value transform: a cast to float32, an optional ``scale`` (divide), then an
    optional ``normalize``; ``None`` leaves a step out."""

    label: str
    divisor: float | None
    mean: tuple[float, ...] | None
    std: tuple[float, ...] | None


@dataclass(frozen=True)
class Geometry:
    """How the image becomes S×S: ``crop_fraction`` then resize to S×S (``crop_then_resize``),
    a plain resize to S×S (``resize``), or a resize of the shorter side to ``S / fraction`` then
    a centre crop of S (``resize_then_crop``)."""

    kind: Literal["crop_then_resize", "resize", "resize_then_crop"]
    fraction: float = 0.875
    method: Literal["nearest", "bilinear", "bicubic"] = "bilinear"
    rounding: Literal["google", "tf"] = "google"

    @property
    def label(self) -> str:
        if self.kind == "resize":
            return f"resize {self.method}"
        if self.kind == "crop_then_resize":
            return f"crop {self.fraction:g} ({self.rounding}), resize {self.method}"
        return f"resize shorter /{self.fraction:g} {self.method}, crop"


@dataclass(frozen=True)
class Preset:
    name: str
    order: Literal["RGB", "BGR"]
    geometry: Geometry
    values: Values
    source: str

    def describe(self) -> str:
        return f"{self.order}, {self.geometry.label}, {self.values.label}"


MINUS_ONE_ONE = Values("(x - 127.5) / 127.5", None, (127.5,) * 3, (127.5,) * 3)
LITE = Values("(x - 127) / 128", None, (127.0,) * 3, (128.0,) * 3)
IMAGENET = Values("/255, ImageNet mean/std", 255.0, IMAGENET_MEAN, IMAGENET_STD)
CAFFE = Values("x - Caffe BGR mean", None, CAFFE_MEAN_BGR, (1.0,) * 3)
ZERO_ONE = Values("/255", 255.0, None, None)
RAW = Values("0..255 as float", None, None, None)

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset(
            "inception",
            "RGB",
            Geometry("crop_then_resize", 0.875, "bilinear", "tf"),
            MINUS_ONE_ONE,
            "TF-slim preprocessing/inception_preprocessing.py (preprocess_for_eval: "
            "central_crop 0.875, bilinear resize, (x - 0.5) * 2 on 0..1 values)",
        ),
        Preset(
            "efficientnet-lite",
            "RGB",
            Geometry("crop_then_resize", 0.875, "bilinear", "google"),
            LITE,
            "tensorflow/tpu models/official/efficientnet/lite (MEAN_RGB 127.0, STDDEV_RGB "
            "128.0; eval crop padding 32 at 224 = 0.875), as manifests/efficientnet_lite0_onnx",
        ),
        Preset(
            "torchvision",
            "RGB",
            Geometry("resize_then_crop", 0.875, "bilinear"),
            IMAGENET,
            "torchvision references/classification (Resize(256), CenterCrop(224), ToTensor, "
            "Normalize(ImageNet mean, std))",
        ),
        Preset(
            "caffe",
            "BGR",
            Geometry("resize_then_crop", 0.875, "bilinear"),
            CAFFE,
            "Caffe ImageNet models (BGR, per-channel mean subtraction, no scaling; "
            "mean values as Keras imagenet_utils uses them)",
        ),
        Preset(
            "keras-caffe",
            "BGR",
            Geometry("resize", method="nearest"),
            CAFFE,
            "keras.applications imagenet_utils.preprocess_input(mode='caffe') after "
            "keras.utils.load_img(target_size=(S, S)) (nearest by default)",
        ),
        Preset(
            "keras-tf",
            "RGB",
            Geometry("resize", method="nearest"),
            MINUS_ONE_ONE,
            "keras.applications imagenet_utils.preprocess_input(mode='tf'): x / 127.5 - 1",
        ),
        Preset(
            "keras-torch",
            "RGB",
            Geometry("resize", method="nearest"),
            IMAGENET,
            "keras.applications imagenet_utils.preprocess_input(mode='torch'): /255, "
            "ImageNet mean/std",
        ),
    )
}


def _floats(values: tuple[float, ...]) -> list[float]:
    return [float(v) for v in values]


def geometry_steps(geometry: Geometry, height: int, width: int) -> list[StepText]:
    """The crop and resize steps that give a ``height`` × ``width`` image."""
    method = geometry.method
    resize: dict[str, object] = {"size": [height, width], "method": method, "backend": "pil"}
    if geometry.kind == "resize":
        return [{"resize": resize}]
    if geometry.kind == "crop_then_resize":
        crop: dict[str, object] = {"fraction": geometry.fraction, "rounding": geometry.rounding}
        return [{"crop": crop}, {"resize": resize}]
    shorter = int(round(min(height, width) / geometry.fraction))
    return [
        {"resize": {"shorter_side": shorter, "method": method, "backend": "pil"}},
        {"crop": {"size": [height, width], "rounding": "torchvision"}},
    ]


def value_steps(values: Values, dtype: str) -> list[StepText]:
    """The cast, scale and normalize steps; none for a model that takes raw bytes."""
    if dtype in ("uint8", "int8"):
        return [] if dtype == "uint8" else [{"cast": {"dtype": "int8"}}]
    steps: list[StepText] = [{"cast": {"dtype": "float32"}}]
    if values.divisor is not None:
        steps.append({"scale": {"divisor": values.divisor}})
    if values.mean is not None and values.std is not None:
        steps.append({"normalize": {"mean": _floats(values.mean), "std": _floats(values.std)}})
    if dtype == "float16":
        steps.append({"cast": {"dtype": "float16"}})
    return steps


def recipe_steps(
    order: str, geometry: Geometry, values: Values, height: int, width: int, layout: str,
    dtype: str,
) -> list[StepText]:  # fmt: skip
    """Every step of a recipe, written out in full (no default left implicit)."""
    return [
        {"decode": {"backend": "pil", "order": order, "exif_orientation": False}},
        *geometry_steps(geometry, height, width),
        *value_steps(values, dtype),
        {"layout": {"order": layout}},
    ]


def preset_steps(
    preset: Preset, height: int, width: int, layout: str, dtype: str
) -> list[StepText]:
    return recipe_steps(preset.order, preset.geometry, preset.values, height, width, layout, dtype)


__all__ = ["PRESETS", "Geometry", "Preset", "StepText", "Values", "preset_steps", "recipe_steps"]
