"""Onboarding a model: the core of ``mlrepro init`` (whose command is ``cli/_init.py``). It reads
a model's signature (``_model_info.py``); the preprocessing comes from a named preset
(``_presets.py``) or is discovered on a labelled subset (``_discovery.py``), never silently;
``export.py`` turns a PyTorch model into a byte-reproducible ONNX file built into the cache.

Importing this package imports no ML framework: each format's reader imports only its own.
"""

from __future__ import annotations

from ._discovery import discover, spread
from ._model_info import FRAMEWORK_OF, ModelInfo, ModelReadError, guess_format, read_model
from ._presets import PRESETS, Geometry, Preset, StepText, Values, preset_steps, recipe_steps

__all__ = [
    "FRAMEWORK_OF",
    "PRESETS",
    "Geometry",
    "ModelInfo",
    "ModelReadError",
    "Preset",
    "StepText",
    "Values",
    "discover",
    "guess_format",
    "preset_steps",
    "read_model",
    "recipe_steps",
    "spread",
]
