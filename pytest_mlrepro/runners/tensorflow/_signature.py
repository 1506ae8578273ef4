"""A TensorFlow or TFLite model's input signature against the manifest, before any data flows
and before each batch: layout, dtype, shape, and which output holds the class scores."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...errors import SignatureError
from ...manifest import Manifest

DEFAULT_SIGNATURE = "serving_default"
Shape = list[int | None]

# What a TensorFlow format's loader returns: the model call, the input's name, shape and dtype,
# the output's name, and what the runner's info adds for this format.
Loaded = tuple[Callable[[np.ndarray], np.ndarray], str, Shape, str, str, dict[str, Any]]


# --- signature checks shared by every format -----------------------------------------------


def _shape_text(shape: Sequence[int | None]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _channels_last(shape: Sequence[int | None]) -> bool | None:
    """Whether a rank-4 image input is NHWC (True), NCHW (False), or cannot be told (None)."""
    if len(shape) != 4:
        return None
    first, last = shape[1] in (1, 3, 4), shape[3] in (1, 3, 4)
    if last and not first:
        return True
    if first and not last:
        return False
    return None


def check_declared_input(manifest: Manifest, name: str, shape: Shape, dtype: str) -> None:
    """The manifest's input against the model's signature, before any data flows: the layout
    (when the model's shape tells it) and the dtype (a quantised TFLite input also accepts
    float32: the runner quantises it)."""
    declared = manifest.input
    channels_last = _channels_last(shape)
    if channels_last is not None and (declared.layout == "NHWC") != channels_last:
        model_layout = "NHWC" if channels_last else "NCHW"
        raise SignatureError(
            manifest.error(
                ("inputs", 0, "layout"),
                f"the model input {name!r} is {model_layout} {_shape_text(shape)}, the manifest "
                f"declares {declared.layout}: a layout mismatch; end the preprocessing with "
                f"'layout: {{order: {model_layout}}}' and declare 'layout: {model_layout}'",
            ).format()
        )
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
            f"the model input {name!r} has rank {len(expected)} {_shape_text(expected)}, the "
            f"pipeline produces {got} ({layout})"
        )
    if all(want is None or want == size for want, size in zip(expected[1:], got[1:])):
        return
    hint = "a size mismatch (check the crop and resize steps)"
    if sorted(d for d in expected[1:] if d is not None) == sorted(got[1:]):
        channels_last = _channels_last(expected)
        model_layout = None if channels_last is None else ("NHWC" if channels_last else "NCHW")
        hint = (
            f"a layout mismatch: the model is {model_layout}, the pipeline {layout}"
            if model_layout
            else "a layout mismatch (the same sizes in another order)"
        )
    raise SignatureError(
        f"the model input {name!r} expects {_shape_text(expected)}, the pipeline produces "
        f"{got} ({layout}): {hint}"
    )


def _choose_output(manifest: Manifest, outputs: Sequence[str], what: str) -> str:
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


def _tf_dtype_name(dtype: Any) -> str:
    return str(getattr(dtype, "name", dtype))


def _dims(shape: Any) -> Shape:
    return [None if d is None or d < 0 else int(d) for d in list(shape)]
