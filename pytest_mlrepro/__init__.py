"""pytest-mlrepro: reproducibility regression testing of ML models.

The core is usable without pytest::

    from pytest_mlrepro import Settings, evaluate, load_manifest

    manifest = load_manifest("manifests/efficientnet_lite0_onnx.yaml")
    result = evaluate(manifest, "cpu", Settings.for_project(Path(".")))
"""

from __future__ import annotations

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
from .pipeline import Step, register_step
from .registry import artifact_builder, model_builder
from .settings import Settings
from .spec import Manifest, load_manifest

__version__ = "0.1.0"


def evaluate(manifest: Manifest, device: str, settings: Settings):  # type: ignore[no-untyped-def]
    """Run ``manifest`` on ``device``: see :func:`pytest_mlrepro.evaluate.evaluate`."""
    from .evaluate import evaluate as _evaluate

    return _evaluate(manifest, device, settings)


__all__ = [
    "BuildError",
    "DatasetUnavailable",
    "DeviceUnavailable",
    "FrameworkUnavailable",
    "GoldenError",
    "IntegrityError",
    "InvalidModel",
    "Manifest",
    "ManifestError",
    "MlreproError",
    "NonFiniteOutputs",
    "SampleError",
    "Settings",
    "SignatureError",
    "Step",
    "Unavailable",
    "artifact_builder",
    "evaluate",
    "load_manifest",
    "model_builder",
    "register_step",
]
