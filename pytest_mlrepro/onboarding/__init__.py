"""Onboarding a model: the logic of ``mlrepro init`` (its arguments: ``cli/_init.py``). Importing
it imports no ML framework: each format's reader imports only its own."""

from __future__ import annotations

from ._data_folder import InitError, checksum_line
from ._data_probe import spread
from ._discovery import Progress, Search
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
