"""Model files, cached and verified: nothing is loaded before its sha256 matches the manifest."""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import registry
from .._download import (
    DigestMismatch,
    RefusedRedirect,
    SourceUnreadable,
    TooLarge,
    configured_download_cap,
    fetch_verified,
    file_url,
    local_path,
)
from .._files import (
    NotARegularFile,
    Unconfined,
    atomic_write_bytes,
    confine,
    default_file_mode,
    file_lock,
    make_confined_folder,
    open_regular,
    read_bounded,
    sha256_file,
    write_error,
)
from .._names import record_command
from .._phases import phase
from .._visible import visible
from .._yaml import KeyPath
from ..errors import (
    BuildError,
    BuildMismatch,
    IntegrityError,
    MlreproError,
    Unavailable,
)
from ..fingerprint import cpu_identity, describe_cpu, installed_version, numeric_packages
from ..manifest import FileRef, Manifest
from ..settings import OutsideProject, Settings, resolve_inside, resolve_within
from ._vetting import MAX_ONNX_BYTES, check_size, read_onnx


def package_dir(package: str) -> Path | None:
    """The folder of the installed package ``package``, found without running its code:
    ``find_spec('a.b')`` would execute ``a``, so further parts go through ``PathFinder``."""
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
    """The file ``ref`` names, put into the cache if needed, not yet verified."""
    if ref.package is not None:
        assert ref.path is not None
        base = package_dir(ref.package)
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
        path = cache_path(ref.cache, settings)
        with _safe_cache(manifest, where):
            confine(path, settings.cache_dir)
            if not _present(path):
                _provide(manifest, ref, where, path, settings)
            confine(path, settings.cache_dir)
    if not path.is_file():
        raise manifest.error((*where, "path"), f"file not found: {path}")
    return path


def cache_path(name: str, settings: Settings) -> Path:
    return settings.cache_dir / "models" / name


def _present(path: Path) -> bool:
    """Whether a regular file is at ``path``, looked at without following a link."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


@contextlib.contextmanager
def _safe_cache(manifest: Manifest, where: KeyPath, after: str = "") -> Iterator[None]:
    """The cache is a shared place: a path ``_files.confine`` refuses is an integrity error."""
    try:
        yield
    except (Unconfined, NotARegularFile) as exc:
        why = f"the cache is not safe to use: {exc}{after}"
        raise _refused(manifest, (*where, "cache"), why) from None


def _refused(manifest: Manifest, where: KeyPath, why: str) -> IntegrityError:
    return IntegrityError(manifest.error(where, why).format())


def mirror_paths(name: str, settings: Settings) -> list[Path]:
    """``<mirror>/models/<name>`` for each data mirror, in order."""
    return [mirror / "models" / name for mirror in settings.data_mirrors]


def _origin_path(target: Path) -> Path:
    return target.with_name(target.name + ".origin.json")


def _provide(
    manifest: Manifest, ref: FileRef, where: KeyPath, target: Path, settings: Settings
) -> None:
    """From a mirror, else ``url``, else the builder, each checked before it takes its name."""
    assert ref.cache is not None
    mirrored = [p for p in mirror_paths(ref.cache, settings) if p.is_file()]
    url = _confined_url(manifest, ref, where, settings) if ref.url is not None else None
    if url is not None and not url.startswith("file:") and not settings.allow_download:
        raise Unavailable(
            f"{manifest.source}: model file {ref.cache!r} is not in the cache ({target.parent}) "
            f"and downloads are turned off (--mlrepro-no-download)",
            how=f"run once without --mlrepro-no-download to fetch it from {ref.url}, or place "
            f"it at {target}",
        )
    if not mirrored and url is None and ref.build is None:
        searched = ", ".join(str(p) for p in mirror_paths(ref.cache, settings)) or "none set"
        raise Unavailable(
            f"{manifest.source}: model file {ref.cache!r} is not in the cache "
            f"({target.parent}) nor in a model mirror ({searched}), and the manifest names "
            "neither a 'url' to fetch it from nor a builder",
            how=f"place the file at {target}, or set MLREPRO_DATA to a folder whose models/ "
            "holds it",
        )
    root = settings.cache_dir
    try:
        make_confined_folder(target.parent, root)
        # xdist workers may all want the same file: one provides it, the others wait and reuse
        # it. The lock file is never followed (a planted link there creates nothing outside).
        with file_lock(target.with_name(target.name + ".lock"), inside=root):
            confine(target, root)
            if _present(target):
                return
            if mirrored:
                source = file_url(mirrored[0])
                _fetch(manifest, ref, (*where, "sha256"), target, source, "mirror", settings)
            elif url is not None:
                _fetch(manifest, ref, (*where, "url"), target, url, "url", settings)
            else:
                _build(manifest, ref, where, target, settings)
    except Unconfined:
        raise  # the cache is not safe to use (_safe_cache), not a write error
    except OSError as exc:
        raise write_error(target.parent, exc, "cache") from None


def _confined_url(manifest: Manifest, ref: FileRef, where: KeyPath, settings: Settings) -> str:
    """``ref.url``; a ``file://`` URL only inside the project, an allowed root or a mirror."""
    assert ref.url is not None
    path = local_path(ref.url)
    if path is None:
        return ref.url
    roots = (settings.root, *settings.allowed_roots, *settings.data_mirrors)
    resolved = resolve_within(path.parent, path.name, roots)
    if resolved is None:
        why = (
            f"{ref.url!r} resolves to {path.resolve()}, outside the project ({settings.root}), "
            "the data mirrors and every allowed root; allow it with the ini key "
            "mlrepro_allowed_roots"
        )
        raise manifest.error((*where, "url"), why)
    return file_url(resolved)


