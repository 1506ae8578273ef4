"""TensorFlow's process-wide settings for a run, and what each format's loader gives the runner."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import DeviceUnavailable
from ...manifest import Manifest
from .._signature import ModelSignature

DEFAULT_SIGNATURE = "serving_default"
Shape = list[int | None]


@dataclass(frozen=True)
class Loaded:
    """A TensorFlow format's loaded model; ``layers``: every layer's output on a batch, as
    (name, op, value), None where the format shows none."""

    call: Callable[[np.ndarray], np.ndarray]
    signature: ModelSignature
    output: str
    info: dict[str, Any]
    layers: Callable[[np.ndarray], list[tuple[str, str, np.ndarray]]] | None = None


def tf_dtype_name(dtype: Any) -> str:
    return str(getattr(dtype, "name", dtype))


def dims(shape: Any) -> Shape:
    """A TensorFlow or TFLite shape as sizes, None where a dimension has none."""
    return [None if d is None or d < 0 else int(d) for d in list(shape)]


def import_tensorflow() -> Any:
    import tensorflow as tf

    return tf


def configure_tensorflow(tf: Any, manifest: Manifest) -> dict[str, Any]:
    """Threads, determinism and seed; returns what is in effect (TensorFlow fixes its thread
    pools when it first runs an op, after which a different request cannot apply)."""
    runtime = manifest.runtime
    notes = []
    threading = tf.config.threading
    for kind, requested in (
        ("intra_op", runtime.intra_op_threads),
        ("inter_op", runtime.inter_op_threads),
    ):
        getter = getattr(threading, f"get_{kind}_parallelism_threads")
        setter = getattr(threading, f"set_{kind}_parallelism_threads")
        if requested and getter() != requested:
            try:
                setter(requested)
            except RuntimeError:
                notes.append(
                    f"{kind}_threads {requested} requested, but TensorFlow had already started "
                    f"with {getter() or 'its default'} in this process"
                )
    seed = runtime.seed
    if seed is not None:
        tf.random.set_seed(seed)
    deterministic = runtime.deterministic_ops
    if deterministic:
        tf.config.experimental.enable_op_determinism()
    info: dict[str, Any] = {
        "intra_op_threads": threading.get_intra_op_parallelism_threads() or "default (all cores)",
        "inter_op_threads": threading.get_inter_op_parallelism_threads() or "default",
        "tf_deterministic_ops": deterministic,
        "seed": seed,
    }
    if notes:
        info["threads_note"] = "; ".join(notes)
    return info


def choose_tf_device(tf: Any, device: str) -> tuple[str, dict[str, Any]]:
    if device != "cuda":
        return "/CPU:0", {}
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        why = (
            "this TensorFlow build has no CUDA support (e.g. tensorflow-cpu)"
            if not tf.test.is_built_with_cuda()
            else "TensorFlow sees no usable GPU"
        )
        raise DeviceUnavailable(why, how="pip install 'tensorflow[and-cuda]' and check nvidia-smi")
    details = tf.config.experimental.get_device_details(gpus[0])
    return "/GPU:0", {
        "gpu": details.get("device_name", gpus[0].name),
        "tensor_float_32": tf.config.experimental.tensor_float_32_execution_enabled(),
    }
