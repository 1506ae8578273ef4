"""Builders registered from Python (``conftest.py`` or a plugin) and named by manifests.

A manifest never carries code; it names one of these:

* a **model builder** returns the model's architecture (e.g. a ``torch.nn.Module``) whose weights
  the runner then loads from the manifest's ``weights`` file, verified and with
  ``weights_only=True``;
* an **artifact builder** writes a model file (e.g. an ONNX export) to the path it is given; the
  result lands in the cache and must match the manifest's sha256 before anything runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

ModelBuilder = Callable[[], Any]
ArtifactBuilder = Callable[[Path], None]
F = TypeVar("F", bound=Callable[..., Any])

# Each model builder with the input size (height, width) it declares its module takes (mlrepro
# init reads it).
_model_builders: dict[str, tuple[ModelBuilder, tuple[int, int] | None]] = {}
# Each artifact builder with the distributions whose versions shape its bytes (named when a
# build does not reproduce its pin).
_artifact_builders: dict[str, tuple[ArtifactBuilder, tuple[str, ...]]] = {}


def model_builder(
    name: str, *, input_size: int | tuple[int, int] | None = None
) -> Callable[[F], F]:
    """Register ``fn() -> model`` under ``name``, for manifests with ``model.builder: name``.

    ``input_size``: the input size the module takes (S, or (height, width)); ``mlrepro init``
    writes the manifest for it instead of asking for ``--size``."""
    size = (input_size, input_size) if isinstance(input_size, int) else input_size
    if size is not None and (len(size) != 2 or min(size) < 1):
        raise ValueError(f"model_builder({name!r}): input_size {input_size!r} is no size")

    def register(fn: F) -> F:
        _model_builders[name] = (fn, None if size is None else (int(size[0]), int(size[1])))
        return fn

    return register


def artifact_builder(name: str, *, uses: Sequence[str] = ()) -> Callable[[F], F]:
    """Register ``fn(target: Path) -> None`` under ``name``, for ``model.file.build: name``.

    ``uses``: the distributions (PyPI names) the build's bytes depend on, e.g.
    ``("torch", "onnx", "protobuf")``; a build that does not reproduce its pin names their
    versions (left out: every numeric package installed)."""

    def register(fn: F) -> F:
        _artifact_builders[name] = (fn, tuple(uses))
        return fn

    return register


def get_model_builder(name: str) -> ModelBuilder | None:
    return _model_builders.get(name, (None, None))[0]


def model_input_size(name: str) -> tuple[int, int] | None:
    """The input size the model builder ``name`` declared, if it did."""
    return _model_builders.get(name, (None, None))[1]


def get_artifact_builder(name: str) -> ArtifactBuilder | None:
    return _artifact_builders.get(name, (None, ()))[0]


def artifact_builder_uses(name: str) -> tuple[str, ...]:
    return _artifact_builders.get(name, (None, ()))[1]


def registered() -> dict[str, list[str]]:
    return {
        "model_builders": sorted(_model_builders),
        "artifact_builders": sorted(_artifact_builders),
    }
