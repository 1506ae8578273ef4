"""Keras ``.keras`` files: loaded in safe mode (no Python from the file runs), the chosen output
called through one traced function; and its layers, every layer's output in the model's order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ...errors import SignatureError
from ...manifest import Manifest
from ._signature import Loaded, choose_output, dims, tf_dtype_name


def load(tf: Any, manifest: Manifest, path: Path, tf_device: str) -> Loaded:
    """The Keras model at ``path``, its one input checked against the manifest's."""
    import keras

    try:
        # safe_mode refuses to deserialise Python lambdas: nothing in the file runs as code.
        model = keras.saving.load_model(path, compile=False, safe_mode=True)
    except (ValueError, TypeError, OSError) as exc:
        raise SignatureError(
            f"{manifest.source}: Keras cannot load {path.name}: {str(exc).splitlines()[0]}"
        ) from None
    if len(model.inputs) != 1:
        raise SignatureError(
            f"{manifest.source}: the Keras model takes {len(model.inputs)} inputs; image "
            "classification feeds one"
        )
    tensor = model.inputs[0]
    name = tensor.name
    if manifest.input.name != name:
        raise SignatureError(
            manifest.error(
                ("inputs", 0, "name"),
                f"the Keras model's input is {name!r}, the manifest names "
                f"{manifest.input.name!r}",
            ).format()
        )
    output_names = list(getattr(model, "output_names", None) or [])
    output = choose_output(manifest, output_names or ["output_0"], "Keras model")
    position = output_names.index(output) if output_names else 0
    shape = dims(tensor.shape)
    spec = tf.TensorSpec([None, *shape[1:]], tf_dtype_name(tensor.dtype))

    # tensorflow has no type stubs: its decorator is untyped (the ignore), its tensors Any.
    @tf.function(input_signature=[spec], reduce_retracing=True)  # type: ignore[untyped-decorator]
    def forward(images: Any) -> Any:
        out = model(images, training=False)
        return out[position] if isinstance(out, (list, tuple)) else out

    def call(batch: np.ndarray) -> np.ndarray:
        with tf.device(tf_device):
            scores: np.ndarray = forward(tf.constant(batch)).numpy()
            return scores

    call.keras_model = model  # type: ignore[attr-defined]  # for layer_outputs

    call.keep_alive = model  # type: ignore[attr-defined]
    return (
        call,
        name,
        shape,
        tf_dtype_name(tensor.dtype),
        output,
        {"keras_version": keras.__version__},
    )


def layer_outputs(model: Any, batch: np.ndarray) -> list[tuple[str, str, np.ndarray]]:
    """Every layer's output on ``batch``, in the model's order, as (name, op, value): a second
    model over the loaded one whose outputs are all its layers'."""
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
