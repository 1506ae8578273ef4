"""Tiny TensorFlow models for the TensorFlow/TFLite tests: the same function as the tiny ONNX and
TorchScript models of helpers.py (logits = 10 × per-channel mean, values in 0..1), in NHWC, as a
Keras ``.keras`` file, a SavedModel tar, a TF1 frozen graph and TFLite float32 / int8 files.

Every maker runs in the calling process (the session fixture ``tf_model_files`` of
tests/conftest.py calls :func:`make_tf_models` once per run); run as a script, it writes the files
into the folder it is given.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
from helpers import N_CLASSES, SCALE, sha256

# One import style: ``from tf_helpers import ...`` (tests/conftest.py puts this folder on sys.path).
# Imported as ``tests.tf_helpers`` too, the module would load twice, as two module objects, each
# with its own copy of every class and constant.
if __name__.startswith("tests."):  # (run as a script, it is __main__: allowed)
    raise ImportError(
        f"import the test helpers as 'tf_helpers' (from tf_helpers import ...), not as {__name__!r}"
    )

# The file of each format, under the assets' models/ folder.
TF_FILES = {
    "keras": "tiny.keras",
    "saved_model": "tiny_saved_model.tar",
    "frozen_graph": "tiny_frozen.pb",
    "tflite": "tiny.tflite",
    "tflite_int8": "tiny_int8.tflite",
}
NHWC_PREPROCESS = (
    "{crop: {size: [32, 32], rounding: google}}",
    "{resize: {size: [16, 16], method: bilinear, backend: pil}}",
    "{cast: {dtype: float32}}",
    "{normalize: {mean: [0], std: [255]}}",
    "{layout: {order: NHWC}}",
)


def keras_model(size: int | None = 16) -> Any:
    """Input ``input`` (N×size×size×3), output ``logits`` = 10 × per-channel mean."""
    import keras

    inputs = keras.Input(shape=(size, size, 3), name="input")
    pooled = keras.layers.GlobalAveragePooling2D(name="mean")(inputs)
    dense = keras.layers.Dense(N_CLASSES, use_bias=False, name="logits")
    model = keras.Model(inputs, dense(pooled), name="tiny")
    dense.set_weights([np.eye(3, dtype=np.float32) * SCALE])
    return model


def make_tf_models(folder: Path) -> None:
    """Write every file of :data:`TF_FILES` into ``folder``."""
    import tempfile

    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    from examples.efficientnet_lite0_tf import canonical_keras_zip, canonical_tar

    folder.mkdir(parents=True, exist_ok=True)
    model = keras_model()
    with tempfile.TemporaryDirectory() as tmp:
        model.save(Path(tmp) / "m.keras")
        (folder / TF_FILES["keras"]).write_bytes(
            canonical_keras_zip((Path(tmp) / "m.keras").read_bytes())
        )

    @tf.function(input_signature=[tf.TensorSpec([None, 16, 16, 3], tf.float32, name="input")])
    def serve(images: tf.Tensor) -> dict[str, tf.Tensor]:
        return {"logits": model(images, training=False)}

    with tempfile.TemporaryDirectory() as tmp:
        module = tf.Module()
        module.model, module.serve = model, serve
        tf.saved_model.save(module, tmp, signatures={"serving_default": serve})
        (folder / TF_FILES["saved_model"]).write_bytes(canonical_tar(Path(tmp)))

    # A TF1 frozen graph: input placeholder "input", output "logits" (dynamic spatial size).
    @tf.function(input_signature=[tf.TensorSpec([None, None, None, 3], tf.float32)])
    def graph_fn(images: tf.Tensor) -> tf.Tensor:
        return tf.identity(tf.reduce_mean(images, axis=[1, 2]) * SCALE, name="logits")

    frozen = convert_variables_to_constants_v2(graph_fn.get_concrete_function())
    graph_def = frozen.graph.as_graph_def()
    for node in graph_def.node:  # the placeholder under the name a TF1 graph would give it
        if node.op == "Placeholder":
            old = node.name
            node.name = "input"
    for node in graph_def.node:
        node.input[:] = [
            "input" + i[len(old) :] if i.split(":")[0] == old else i for i in node.input
        ]
    (folder / TF_FILES["frozen_graph"]).write_bytes(graph_def.SerializeToString())

    with tempfile.TemporaryDirectory() as tmp:
        archive = __import__("keras").export.ExportArchive()
        archive.track(model)
        archive.add_endpoint(
            name="serving_default",
            fn=lambda images: {"logits": model(images, training=False)},
            input_signature=[tf.TensorSpec([None, 16, 16, 3], tf.float32, name="input")],
        )
        archive.write_out(tmp, verbose=False)
        converter = tf.lite.TFLiteConverter.from_saved_model(tmp, ["serving_default"])
        (folder / TF_FILES["tflite"]).write_bytes(converter.convert())
        rng = np.random.default_rng(0)
        converter = tf.lite.TFLiteConverter.from_saved_model(tmp, ["serving_default"])
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: (
            [rng.uniform(0, 1, (1, 16, 16, 3)).astype(np.float32)] for _ in range(32)
        )
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8
        (folder / TF_FILES["tflite_int8"]).write_bytes(converter.convert())


def tf_manifest_text(
    name: str,
    fmt: str,
    *,
    assets: Path,
    layout: str = "NHWC",
    decode: str = "{decode: {backend: pil}}",
    preprocess: tuple[str, ...] = NHWC_PREPROCESS,
    extra: str = "",
    model_extra: str = "",
) -> str:
    """A manifest for the tiny TF model of format ``fmt`` (a key of :data:`TF_FILES`)."""
    framework = "tflite" if fmt.startswith("tflite") else "tensorflow"
    file = TF_FILES[fmt]
    steps = "\n".join(f"      - {s}" for s in (decode, *preprocess))
    head = textwrap.dedent(f"""\
        name: {name}
        version: "1"
        framework:
          name: {framework}
        model:
          format: {"tflite" if framework == "tflite" else fmt}
          file:
            path: ../models/{file}
            sha256: {sha256(assets / "models" / file)}
        """)
    body = (
        "inputs:\n"
        "  - name: input\n"
        f"    layout: {layout}\n"
        "    preprocess:\n"
        f"{steps}\n"
        f"dataset: {{name: tiny, checksums: tiny.sha256, classes: {N_CLASSES}}}\n"
        "runtime: {batch_size: 8, devices: [cpu]}\n"
    )
    return head + model_extra + body + textwrap.dedent(extra)


if __name__ == "__main__":
    # Run as a script: the example builders (examples/, at the repository root) are importable.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    make_tf_models(Path(sys.argv[1]))
