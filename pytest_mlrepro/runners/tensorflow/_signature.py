"""A TensorFlow or TFLite model's input signature against the manifest, before any data flows
and before each batch: layout, dtype, shape, and which output holds the class scores."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...errors import SignatureError
from ...manifest import Manifest
from .._signature import check_channels, model_layout

DEFAULT_SIGNATURE = "serving_default"
Shape = list[int | None]

# What a TensorFlow format's loader returns: the model call, the input's name, shape and dtype,
# the output's name, and what the runner's info adds for this format.
Loaded = tuple[Callable[[np.ndarray], np.ndarray], str, Shape, str, str, dict[str, Any]]


# --- signature checks shared by every format -----------------------------------------------


def shape_text(shape: Sequence[int | None]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def check_declared_input(manifest: Manifest, name: str, shape: Shape, dtype: str) -> None:
    """The manifest's input against the model's signature, before any data flows: the layout
    (when the model's shape tells it), the channel count and the dtype (a quantised TFLite
    input also accepts float32: the runner quantises it)."""
    declared = manifest.input
    model = model_layout(shape)
    if model is not None and declared.layout != model:
        raise SignatureError(
            manifest.error(
                ("inputs", 0, "layout"),
                f"the model input {name!r} is {model} {shape_text(shape)}, the manifest "
                f"declares {declared.layout}: a layout mismatch; end the preprocessing with "
                f"'layout: {{order: {model}}}' and declare 'layout: {model}'",
            ).format()
        )
    check_channels(manifest, [-1 if d is None else d for d in shape])
    if declared.dtype != dtype:
        raise SignatureError(
            manifest.error(
                ("inputs", 0, "dtype"),
                f"model input {name!r} is {dtype}, the manifest declares {declared.dtype}",
            ).format()
        )


def check_batch_shape(name: str, expected: Shape, batch: np.ndarray, layout: str) -> None:
    """A batch against the model's input shape (None: any size), before the model runs."""
    got = list(batch.shape)
    if len(expected) != len(got):
        raise SignatureError(
            f"the model input {name!r} has rank {len(expected)} {shape_text(expected)}, the "
            f"pipeline produces {got} ({layout})"
        )
    if all(want is None or want == size for want, size in zip(expected[1:], got[1:])):
        return
    hint = "a size mismatch (check the crop and resize steps)"
    if sorted(d for d in expected[1:] if d is not None) == sorted(got[1:]):
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


def choose_output(manifest: Manifest, outputs: Sequence[str], what: str) -> str:
    wanted = manifest.postprocess.output
    if wanted is None:
        if len(outputs) == 1:
            return outputs[0]
        raise SignatureError(
            manifest.error(
                ("postprocess", "output"),
                f"the {what} has outputs {list(outputs)}: name the one that holds the class "
                "scores with postprocess.output",
            ).format()
        )
    if wanted not in outputs:
        raise SignatureError(
            manifest.error(
                ("postprocess", "output"),
                f"the {what}'s outputs are {list(outputs)}, postprocess.output names {wanted!r}",
            ).format()
        )
    return wanted


def tf_dtype_name(dtype: Any) -> str:
    return str(getattr(dtype, "name", dtype))


def dims(shape: Any) -> Shape:
    return [None if d is None or d < 0 else int(d) for d in list(shape)]
