"""The checks a model file passes before any framework opens it, shared by the runners and
``mlrepro init``. torch is imported only to vet a .pt2 archive."""

from __future__ import annotations

from pathlib import Path

from ..errors import IntegrityError, InvalidModel
from ..settings import resolve_within
from ._onnx_files import NotOnnx, external_locations

MAX_ONNX_BYTES = 2**31 - 1
"""protobuf refuses a message over 2 GiB, so no single ONNX file can be larger."""


def check_size(path: Path, fmt: str, source: str) -> None:
    """Refuse a file that cannot be a model of format ``fmt`` by its size alone, unread."""
    if fmt != "onnx":
        return  # torch, Keras and TFLite files are read lazily (zip members, mmap)
    size = path.stat().st_size
    if size > MAX_ONNX_BYTES:
        raise InvalidModel(
            f"{source}: {path} is {size} bytes, more than an ONNX file can be (protobuf's 2 GiB "
            "limit): not read. A model this large keeps its weights in external data files"
        )


def vet_model_file(path: Path, fmt: str, source: str) -> None:
    """Every check that runs before a framework opens the model file at ``path``."""
    check_size(path, fmt, source)
    if fmt == "torch_export":
        from .torch_archive import vet_export_archive  # imports torch

        vet_export_archive(path, source)


def read_onnx(path: Path, source: str, local: Path | None = None) -> tuple[bytes, dict[str, Path]]:
    """External data files confined to the model's folder; nothing is parsed by onnx yet."""
    check_size(path, "onnx", source)
    data = (local or path).read_bytes()
    try:
        locations = external_locations(data)
    except NotOnnx as exc:
        raise InvalidModel(
            f"{source}: {path} is not a valid ONNX model (its protobuf does not parse: {exc}); "
            "check model.format, and re-export the model if the file is damaged"
        ) from None
    return data, external_data_files(path, locations, source)


def external_data_files(path: Path, locations: set[str], source: str) -> dict[str, Path]:
    """Each external data ``location`` and its file, refused outside the model's folder."""
    folder = path.parent.resolve()
    files: dict[str, Path] = {}
    for location in sorted(locations):
        inside = (
            None if Path(location).is_absolute() else resolve_within(folder, location, [folder])
        )
        if inside is None:
            raise IntegrityError(
                f"{source}: {path} reads external data from {location!r}, outside the model's "
                f"folder {folder}: refusing to read it"
            )
        files[location] = inside
    return files
