"""A model's signature against the manifest, before any data flows: NHWC data fed to a
``[batch, 3, h, w]`` input "works" and gives near-zero accuracy; this says what is wrong."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from .. import pipeline
from ..errors import SignatureError

if TYPE_CHECKING:
    from .._yaml import KeyPath
    from ..manifest import Manifest

CHANNELS = (1, 3, 4)
# Steps that keep an image's height and width (every other step may change them).
_SIZE_KEEPING = (pipeline.Color, pipeline.Cast, pipeline.Scale, pipeline.Normalize, pipeline.Layout)


def fixed_size(dim: object) -> int | None:
    """A dimension's size; None for a name, None or a non-positive number (no size)."""
    return dim if isinstance(dim, int) and not isinstance(dim, bool) and dim > 0 else None


def shape_text(shape: Sequence[object]) -> str:
    """A model shape as messages show it: ``[batch, 3, ?, ?]``."""
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def model_layout(shape: Sequence[object]) -> Literal["NCHW", "NHWC"] | None:
    """NCHW or NHWC when only one of a rank-4 input's channel axes is fixed to 1, 3 or 4, else
    None: the one rule by which runners check a layout and ``mlrepro init`` writes one."""
    if len(shape) != 4:
        return None
    first, last = fixed_size(shape[1]) in CHANNELS, fixed_size(shape[3]) in CHANNELS
    if first and not last:
        return "NCHW"
    if last and not first:
        return "NHWC"
    return None


def layout_mismatch(shape: Sequence[object], layout: str, input_name: str) -> str | None:
    """Why a model input of ``shape`` cannot take ``layout`` data, or None."""
    model = model_layout(shape)
    if model is None or model == layout:
        return None
    what = "channels first" if model == "NCHW" else "channels last"
    return (
        f"the model's input {input_name!r} is {shape_text(shape)}: {what} ({model}), but the "
        f"manifest declares {layout}: a layout mismatch; set layout: {model} and end the "
        f"preprocessing with 'layout: {{order: {model}}}'"
    )


def model_channels(shape: Sequence[object], layout: str) -> int | None:
    """The channel count a rank-4 model input takes in ``layout``, or None."""
    if len(shape) != 4:
        return None
    return fixed_size(shape[1] if layout == "NCHW" else shape[3])


# The decode step that gives a channel count, as a manifest writes it (else 'mode: bands').
_CHANNEL_FIXES = {
    1: "decode with 'mode: L' (grey; a colour file by ITU-R 601-2 luma, 'convert: luma'), or "
    "'mode: L16' for files with 16-bit samples (mode L reads only their high byte)",
    3: "decode with 'mode: RGB' (colour; a grey file's channel repeated)",
    4: "decode with 'mode: RGBA' (colour and alpha), or 'mode: bands' for 4 bands",
}


def channel_mismatch(
    shape: Sequence[object],
    layout: str,
    input_name: str,
    channels: int,
    names: str = "",
    source: str | None = None,
) -> str | None:
    """Why a model input cannot take ``channels`` channels, or None; ``source``: where the count
    was read when no signature declares it."""
    model = model_channels(shape, layout)
    if model is None or model == channels:
        return None
    shown = shape_text(shape)
    other = "NHWC" if layout == "NCHW" else "NCHW"
    if source is None and model_channels(shape, other) == channels:
        # The pipeline's count is on the other axis: a layout the shape alone could not tell
        # (a channel count other than 1, 3, 4), not a channel mismatch.
        return (
            f"the model's input {input_name!r} is {shown}: read as {layout} it would take "
            f"{model} channels, as {other} the {channels} the preprocessing makes; set "
            f"layout: {other} and end the preprocessing with 'layout: {{order: {other}}}'"
        )
    what = f" ({names})" if names else ""
    model_side = source or f"the model's input {input_name!r} is {shown} ({layout})"
    bands = f"decode with 'mode: bands, channels: {model}' (a multi-band TIFF or .npy array)"
    return (
        f"the preprocessing makes {channels}-channel images{what}, {model_side}: it takes "
        f"{model} channel{'s' * (model != 1)}; {_CHANNEL_FIXES.get(model, bands)}"
    )


def _refuse(manifest: Manifest, where: KeyPath, why: str | None) -> None:
    if why is not None:
        raise SignatureError(manifest.error(where, why).format())


def pipeline_size(steps: Sequence[pipeline.Step]) -> tuple[int, int, int] | None:
    """(height, width, index of the step that sets it) when the steps fix the image size."""
    fixed: tuple[int, int, int] | None = None
    for index, step in enumerate(steps):
        if isinstance(step, (pipeline.Crop, pipeline.Resize)) and step.size is not None:
            size = step.size
            height, width = (size, size) if isinstance(size, int) else (size[0], size[1])
            fixed = (height, width, index)
        elif index > 0 and not isinstance(step, _SIZE_KEEPING):
            fixed = None  # a fraction crop, a shorter-side resize or a registered step
    return fixed


def size_mismatch(
    shape: Sequence[object], layout: str, input_name: str, height: int, width: int
) -> str | None:
    """Why a model input cannot take ``height`` × ``width`` images, or None."""
    if len(shape) != 4:
        return None
    dims = (shape[2], shape[3]) if layout == "NCHW" else (shape[1], shape[2])
    want = tuple(fixed_size(d) for d in dims)
    if (want[0] is None or want[0] == height) and (want[1] is None or want[1] == width):
        return None
    shown = shape_text(shape)
    return (
        f"the preprocessing makes {height}×{width} images, the model's input {input_name!r} is "
        f"{shown} ({layout}): it takes {dims[0]}×{dims[1]}; change this size to the model's"
    )