def _fetch(
    manifest: Manifest,
    ref: FileRef,
    where: KeyPath,
    target: Path,
    url: str,
    kind: str,
    settings: Settings,
) -> None:
    shown = str(local_path(url) or url)
    limits = [configured_download_cap()]
    if where[:2] == ("model", "file") and manifest.model.format in ("onnx", "tflite"):
        limits.append(MAX_ONNX_BYTES)  # the limit of their serialisations (2 GiB)
    limit = min((n for n in limits if n is not None), default=None)
    try:
        fetch_verified(url, target, ref.sha256, limit=limit, inside=settings.cache_dir)
    except (DigestMismatch, RefusedRedirect, TooLarge) as exc:
        if isinstance(exc, DigestMismatch):
            why = (
                f"{shown} has sha256 {exc.actual}, the manifest pins {ref.sha256}: refusing it "
                "(another version of the model, or a damaged copy); nothing was put"
            )
        elif isinstance(exc, RefusedRedirect):
            why = (
                f"{visible(str(exc))}: refusing it (a redirect elsewhere is no copy of the "
                "model); nothing was put"
            )
        else:
            why = f"{shown} is too large for model file {ref.cache!r}: {exc}; nothing was kept"
        raise _refused(manifest, where, f"{why} in the cache ({target.parent})") from None
    except SourceUnreadable as exc:
        raise Unavailable(
            f"{manifest.source}: cannot fetch model file {ref.cache!r} from {shown}: "
            f"{visible(str(exc))}",
            how="check the network and model.file.url, or place the file at "
            f"{target} (or in models/ of a data mirror, MLREPRO_DATA)",
        ) from None
    except Unconfined:
        raise
    except OSError as exc:
        # A local failure (disk full, I/O error) is not "unavailable here": the item fails.
        raise write_error(target, exc, "model file") from None
    _record_origin(target, ref.sha256, manifest, {"source": kind, "from": shown}, settings)


def _record_origin(
    target: Path, sha256: str, manifest: Manifest, how: dict[str, Any], settings: Settings
) -> None:
    """Where the cached file came from, beside it, so that a later mismatch can say so."""
    record = {
        "file": target.name,
        "sha256": sha256,
        **how,
        "manifest": manifest.source,
        "written": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": cpu_identity(),
    }
    # The record only explains; a cache it cannot be written to still serves the model file.
    with contextlib.suppress(MlreproError):
        atomic_write_bytes(
            _origin_path(target),
            (json.dumps(record, indent=2, sort_keys=True) + "\n").encode(),
            what="cache origin record",
            inside=settings.cache_dir,
        )


def _read_origin(target: Path, root: Path | None = None) -> dict[str, Any] | None:
    try:
        data = read_bounded(_origin_path(target), 65536, inside=root)
        record = json.loads(data) if data is not None else None
    except (OSError, ValueError, RecursionError):
        return None
    return record if isinstance(record, dict) else None


