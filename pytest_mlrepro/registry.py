"""Builders registered from Python and named by manifests, which never carry code."""

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
    """Register ``fn() -> model`` for ``model.builder: name``; ``input_size`` spares ``mlrepro
    init`` asking for ``--size``."""
    size = (input_size, input_size) if isinstance(input_size, int) else input_size
    if size is not None and (len(size) != 2 or min(size) < 1):
        raise ValueError(f"model_builder({name!r}): input_size {input_size!r} is no size")

    def register(fn: F) -> F:
        _model_builders[name] = (fn, None if size is None else (int(size[0]), int(size[1])))
        return fn

    return register


def artifact_builder(name: str, *, uses: Sequence[str] = ()) -> Callable[[F], F]:
    """Register ``fn(target: Path) -> None`` for ``model.file.build: name``; ``uses``: the PyPI
    names its bytes depend on."""

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
