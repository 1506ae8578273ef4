"""TensorFlow and TFLite: SavedModel, Keras ``.keras``, TF1 frozen graphs, and TFLite flatbuffers.

TensorFlow formats run on TensorFlow (CPU, or its first GPU when it sees one). TFLite files run on
LiteRT's interpreter, ``ai_edge_litert.interpreter.Interpreter``: ``tf.lite.Interpreter`` is
deprecated since TensorFlow 2.18 and warns that it is scheduled for deletion; LiteRT is the same
interpreter API, maintained, and does not need TensorFlow installed.

Every runner checks the manifest's input (name, dtype, layout, shape) against the model's own
signature when it loads, and each batch's shape before the model sees it: an NHWC model fed an
NCHW pipeline is a :class:`SignatureError` naming both layouts, not a silent 0%.

One module per responsibility: ``_config`` (TensorFlow's threads, determinism, seed and device,
and what each format's loader hands the runner and the signature check every runner family
shares, ``runners/_signature.py``), ``_saved_model``, ``_keras`` and ``_frozen_graph`` (loading
each format, and its layers), ``_runner`` (the TensorFlow runner), ``_tflite`` (the LiteRT
runner and quantisation).
"""

from __future__ import annotations

from ._config import import_tensorflow
from ._runner import TensorFlowRunner
from ._saved_model import safe_extract
from ._tflite import TFLiteRunner, dequantize, litert_interpreter, quantize, signature_names


def import_framework(name: str) -> None:
    """Import the framework's module now (ImportError if it is installed but broken)."""
    if name == "tflite":
        litert_interpreter()
    else:
        import_tensorflow()


__all__ = [
    "TFLiteRunner",
    "TensorFlowRunner",
    "dequantize",
    "import_framework",
    "litert_interpreter",
    "quantize",
    "safe_extract",
    "signature_names",
]