def _build(
    manifest: Manifest, ref: FileRef, where: KeyPath, target: Path, settings: Settings
) -> None:
    assert ref.build is not None
    builder = registry.get_artifact_builder(ref.build)
    if builder is None:
        known = ", ".join(registry.registered()["artifact_builders"]) or "none"
        why = (
            f"no artifact builder {ref.build!r} is registered (registered: {known}); register "
            f"one in conftest.py with @pytest_mlrepro.artifact_builder({ref.build!r})"
        )
        raise manifest.error((*where, "build"), why)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    os.close(fd)
    try:
        builder(Path(tmp))
        try:
            # Never followed: a builder that left a link (to a file anywhere) built nothing here.
            produced = sha256_file(Path(tmp), follow_symlinks=False)
        except NotARegularFile as exc:
            raise BuildError(
                f"{manifest.source}: builder {ref.build!r} did not write a regular file at the "
                f"path it was given ({exc}): refusing its output"
            ) from None
        if produced != ref.sha256:
            raise _mismatch(manifest, ref, where, produced)
        os.chmod(tmp, default_file_mode())  # mkstemp's 0600: a shared cache could not read it
        os.replace(tmp, target)
    except (Unavailable, BuildError):
        raise
    except Exception as exc:
        raise BuildError(
            f"{manifest.source}: builder {ref.build!r} failed: {type(exc).__name__}: {exc}"
        ) from exc
    finally:
        # Whatever the builder left there (a file, a link, an empty folder) goes.
        with contextlib.suppress(OSError):
            if os.path.isdir(tmp) and not os.path.islink(tmp):
                os.rmdir(tmp)
            else:
                os.unlink(tmp)
    how = {"source": "build", "from": ref.build, "packages": _build_packages(ref.build)}
    _record_origin(target, ref.sha256, manifest, how, settings)


def _build_packages(builder: str) -> dict[str, str]:
    """The versions of the packages ``builder`` declares it uses (all numeric ones if none)."""
    installed = numeric_packages()
    uses = registry.artifact_builder_uses(builder)
    if not uses:
        return {name: version for name, version in installed.items() if version is not None}
    return {
        name: installed.get(name) or installed_version(name) or "not installed" for name in uses
    }


def _mismatch(manifest: Manifest, ref: FileRef, where: KeyPath, produced: str) -> BuildMismatch:
    assert ref.build is not None and ref.cache is not None
    machine = cpu_identity()
    packages = _build_packages(ref.build)
    used = ", ".join(f"{name} {version}" for name, version in sorted(packages.items()))
    head = manifest.error(
        (*where, "build"),
        f"builder {ref.build!r} wrote {ref.cache} with sha256 {produced}, the manifest pins "
        f"{ref.sha256}: this build does not reproduce the pinned bytes here",
    ).format()
    message = (
        f"{head}\n"
        f"  this machine: {describe_cpu(machine)}\n"
        f"  the build used: {used or 'no package recorded'}\n"
        "  Exporters and converters can write other bytes on another CPU with the very same "
        "packages (the example's ONNX and TFLite files do, built on AMD and on Intel).\n"
        "  Two ways forward:\n"
        f"    - fetch the pinned bytes: give model.file.url, or put the file at "
        f"<mirror>/models/{ref.cache} (MLREPRO_DATA or the ini key mlrepro_data);\n"
        f"    - or pin this build: set model.file.sha256 to {produced} and record the goldens "
        f"again with it ({record_command(manifest.source)})"
    )
    return BuildMismatch(
        message, produced=produced, expected=ref.sha256, machine=machine, packages=packages
    )


@dataclass(frozen=True)
class VerifiedFile:
    """A model file that matched its pin: ``path`` for messages, ``local`` the copy to load."""

    path: Path
    local: Path


def _copy_hashing(source: Path, target: Path, *, follow_symlinks: bool = True) -> str:
    """Copy ``source`` to ``target`` in the read that hashes it; its sha256."""
    digest = hashlib.sha256()
    view = memoryview(bytearray(1 << 20))
    fd = open_regular(source, follow_symlinks=follow_symlinks)
    with open(fd, "rb", buffering=0) as src, open(target, "xb") as dst:
        while size := src.readinto(view):
            digest.update(view[:size])
            dst.write(view[:size])
    return digest.hexdigest()


@contextlib.contextmanager
def verified(
    manifest: Manifest, ref: FileRef, where: KeyPath, settings: Settings
) -> Iterator[VerifiedFile]:
    """The only way runners get a model file: the private copy hashed is the one loaded, so that
    a file replaced after the check never runs. Load it inside the block."""
    with phase("model verify"):
        path = locate(manifest, ref, where, settings)
        if where == ("model", "file"):
            check_size(path, manifest.model.format, manifest.source)  # before a byte is read
    with tempfile.TemporaryDirectory(prefix="mlrepro-model-") as private:
        local = Path(private) / path.name
        with phase("model verify"):
            # A link planted in the cache after it was confined is not read.
            with _safe_cache(manifest, where, after=": not read"):
                actual = _copy_hashing(path, local, follow_symlinks=ref.cache is None)
            if actual != ref.sha256:
                raise _integrity_error(manifest, ref, where, path, actual)
        yield VerifiedFile(path, local)