@dataclass(frozen=True)
class ModelSignature:
    """What a loaded model declares, as its runner read it; None where a format does not say."""

    model: str  # the model as messages name it: "the model", "the Keras model", "the SavedModel"
    shape: Sequence[object]  # the input's shape: a size, or a name or None where it has none
    inputs: Sequence[str] | None = None  # the input names, as messages show them
    aliases: Sequence[str] = ()  # other names the input answers to (a TFLite tensor's)
    dtype: str | None = None  # the input's dtype (numpy's name): what the pipeline must give
    outputs: Mapping[str, Sequence[object] | None] | None = None  # output name → its shape
    source: str | None = None  # where the shape was read when no signature declares it


def check_signature(manifest: Manifest, signature: ModelSignature) -> str | None:
    """Each mismatch a :class:`SignatureError` at the field to change; returns the scores output
    (None if none is named)."""
    declared = manifest.input
    inputs, model = signature.inputs, signature.model
    if inputs is not None and len(inputs) != 1:
        raise SignatureError(
            f"{manifest.source}: {model} takes {len(inputs)} inputs {sorted(inputs)}; image "
            "classification feeds one"
        )
    if inputs is not None and declared.name not in (*inputs, *signature.aliases):
        why = f"{model}'s inputs are {sorted(inputs)}, the manifest names {declared.name!r}"
        _refuse(manifest, ("inputs", 0, "name"), why)
    if signature.dtype is not None and signature.dtype != declared.dtype:
        why = (
            f"model input {declared.name!r} is {signature.dtype}, the manifest declares "
            f"{declared.dtype}"
        )
        _refuse(manifest, ("inputs", 0, "dtype"), why)
    shape = signature.shape
    if signature.source is None:
        why_not = layout_mismatch(shape, declared.layout, declared.name)
        _refuse(manifest, ("inputs", 0, "layout"), why_not)
    # The channels (and what they are: RGB, BGR, L, RGBA, BGRA or bands) the preprocessing
    # makes, known before any image is read, at the decode step's mode.
    made = pipeline.Pipeline(declared.preprocess).final
    wrong = channel_mismatch(
        shape, declared.layout, declared.name, made.channels, made.order, signature.source
    )
    _refuse(manifest, ("inputs", 0, "preprocess", 0, "decode", "mode"), wrong)
    fixed = pipeline_size(declared.preprocess)
    if fixed is not None:
        height, width, step = fixed
        wrong = size_mismatch(shape, declared.layout, declared.name, height, width)
        _refuse(
            manifest, ("inputs", 0, "preprocess", step, declared.preprocess[step].op, "size"), wrong
        )
    if signature.outputs is None:
        return None
    output = _chosen_output(manifest, model, list(signature.outputs))
    _check_classes(manifest, output, signature.outputs[output])
    return output


def _chosen_output(manifest: Manifest, model: str, outputs: list[str]) -> str:
    """The output postprocess.output names, or the model's only one."""
    wanted = manifest.postprocess.output
    if wanted is None and len(outputs) == 1:
        return outputs[0]
    if wanted is not None and wanted in outputs:
        return wanted
    why = (
        f"{model} has outputs {outputs}: name the one that holds the class scores with "
        "postprocess.output"
        if wanted is None
        else f"{model}'s outputs are {outputs}, postprocess.output names {wanted!r}"
    )
    raise SignatureError(manifest.error(("postprocess", "output"), why).format())


def _check_classes(manifest: Manifest, output: str, shape: Sequence[object] | None) -> None:
    classes = fixed_size(shape[1]) if shape is not None and len(shape) == 2 else None
    if classes is None or classes == manifest.dataset.classes:
        return
    _refuse(
        manifest,
        ("dataset", "classes"),
        f"the model's output {output!r} is {shape_text(shape or ())}: {classes} classes, the "
        f"manifest declares {manifest.dataset.classes} (a model with a background class "
        "has one more than its labels): use a model, or labels, with the same classes",
    )


def check_batch_shape(
    name: str, expected: Sequence[object], batch: np.ndarray, layout: str
) -> None:
    """The batch dimension is not compared: a runner splits or pads batches."""
    got = list(batch.shape)
    if len(expected) != len(got):
        raise SignatureError(
            f"the model input {name!r} has rank {len(expected)} {shape_text(expected)}, the "
            f"pipeline produces {got} ({layout})"
        )
    if all(fixed_size(want) in (None, size) for want, size in zip(expected[1:], got[1:])):
        return
    hint = "a size mismatch (check the crop and resize steps)"
    sizes = [fixed_size(d) for d in expected[1:]]
    if sorted(d for d in sizes if d is not None) == sorted(got[1:]):
        model = model_layout(expected)
        hint = (
            f"a layout mismatch: the model is {model}, the pipeline {layout}"
            if model
            else "a layout mismatch (the same sizes in another order)"
        )
    raise SignatureError(
        f"the model input {name!r} expects {shape_text(expected)}, the pipeline produces "
        f"{got} ({layout}): {hint}"
    )


class CheckedInput:
    """A runner whose model declares its input, which each batch is checked against."""

    input_name: str
    input_shape: Sequence[object]

    def check_batch(self, batch: np.ndarray, layout: str) -> None:
        if self.input_shape:
            check_batch_shape(self.input_name, self.input_shape, batch, layout)
