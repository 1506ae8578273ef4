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

from ._data_folder import InitError, checksum_line
from ._discovery import Progress, Search, spread
from ._init import EXPORTS, InitPlan, InitRequest, module_input_size, plan_init
from ._model_info import ModelReadError
from ._presets import PRESETS, PresetSizeError, preset_steps

__all__ = [
    "EXPORTS",
    "PRESETS",
    "InitError",
    "InitPlan",
    "InitRequest",
    "ModelReadError",
    "PresetSizeError",
    "Progress",
    "Search",
    "checksum_line",
    "module_input_size",
    "plan_init",
    "preset_steps",
    "spread",
]
