"""The files whose change can change a manifest's verdict, resolved as the run resolves them,
without reading a file or running a builder."""

from __future__ import annotations

import inspect
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .. import registry
from ..diagnosis import sensitivity_table_path
from ..errors import ManifestError
from ..goldens import golden_path
from ..manifest import FileRef, Manifest
from ..runners import package_dir
from ..settings import Settings


@dataclass(frozen=True)
class Dependency:
    """A file, or a folder (every file under it), that a manifest depends on through ``what``."""

    path: Path
    what: str
    folder: bool = False

    def touched_by(self, changed: Path) -> bool:
        return changed == self.path or (self.folder and changed.is_relative_to(self.path))


def dependencies(manifest: Manifest, settings: Settings) -> list[Dependency]:
    found = [Dependency(manifest.path.resolve(), "the manifest")]
    found += _model(manifest)
    found += _dataset(manifest, settings)
    found += _goldens(manifest, settings)
    found += _code(manifest)
    return found


def _file_ref(manifest: Manifest, ref: FileRef, what: str) -> Iterator[Dependency]:
    base = manifest.path.resolve().parent
    if ref.package is not None and ref.path is not None:
        folder = package_dir(ref.package)
        if folder is not None:
            yield Dependency((folder / ref.path).resolve(), what)
    elif ref.path is not None:
        yield Dependency((base / ref.path).resolve(), what)
    # A cached file's bytes are pinned by its sha256 in the manifest; where it comes from can
    # still be the project's: a file:// URL, or a registered builder's code.
    if ref.url is not None and ref.url.startswith("file:"):
        local = urllib.parse.unquote(urllib.parse.urlsplit(ref.url).path)
        yield Dependency(Path(local).resolve(), f"{what}.url")
    if ref.build is not None:
        yield from _source(registry.get_artifact_builder(ref.build), f"{what}.build")


def _model(manifest: Manifest) -> Iterator[Dependency]:
    model = manifest.model
    if model.file is not None:
        yield from _file_ref(manifest, model.file, "model.file")
        if model.file.path is not None and model.external_data:
            folder = (manifest.path.resolve().parent / model.file.path).resolve().parent
            for location in model.external_data:
                yield Dependency((folder / location).resolve(), "model.external_data")
    if model.weights is not None:
        yield from _file_ref(manifest, model.weights, "model.weights")
    if model.builder is not None:
        yield from _source(registry.get_model_builder(model.builder), "model.builder")


def _dataset(manifest: Manifest, settings: Settings) -> Iterator[Dependency]:
    ds, base = manifest.dataset, manifest.path.resolve().parent
    yield Dependency((base / ds.checksums).resolve(), "dataset.checksums")
    if ds.labels_dir is not None:
        yield Dependency((base / ds.labels_dir).resolve(), "dataset.labels_dir", folder=True)
    # A data mirror kept inside the repository: its images and labels are versioned too.
    for mirror in settings.data_mirrors:
        yield Dependency((mirror / ds.name).resolve(), "dataset (mirror)", folder=True)


def _goldens(manifest: Manifest, settings: Settings) -> Iterator[Dependency]:
    try:
        golden = golden_path(manifest, settings)
    except ManifestError:  # an invalid golden: path is an error item of its own
        return
    yield Dependency(golden.resolve(), "golden")
    table = sensitivity_table_path(golden, settings.golden_dir)
    yield Dependency(table.resolve(), "golden (pitfall table)")
    # The latency goldens: one file per hardware key under golden/latency/<name>/.
    latency = settings.golden_dir / "latency" / manifest.name
    yield Dependency(latency.resolve(), "golden (latency)", folder=True)


def _code(manifest: Manifest) -> Iterator[Dependency]:
    for step in manifest.input.preprocess:
        yield from _source(type(step), f"preprocess.{step.op}")


def _source(code: object, what: str) -> Iterator[Dependency]:
    try:
        file = inspect.getsourcefile(code)  # type: ignore[arg-type]
    except TypeError:  # a builtin, or no builder registered (None): no source file
        return
    if file is not None:
        yield Dependency(Path(file).resolve(), what)
