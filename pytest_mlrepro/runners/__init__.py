"""One adapter per framework, imported only when an item runs its model, so that collection
stays cheap."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from packaging.version import InvalidVersion, Version

from .._phases import phase
from ..errors import FrameworkUnavailable
from ..fingerprint import installed_version
from ..manifest import Manifest
from ..settings import Settings
from ._artifacts import cache_path as cache_path
from ._artifacts import package_dir as package_dir
from ._profiling import ProfiledCalls as ProfiledCalls
from ._profiling import ProfileUnavailable as ProfileUnavailable
from ._signature import fixed_size as fixed_size
from ._signature import model_channels as model_channels
from ._signature import model_layout as model_layout
from ._signature import shape_text as shape_text
from ._vetting import read_onnx as read_onnx
from ._vetting import vet_model_file as vet_model_file
from ._warnings import framework_warnings

# The distributions that provide each framework's import name (first found wins).
DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "onnxruntime": (
        "onnxruntime",
        "onnxruntime-gpu",
        "onnxruntime-openvino",
        "onnxruntime-directml",
    ),
    "torch": ("torch",),
    "tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-macos", "tensorflow-intel"),
    # TFLite runs on LiteRT's interpreter (tf.lite.Interpreter is deprecated): see tensorflow/
    "tflite": ("ai-edge-litert", "ai-edge-litert-nightly"),
}
EXTRAS = {"onnxruntime": "onnx", "torch": "torch", "tensorflow": "tf", "tflite": "tf"}


class Runner(Protocol):
    """A loaded model on one device; ``info`` records everything that can change its outputs."""

    info: dict[str, Any]

    def __call__(self, batch: np.ndarray) -> np.ndarray: ...

    def check_batch(self, batch: np.ndarray, layout: str) -> None: ...


@phase("framework import")
def check_framework(manifest: Manifest) -> str:
    """The installed version of the manifest's framework, or FrameworkUnavailable saying why."""
    name = manifest.framework.name
    version = installed_version(*DISTRIBUTIONS[name])
    install = f"pip install 'pytest-mlrepro[{EXTRAS[name]}]'"
    if version is None:
        raise FrameworkUnavailable(f"{name} is not installed", how=install)
    spec = manifest.framework.specifier
    try:
        # A local build tag (2.13.0+cpu) still satisfies '>=2.2'.
        ok = spec.contains(Version(version).public, prereleases=True)
    except InvalidVersion:
        ok = False
    if not ok:
        raise FrameworkUnavailable(
            f"{name} {version} is installed; the manifest requires {name}{spec}",
            how=f"install a matching version: pip install '{name}{spec}'",
        )
    # TensorFlow for a preprocessing step's backend (the framework's own was checked above).
    tf_backend = "tensorflow" in frameworks_of([manifest])
    if tf_backend and installed_version(*DISTRIBUTIONS["tensorflow"]) is None:
        raise FrameworkUnavailable(
            "a preprocessing step uses backend 'tf' and TensorFlow is not installed",
            how="pip install 'pytest-mlrepro[tf]'",
        )
    return version


def cuda_present() -> bool:
    """Whether an NVIDIA driver is visible, so that ``cuda`` items are generated."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return Path("/proc/driver/nvidia/version").exists() or shutil.which("nvidia-smi") is not None


def frameworks_of(manifests: Iterable[Manifest]) -> list[str]:
    """The frameworks that running ``manifests`` imports, installed or not, sorted."""
    names: set[str] = set()
    for manifest in manifests:
        names.add(manifest.framework.name)
        if any(getattr(s, "backend", None) == "tf" for s in manifest.input.preprocess):
            names.add("tensorflow")
    return sorted(names)


def _runner_class(name: str) -> Any:
    if name == "onnxruntime":
        from .onnx import OnnxRunner

        return OnnxRunner
    if name == "torch":
        from .torch import TorchRunner

        return TorchRunner
    from .tensorflow import TensorFlowRunner, TFLiteRunner, import_framework

    import_framework(name)
    return TFLiteRunner if name == "tflite" else TensorFlowRunner


def import_frameworks(names: Iterable[str]) -> None:
    """Import before the first item: a per-item time limit interrupting an import half-way fails
    every later item. One that does not import is left to its items to report."""
    for name in names:
        if installed_version(*DISTRIBUTIONS[name]) is not None:
            with framework_warnings(), contextlib.suppress(Exception):
                _runner_class(name)


@phase("model load")
def load_runner(
    manifest: Manifest, device: str, settings: Settings, *, shares_cpu: bool = False
) -> Runner:
    """``shares_cpu``: it takes turns with preprocessing, so idle threads must sleep, not spin
    (docs/measurements.md)."""
    name = manifest.framework.name
    try:
        with phase("framework import"):
            runner_class = _runner_class(name)
    except ImportError as exc:
        raise FrameworkUnavailable(
            f"{name} is installed but cannot be imported: {exc}",
            how=f"reinstall it: pip install 'pytest-mlrepro[{EXTRAS[name]}]'",
        ) from None
    extra = {"shares_cpu": shares_cpu} if name == "onnxruntime" else {}
    runner: Runner = runner_class.load(manifest, device, settings, **extra)
    return runner
