"""Model files: find them, build them into the cache when a builder is named, verify their sha256.

Nothing is loaded before its checksum matches the manifest.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import os
import tempfile
from pathlib import Path

from .. import registry
from .._files import file_lock, sha256_file
from .._yaml import Path as KeyPath
from ..errors import BuildError, IntegrityError, InvalidModel, Unavailable
from ..manifest import FileRef, Manifest
from ..settings import OutsideProject, Settings, resolve_inside
from ._onnx_files import NotOnnx, external_locations


def _package_dir(package: str) -> Path | None:
    """The folder of the installed package ``package`` (dotted names allowed), found without
    running any of its code: ``importlib.util.find_spec('a.b')`` would import (execute) ``a``,
    so only the top-level name goes through the import system's finders and each further part
    is looked up in its parent's folders by ``PathFinder``, which reads the file system only."""
    parts = package.split(".")
    if not all(part.isidentifier() for part in parts):
        return None
    try:
        found = importlib.util.find_spec(parts[0])  # a top-level spec: nothing is executed
        for part in parts[1:]:
            if found is None or found.submodule_search_locations is None:
                return None
            found = importlib.machinery.PathFinder.find_spec(
                part, list(found.submodule_search_locations)
            )
    except (ImportError, ValueError):
        return None
    if found is None or not found.submodule_search_locations:
        return None
    return Path(next(iter(found.submodule_search_locations))).resolve()


def locate(manifest: Manifest, ref: FileRef, where: KeyPath, settings: Settings) -> Path:
    """The file ``ref`` names, built into the cache if needed, not yet verified."""
    if ref.package is not None:
        assert ref.path is not None
        base = _package_dir(ref.package)
        if base is None:
            raise Unavailable(
                f"{manifest.source}: {'.'.join(map(str, where))}.package: Python "
                f"package {ref.package!r} is not installed",
                how=f"install the distribution that provides {ref.package!r}",
            )
        path = (base / ref.path).resolve()
        if not path.is_relative_to(base):
            raise manifest.error((*where, "path"), f"{ref.path!r} leaves package {ref.package!r}")
    elif ref.path is not None:
        try:
            path = resolve_inside(manifest.path.parent, ref.path, settings)
        except OutsideProject as exc:
            raise manifest.error((*where, "path"), str(exc)) from None
    else:
        assert ref.cache is not None
        path = settings.cache_dir / "models" / ref.cache
        if not path.is_file():
            _build(manifest, ref, where, path)
    if not path.is_file():
        raise manifest.error((*where, "path"), f"file not found: {path}")
    return path


def _build(manifest: Manifest, ref: FileRef, where: KeyPath, target: Path) -> None:
    if ref.build is None:
        raise Unavailable(
            f"{manifest.source}: model file {ref.cache!r} is not in the cache "
            f"({target.parent}) and the manifest names no builder",
            how=f"place the file at {target}",
        )
    builder = registry.get_artifact_builder(ref.build)
    if builder is None:
        known = ", ".join(registry.registered()["artifact_builders"]) or "none"
        raise manifest.error(
            (*where, "build"),
            f"no artifact builder {ref.build!r} is registered "
            f"(registered: {known}); register one in conftest.py with "
            f"@pytest_mlrepro.artifact_builder({ref.build!r})",
        )
    # xdist workers may all want the same artifact: one builds, the others wait and reuse it.
    with file_lock(target.with_name(target.name + ".lock")):
        if target.is_file():
            return
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        os.close(fd)
        try:
            builder(Path(tmp))
            if sha256_file(Path(tmp)) != ref.sha256:
                raise BuildError(
                    f"{manifest.source}: builder {ref.build!r} produced {ref.cache} with sha256 "
                    f"{sha256_file(Path(tmp))}, the manifest expects {ref.sha256}: the build is "
                    "not reproducible with the libraries installed here"
                )
            os.replace(tmp, target)
        except Unavailable:
            raise
        except BuildError:
            raise
        except Exception as exc:
            raise BuildError(
                f"{manifest.source}: builder {ref.build!r} failed: {type(exc).__name__}: {exc}"
            ) from exc
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def verified(manifest: Manifest, ref: FileRef, where: KeyPath, settings: Settings) -> Path:
    """Locate ``ref`` and check its sha256; the only way the runners get a model file."""
    path = locate(manifest, ref, where, settings)
    actual = sha256_file(path)
    if actual != ref.sha256:
        line = manifest.error((*where, "sha256"), "").format().rstrip(": ")
        raise IntegrityError(
            f"{line}: sha256 mismatch for {path}: the manifest expects "
            f"{ref.sha256}, the file has {actual} (tampered, truncated or "
            "replaced: refusing to run it)"
        )
    return path


def check_external_data(manifest: Manifest, model_path: Path) -> None:
    """Verify every external data file the (already verified) ONNX model at ``model_path`` makes
    ONNX Runtime read against ``model.external_data``: each pinned by its sha256, inside the
    model's folder. The model's own sha256 pins the set of locations; a file the manifest does
    not pin, or one whose content changed, is an integrity error (no update can absorb it)."""
    try:
        locations = external_locations(model_path.read_bytes())
    except NotOnnx as exc:
        raise InvalidModel(
            manifest.error(
                ("model", "file"),
                f"{model_path} is not a valid ONNX model (its protobuf does not parse: {exc}); "
                "check model.format, and re-export the model if the file is damaged",
            ).format()
        ) from None
    declared = manifest.model.external_data or {}
    folder = model_path.parent.resolve()
    where = ("model", "external_data")
    for location in sorted(locations):
        target = (folder / location).resolve()
        if Path(location).is_absolute() or not target.is_relative_to(folder):
            raise IntegrityError(
                manifest.error(
                    ("model", "file"),
                    f"{model_path} reads external data from {location!r}, outside the model's "
                    f"folder {folder}: refusing to load it",
                ).format()
            )
    unpinned = sorted(locations - declared.keys())
    if unpinned:
        lines = "\n".join(
            f"    {loc}: {_sha_or_missing(model_path.parent / loc)}" for loc in unpinned
        )
        raise IntegrityError(
            manifest.error(
                ("model", "file"),
                f"{model_path} keeps its weights in external data files that the manifest does "
                f"not pin: {', '.join(unpinned)}; pin each (after checking it is the file you "
                f"mean) under model:\n  external_data:\n{lines}",
            ).format()
        )
    for location in sorted(declared.keys() - locations):
        shown = ", ".join(sorted(locations)) or "none"
        raise manifest.error(
            (*where, location), f"the model reads no such external data file (it reads: {shown})"
        )
    for location in sorted(locations):
        path = model_path.parent / location
        if not path.is_file():
            raise IntegrityError(
                manifest.error((*where, location), f"external data file not found: {path}").format()
            )
        actual = sha256_file(path)
        if actual != declared[location]:
            raise IntegrityError(
                manifest.error(
                    (*where, location),
                    f"sha256 mismatch for {path}: the manifest expects {declared[location]}, the "
                    f"file has {actual} (the model's weights were changed, truncated or "
                    "replaced: refusing to run it)",
                ).format()
            )


def _sha_or_missing(path: Path) -> str:
    return sha256_file(path) if path.is_file() else "(file not found)"
