"""The TensorFlow runner: a SavedModel, a Keras model or a frozen graph, on numpy batches."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ...manifest import Manifest
from ...settings import Settings
from .._artifacts import verified
from .._signature import CheckedInput, shape_text
from . import _frozen_graph, _keras, _saved_model
from ._config import Loaded, choose_tf_device, configure_tensorflow, import_tensorflow


class TensorFlowRunner(CheckedInput):
    """A SavedModel signature, a Keras model or a frozen graph, called on numpy batches."""

    def __init__(self, loaded: Loaded, input_name: str, info: dict[str, Any]) -> None:
        self.loaded = loaded
        self.input_name = input_name
        self.input_shape = list(loaded.signature.shape)
        self.info = info

    @classmethod
    def load(cls, manifest: Manifest, device: str, settings: Settings) -> TensorFlowRunner:
        tf = import_tensorflow()
        threads = configure_tensorflow(tf, manifest)
        tf_device, device_info = choose_tf_device(tf, device)
        model = manifest.model
        assert model.file is not None
        loader = {
            "saved_model": _saved_model.load,
            "keras": _keras.load,
            "frozen_graph": _frozen_graph.load,
        }[model.format]
        # The loaders read the verified copy (its file name is the original's, for messages).
        with (
            verified(manifest, model.file, ("model", "file"), settings) as file,
            tf.device(tf_device),
        ):
            loaded = loader(tf, manifest, file.local, tf_device)
        signature = loaded.signature
        # Checked by the loader (runners/_signature.py): one input, which the manifest names.
        assert signature.inputs is not None
        name = signature.inputs[0]
        info = {
            "framework": "tensorflow",
            "framework_version": tf.__version__,
            "device": device,
            "tf_device": tf_device,
            "format": model.format,
            **loaded.info,
            "input": name,
            "output": loaded.output,
            "input_shape": shape_text(list(signature.shape)),
            **threads,
            **device_info,
        }
        return cls(loaded, name, info)

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        return np.asarray(self.loaded.call(batch))

    def layer_outputs(self, batch: np.ndarray) -> list[tuple[str, str, np.ndarray]]:
        """(name, op, value) of every layer's output on ``batch``; frozen graphs give none."""
        return [] if self.loaded.layers is None else self.loaded.layers(batch)

    def model_call(self, batch: np.ndarray) -> Callable[[], object]:
        return functools.partial(self.loaded.call, batch)
