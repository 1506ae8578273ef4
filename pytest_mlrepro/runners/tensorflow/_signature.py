"""What TensorFlow's formats hand the shared signature check (``runners/_signature.py``): the
loaded model's call and its :class:`~pytest_mlrepro.runners._signature.ModelSignature`, with
TensorFlow's shapes and dtypes read as plain values."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._signature import ModelSignature

DEFAULT_SIGNATURE = "serving_default"
Shape = list[int | None]

# What a TensorFlow format's loader returns: the model call, what the model declares (checked
# against the manifest), the output that holds the class scores, and what the runner's info
# adds for this format.
Loaded = tuple[Callable[[np.ndarray], np.ndarray], ModelSignature, str, dict[str, Any]]


def tf_dtype_name(dtype: Any) -> str:
    return str(getattr(dtype, "name", dtype))


def dims(shape: Any) -> Shape:
    """A TensorFlow or TFLite shape as sizes, None where a dimension has none."""
    return [None if d is None or d < 0 else int(d) for d in list(shape)]
