"""``torch.export.load`` unpickles with ``weights_only=False``: a .pt2 is refused unless every
pickled part loads with ``weights_only=True``."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import torch

from ..errors import IntegrityError


def _refuse(source: str, path: Path, why: str) -> IntegrityError:
    return IntegrityError(
        f"{source}: refusing {path}: {why}; torch.export.load would unpickle it with "
        "weights_only=False, which can run code from the file. Re-export the model with "
        "torch.export.save (tensors only), or use format onnx, torchscript or state_dict"
    )


def weights_only_refusal(exc: BaseException) -> str:
    """The line of a ``weights_only=True`` refusal that names what the file wanted to import."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:  # the wording changes between torch releases
        if "GLOBAL" in line or "WeightsUnpickler error" in line:
            return line.removeprefix("WeightsUnpickler error: ")
    return lines[0] if lines else type(exc).__name__


def _loads_safely(data: bytes) -> str | None:
    """None if ``data`` (a ``torch.save`` blob) loads with ``weights_only=True``, else why not."""
    if not data:
        return None
    try:
        torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:
        return weights_only_refusal(exc)
    return None


def vet_export_archive(path: Path, source: str, shown: Path | None = None) -> None:
    """Raises :class:`IntegrityError` unless every pickled part loads with ``weights_only``."""
    shown = shown or path
    try:
        from torch.export.pt2_archive import constants as pt2
    except ImportError:
        raise _refuse(
            source, shown, f"torch {torch.__version__} has no .pt2 archive format to check"
        ) from None
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise IntegrityError(
            f"{source}: {shown} is not a torch.export archive (.pt2, a zip file): {exc}"
        ) from None
    with archive:
        names = archive.namelist()
        root = names[0].split("/", 1)[0] + "/" if names and "/" in names[0] else ""
        members = {n[len(root) :] if n.startswith(root) else n: n for n in names}

        def read(name: str) -> bytes | None:
            return archive.read(members[name]) if name in members else None

        archive_format = read(pt2.ARCHIVE_FORMAT_PATH)
        if archive_format is None or archive_format.decode(errors="replace").strip() != (
            pt2.ARCHIVE_FORMAT_VALUE
        ):
            raise _refuse(source, shown, "it is not a .pt2 archive written by torch.export.save")
        prefix, suffix = pt2.MODELS_FILENAME_FORMAT.split("{}")
        models = [
            n[len(prefix) : -len(suffix)]
            for n in members
            if n.startswith(prefix) and n.endswith(suffix)
        ]
        for model in models:
            blobs = {
                "sample inputs": pt2.SAMPLE_INPUTS_FILENAME_FORMAT.format(model),
                "weights (legacy format)": f"{pt2.WEIGHTS_DIR}{model}.pt",
                "constants (legacy format)": f"{pt2.CONSTANTS_DIR}{model}.pt",
            }
            for kind, directory, config_name in (
                ("weight", pt2.WEIGHTS_DIR, pt2.WEIGHTS_CONFIG_FILENAME_FORMAT.format(model)),
                ("constant", pt2.CONSTANTS_DIR, pt2.CONSTANTS_CONFIG_FILENAME_FORMAT.format(model)),
            ):
                config = read(config_name)
                if config is None:
                    continue
                try:
                    entries = json.loads(config)["config"]
                except (ValueError, KeyError, TypeError) as exc:
                    raise _refuse(source, shown, f"{config_name} is not readable ({exc})") from None
                for fqn, meta in entries.items():
                    name = str(meta.get("path_name", ""))
                    if name.startswith(
                        (pt2.CUSTOM_OBJ_FILENAME_PREFIX, pt2.OPAQUE_OBJ_FILENAME_PREFIX)
                    ):
                        raise _refuse(
                            source, shown, f"{kind} {fqn!r} is a pickled Python or custom object"
                        )
                    if meta.get("use_pickle"):
                        blobs[f"{kind} {fqn!r}"] = directory + name
            for what, name in blobs.items():
                data = read(name)
                why = None if data is None else _loads_safely(data)
                if why is not None:
                    raise _refuse(
                        source,
                        shown,
                        f"its {what} ({name}) does not load with weights_only=True ({why})",
                    )


__all__ = ["vet_export_archive", "weights_only_refusal"]
