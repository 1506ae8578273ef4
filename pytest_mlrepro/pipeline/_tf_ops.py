"""The TensorFlow preprocessing backend, numpy in and out, TensorFlow imported on the first call
(its eager ops are thread-safe)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..errors import SampleError, Unavailable

_JPEG_MAGIC = b"\xff\xd8\xff"


@functools.cache
def tensorflow() -> Any:
    """The ``tensorflow`` module, or Unavailable saying how to install it."""
    try:
        import tensorflow as tf
    except ImportError:
        raise Unavailable(
            "a preprocessing step uses backend 'tf' and TensorFlow is not installed",
            how="pip install 'pytest-mlrepro[tf]'",
        ) from None
    return tf


def decode_tf_channels(
    data: bytes, channels: int, deep: bool, dct_method: str, sample: str
) -> np.ndarray:
    """H×W×``channels`` by ``tf.io`` (1: its own grey conversion); ``deep``: a PNG's uint16
    samples, else 8-bit ones (a 16-bit PNG's high byte)."""
    tf = tensorflow()
    try:
        if deep:
            image = tf.io.decode_png(data, channels=channels, dtype=tf.uint16)
        elif data[:3] == _JPEG_MAGIC and channels != 4:
            image = tf.io.decode_jpeg(data, channels=channels, dct_method=dct_method)
        else:
            image = tf.io.decode_image(data, channels=channels, expand_animations=False)
            if image.dtype != tf.uint8:  # 16-bit PNG: keep the high byte, as the pil backend does
                image = tf.cast(tf.bitwise.right_shift(image, 8), tf.uint8)
    except (tf.errors.InvalidArgumentError, tf.errors.UnknownError) as exc:
        first = str(exc.message if hasattr(exc, "message") else exc).splitlines()[0]
        raise SampleError(sample, f"tf.io cannot decode it: {first}") from None
    return np.asarray(image.numpy())


def resize_tf(
    array: np.ndarray, height: int, width: int, method: str, antialias: bool
) -> np.ndarray:
    """``tf.image.resize`` of an H×W×C image: float32 out (``nearest`` keeps the dtype)."""
    tf = tensorflow()
    # The pipeline's method names are tf.image.ResizeMethod's values, but for Lanczos-3.
    method = "lanczos3" if method == "lanczos" else method
    out = tf.image.resize(array, [height, width], method=method, antialias=antialias)
    return np.asarray(out.numpy())
