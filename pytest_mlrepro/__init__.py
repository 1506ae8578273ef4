"""pytest-mlrepro: reproducibility regression testing of ML models; the core runs without pytest.
Exports load on first use (PEP 562), so that a run collecting no manifest pays for no numpy."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._schema import Invalid
    from .errors import (
        BuildError,
        DatasetUnavailable,
        DeviceUnavailable,
        FrameworkUnavailable,
        GoldenError,
        IntegrityError,
        InvalidModel,
        ManifestError,
        MlreproError,
        NonFiniteOutputs,
        SampleError,
        SignatureError,
        Unavailable,
    )
    from .evaluation import Evaluation, evaluate
    from .goldens import Results
    from .manifest import Manifest, load_manifest
    from .pipeline import State, Step, Tensor, register_step
    from .registry import artifact_builder, model_builder
    from .settings import Settings

_MODULES = {
    "._schema": ["Invalid"],
    ".errors": [
        "BuildError",
        "DatasetUnavailable",
        "DeviceUnavailable",
        "FrameworkUnavailable",
        "GoldenError",
        "IntegrityError",
        "InvalidModel",
        "ManifestError",
        "MlreproError",
        "NonFiniteOutputs",
        "SampleError",
        "SignatureError",
        "Unavailable",
    ],
    ".evaluation": ["Evaluation", "evaluate"],
    ".goldens": ["Results"],
    ".manifest": ["Manifest", "load_manifest"],
    ".pipeline": ["State", "Step", "Tensor", "register_step"],
    ".registry": ["artifact_builder", "model_builder"],
    ".settings": ["Settings"],
}
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> Any:
    """An export, imported on first use (then kept as an attribute: no second call)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


__version__ = "0.1.0"


__all__ = [
    "BuildError",
    "DatasetUnavailable",
    "DeviceUnavailable",
    "Evaluation",
    "FrameworkUnavailable",
    "GoldenError",
    "IntegrityError",
    "Invalid",
    "InvalidModel",
    "Manifest",
    "ManifestError",
    "MlreproError",
    "NonFiniteOutputs",
    "Results",
    "SampleError",
    "Settings",
    "SignatureError",
    "State",
    "Step",
    "Tensor",
    "Unavailable",
    "artifact_builder",
    "evaluate",
    "load_manifest",
    "model_builder",
    "register_step",
]
