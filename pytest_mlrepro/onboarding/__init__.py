"""Onboarding a model: the logic of ``mlrepro init`` (whose arguments are ``cli/_init.py``).

* ``_init.py``: the request, read and checked (:func:`plan_init`), then written atomically
  (:meth:`InitPlan.complete`); the input size from the signature, a builder or the module;
* ``_model_info.py``: a model's signature read from its file; files inside installed packages;
* ``_data_folder.py``: the labelled data folder and its checksum list;
* ``_presets.py``: the reference implementations' recipes, exact per size;
* ``_discovery.py``: the recipe searched on a labelled subset, stopping when the best is clear;
* ``_manifest_text.py``: the manifest's text;
* ``export.py``: a PyTorch module as a byte-reproducible ONNX file built into the cache.

Importing this package imports no ML framework: each format's reader imports only its own.
"""

from __future__ import annotations

from ._data_folder import DataInfo, InitError, checksum_line, read_data, write_checksums
from ._discovery import Progress, discover, spread
from ._init import EXPORTS, InitPlan, InitRequest, Written, module_input_size, plan_init
from ._manifest_text import Recipe, render_manifest
from ._model_info import (
    FRAMEWORK_OF,
    ModelInfo,
    ModelReadError,
    PackageFile,
    guess_format,
    read_model,
)
from ._presets import (
    PRESETS,
    Geometry,
    Preset,
    PresetSizeError,
    StepText,
    Values,
    preset_steps,
    recipe_steps,
)

__all__ = [
    "EXPORTS",
    "FRAMEWORK_OF",
    "PRESETS",
    "DataInfo",
    "Geometry",
    "InitError",
    "InitPlan",
    "InitRequest",
    "ModelInfo",
    "ModelReadError",
    "PackageFile",
    "Preset",
    "PresetSizeError",
    "Progress",
    "Recipe",
    "StepText",
    "Values",
    "Written",
    "checksum_line",
    "discover",
    "guess_format",
    "module_input_size",
    "plan_init",
    "preset_steps",
    "read_data",
    "read_model",
    "recipe_steps",
    "render_manifest",
    "spread",
    "write_checksums",
]
