"""pytest-mlrepro: reproducibility regression testing of ML models.

The core is usable without pytest::

    from pytest_mlrepro import Settings, evaluate, load_manifest

    manifest = load_manifest("manifests/efficientnet_lite0_onnx.yaml")
    result = evaluate(manifest, "cpu", Settings.for_project(Path(".")))

A custom preprocessing step is a frozen dataclass subclass of :class:`Step` registered with
:func:`register_step`; its ``transition`` maps a :class:`State` to the next one, its ``apply``
maps a :class:`Tensor`, and it refuses bad parameters or an impossible order with
:class:`Invalid` (reported as a manifest error with the step's file, line and field).

Everything public is exported here; submodules are implementation (none of them shares a name
with an export, so ``from pytest_mlrepro import evaluate`` is always the function).

The exports are loaded on first use (PEP 562): pytest imports this package in every run of an
environment it is installed in (its ``pytest11`` entry point, :mod:`pytest_mlrepro.plugin`), and
a run that collects no manifest must not pay for numpy and the core.
"""

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

_EXPORTS = {
    "Invalid": "._schema",
    "BuildError": ".errors",
    "DatasetUnavailable": ".errors",
    "DeviceUnavailable": ".errors",
    "FrameworkUnavailable": ".errors",
    "GoldenError": ".errors",
    "IntegrityError": ".errors",
    "InvalidModel": ".errors",
    "ManifestError": ".errors",
    "MlreproError": ".errors",
    "NonFiniteOutputs": ".errors",
    "SampleError": ".errors",
    "SignatureError": ".errors",
    "Unavailable": ".errors",
    "Evaluation": ".evaluation",
    "evaluate": ".evaluation",
    "Results": ".goldens",
    "Manifest": ".manifest",
    "load_manifest": ".manifest",
    "State": ".pipeline",
    "Step": ".pipeline",
    "Tensor": ".pipeline",
    "register_step": ".pipeline",
    "artifact_builder": ".registry",
    "model_builder": ".registry",
    "Settings": ".settings",
}
"""Each export and the module it comes from."""


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
