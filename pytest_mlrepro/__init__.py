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
"""

from __future__ import annotations

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
