"""Keras ``.keras`` files: loaded in safe mode (no Python from the file runs), the chosen output
called through one traced function; and its layers, every layer's output in the model's order."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import SignatureError
from ...manifest import Manifest
from .._signature import ModelSignature, check_signature
from .._warnings import loading
from ._config import Loaded, dims, tf_dtype_name


def load(tf: Any, manifest: Manifest, path: Path, tf_device: str) -> Loaded:
    """The Keras model at ``path``, its one input checked against the manifest's."""
    import keras

    with loading(manifest, f"Keras cannot load {path.name}", error=SignatureError):
        # safe_mode refuses to deserialise Python lambdas: nothing in the file runs as code.
        model = keras.saving.load_model(path, compile=False, safe_mode=True)
    tensor = model.inputs[0]
    output_names = list(getattr(model, "output_names", None) or []) or ["output_0"]
    signature = ModelSignature(
        "the Keras model",
        dims(tensor.shape),
        inputs=[t.name for t in model.inputs],
        dtype=tf_dtype_name(tensor.dtype),
        outputs={n: dims(o.shape) for n, o in zip(output_names, model.outputs)},
    )
    output = check_signature(manifest, signature)
    assert output is not None
    position = output_names.index(output)
    shape = signature.shape
    spec = tf.TensorSpec([None, *shape[1:]], tf_dtype_name(tensor.dtype))

    # tensorflow has no type stubs: its decorator is untyped (the ignore), its tensors Any.
    @tf.function(input_signature=[spec], reduce_retracing=True)  # type: ignore[untyped-decorator]
    def forward(images: Any) -> Any:
        out = model(images, training=False)
        return out[position] if isinstance(out, (list, tuple)) else out

    # Traced now, with the model (docs/measurements.md): loading ends with the graph built, and
    # the first batch's call is a call like the others.
    forward.get_concrete_function()

    def call(batch: np.ndarray) -> np.ndarray:
        with tf.device(tf_device):
            scores: np.ndarray = forward(tf.constant(batch)).numpy()
            return scores

    layers = functools.partial(layer_outputs, model)
    return Loaded(call, signature, output, {"keras_version": keras.__version__}, layers)


def layer_outputs(model: Any, batch: np.ndarray) -> list[tuple[str, str, np.ndarray]]:
    """Through a second model whose outputs are all its layers'."""
    import keras

    layers = [
        layer
        for layer in model.layers
        if not isinstance(layer, keras.layers.InputLayer) and len(layer._inbound_nodes) == 1
    ]
    tapped = keras.Model(model.inputs, [layer.output for layer in layers])
    values = tapped(batch, training=False)
    values = values if isinstance(values, (list, tuple)) else [values]
    return [
        (layer.name, type(layer).__name__, np.asarray(value))
        for layer, value in zip(layers, values)
    ]
