"""TensorFlow formats, and TFLite on LiteRT since ``tf.lite.Interpreter`` is deprecated (TF 2.18)
and LiteRT needs no TensorFlow."""

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