def _integrity_error(
    manifest: Manifest, ref: FileRef, where: KeyPath, path: Path, actual: str
) -> IntegrityError:
    line = manifest.error((*where, "sha256"), "").format().rstrip(": ")
    origin = _read_origin(path, path.parent.parent) if ref.cache is not None else None
    if origin is not None and origin.get("sha256") == actual:
        # Likely another pinned version of the same file name; but the record lives in the
        # cache, which others may write to: it explains, it never excuses (refused either way).
        return IntegrityError(
            f"{line}: the cached {path} is not the pinned file: the manifest pins "
            f"{ref.sha256}, the cache holds {actual}, which {_origin_words(origin)} (so says "
            f"the cache's own record, which explains but excuses nothing: the file is refused "
            f"either way). Another manifest version (or another job sharing this cache) likely "
            f"left it there; remove it to have the pinned file provided: rm {path}"
        )
    mismatch = f"{line}: sha256 mismatch for {path}: the manifest expects {ref.sha256}"
    if ref.cache is None:
        return IntegrityError(
            f"{mismatch}, the file has {actual} (tampered, truncated or replaced: refusing to run "
            "it)"
        )
    return IntegrityError(
        f"{mismatch}, the file has {actual}, and the cache has no record of writing it (tampered, "
        "truncated, placed by hand, or left by an older pytest-mlrepro): refusing to run it; "
        f"remove it to have the pinned file provided: rm {path}"
    )


def _origin_words(origin: dict[str, Any]) -> str:
    source = origin.get("source")
    how = {
        "build": f"was built by builder {origin.get('from')!r}",
        "mirror": f"was copied from the model mirror {origin.get('from')}",
        "url": f"was fetched from {origin.get('from')}",
    }.get(str(source), "was written by pytest-mlrepro")
    machine = origin.get("machine")
    on = f" on {describe_cpu(machine)}" if isinstance(machine, dict) else ""
    # Every part comes from a file in the cache: shown escaped, as data is on a terminal.
    return visible(f"{how} for {origin.get('manifest')} at {origin.get('written')}{on}")


def check_external_data(manifest: Manifest, model: VerifiedFile) -> None:
    """Each copied beside the private copy in the read that hashes it: the bytes verified are the
    bytes loaded."""
    model_path = model.path
    # Every location inside the model's folder, as `mlrepro init` reads them (_vetting).
    at_model_file = manifest.error(("model", "file"), "").format().rstrip(": ")
    locations = set(read_onnx(model_path, at_model_file, local=model.local)[1])
    declared = manifest.model.external_data or {}
    where = ("model", "external_data")
    unpinned = sorted(locations - declared.keys())
    if unpinned:
        lines = "\n".join(
            f"    {loc}: {_sha_or_missing(model_path.parent / loc)}" for loc in unpinned
        )
        why = (
            f"{model_path} keeps its weights in external data files that the manifest does not "
            f"pin: {', '.join(unpinned)}; pin each (after checking it is the file you mean) "
            f"under model:\n  external_data:\n{lines}"
        )
        raise _refused(manifest, ("model", "file"), why)
    for location in sorted(declared.keys() - locations):
        shown = ", ".join(sorted(locations)) or "none"
        raise manifest.error(
            (*where, location), f"the model reads no such external data file (it reads: {shown})"
        )
    for location in sorted(locations):
        path = model_path.parent / location
        if not path.is_file():
            raise _refused(manifest, (*where, location), f"external data file not found: {path}")
        copy = model.local.parent / location
        copy.parent.mkdir(parents=True, exist_ok=True)
        actual = _copy_hashing(path, copy)
        if actual != declared[location]:
            why = (
                f"sha256 mismatch for {path}: the manifest expects {declared[location]}, the "
                f"file has {actual} (the model's weights were changed, truncated or replaced: "
                "refusing to run it)"
            )
            raise _refused(manifest, (*where, location), why)


def _sha_or_missing(path: Path) -> str:
    return sha256_file(path) if path.is_file() else "(file not found)"
