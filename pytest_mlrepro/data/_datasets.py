"""Labelled image data sets from a mirror, the cache, or a download; every file is checked against
the manifest's checksum list before use, whatever its origin."""

from __future__ import annotations

import csv
import hashlib
import io
import os
import re
import stat
import threading
import urllib.parse
from collections.abc import Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path, PureWindowsPath
from typing import TYPE_CHECKING

from .._download import (
    DigestMismatch,
    RefusedRedirect,
    SourceUnreadable,
    Stopped,
    TooLarge,
    configured_download_cap,
    fetch_verified,
)
from .._files import (
    MIB,
    NotARegularFile,
    Unconfined,
    confine,
    file_lock,
    make_confined_folder,
    read_bounded,
    sha256_file,
    write_error,
)
from .._phases import phase
from .._visible import visible
from ..errors import DatasetUnavailable, IntegrityError, ManifestError
from ..manifest import name_problem
from ..settings import OutsideProject, Settings, resolve_inside
from ._shards import Shard

if TYPE_CHECKING:
    from .._yaml import KeyPath
    from ..manifest import Dataset, Manifest

DOWNLOAD_WORKERS = 8
"""Files downloaded at once."""
MAX_DATA_FILE_BYTES = 1 << 30
"""The largest data set file a download keeps: above the largest image a decode step accepts,
``MAX_IMAGE_PIXELS`` of 4 channels of 16 bits uncompressed (716 MB)."""
_HASH_WORKERS = max(4, min(16, os.cpu_count() or 1))

FileState = tuple[str, int, int, int, int, int]
"""A regular file as ``stat`` sees it: any write, rename or ``touch`` changes one of these (the
change time cannot be set back)."""


# The sha256 of the data files hashed, by the file's state when read, so that a session's items
# hash one data set once; a skipped verification is never what is decoded (Sample.read hashes
# again). A dict's single get and set need no lock.
_hashed: dict[FileState, str] = {}


def _file_state(path: Path, follow_symlinks: bool) -> FileState | None:
    try:
        st = os.stat(path, follow_symlinks=follow_symlinks)
    except OSError:
        return None  # the hashing says why
    if not stat.S_ISREG(st.st_mode):
        return None  # refused by the hashing (not a regular file)
    return (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _sha256_once(path: Path, *, follow_symlinks: bool) -> str:
    before = _file_state(path, follow_symlinks)
    known = _hashed.get(before) if before is not None else None
    if known is not None:
        return known
    digest = sha256_file(path, follow_symlinks=follow_symlinks)
    if before is not None and _file_state(path, follow_symlinks) == before:
        _hashed[before] = digest
    return digest


_WNID = re.compile(r"n\d{8}")
_LABEL = re.compile(r"[0-9]+")
_CHECKSUM_LINE = re.compile(r"([0-9A-Fa-f]{64}) [ *](.+)", re.DOTALL)
_ESCAPE = re.compile(r"\\(.?)", re.DOTALL)
_ESCAPES = {"\\": "\\", "n": "\n", "r": "\r"}


@dataclass(frozen=True)
class Sample:
    """One labelled image: ``id`` as the labels name it, ``path`` verified against ``sha256``."""

    id: str
    path: Path
    label: int
    sha256: str = ""

    def read(self) -> bytes:
        """Hashed in the read that returns them: a file replaced since verification is refused."""
        data = self.path.read_bytes()
        if self.sha256 and hashlib.sha256(data).hexdigest() != self.sha256:
            raise IntegrityError(
                f"{self.path} changed after it was verified: its sha256 is now "
                f"{hashlib.sha256(data).hexdigest()}, the checksum list pins {self.sha256}; "
                "refusing to use it (was the data set being replaced while this ran?)"
            )
        return data


@dataclass(frozen=True)
class ResolvedDataset:
    """A data set found and verified: its samples sorted by id, and where it came from in words."""

    root: Path
    samples: tuple[Sample, ...]
    class_names: tuple[str, ...] | None
    origin: str
    # {sample id: sha256} of the samples, as the checksum list gives it (every file was verified
    # against it): the identity of the data that a golden records (``goldens/_data_identity.py``).
    checksums: dict[str, str] = field(default_factory=dict)
    # The sha256 of the whole checksum list as parsed (every file of the data set with its
    # sha256, labels files included; all samples, not only a shard's): the data set's version,
    # the same for every shard of one version. "" when not known.
    identity: str = ""


MAX_LIST_BYTES = 256 * MIB
"""The largest list read (ImageNet's 1.28 M training images: about 100 MiB of sha256sum lines)."""


def checksums_identity(checksums: dict[str, str]) -> str:
    """The sha256 of a checksum list's entries, sorted: whatever the order, comments, endings."""
    digest = hashlib.sha256()
    for name in sorted(checksums):
        digest.update(f"{checksums[name]}  {name}\n".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def _read_list(path: Path) -> str:
    """A list file through the bounded reader: a FIFO, a device or an oversized file is an
    OSError, unread; ValueError when it is not UTF-8 text."""
    raw = read_bounded(path, MAX_LIST_BYTES, follow_symlinks=True)
    if raw is None:
        raise FileNotFoundError(2, "No such file or directory", str(path))
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_checksum_lines(path: Path) -> tuple[dict[str, str], dict[str, int]]:
    """``{name: digest}`` (names unescaped as sha256sum escapes them) and each name's line;
    ValueError naming the line for a malformed one."""
    text = _read_list(path)
    result: dict[str, str] = {}
    lines: dict[str, int] = {}
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw[:-1] if raw.endswith("\r") else raw
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        line = line.lstrip(" \t")
        escaped = line.startswith("\\")
        match = _CHECKSUM_LINE.fullmatch(line[1:] if escaped else line)
        if match is None:
            shown = line if len(line) <= 100 else line[:100] + "…"
            raise ValueError(
                f"{path}, line {number}: expected '<64 hex digits>  <file name>' "
                f"(sha256sum format), got {shown!r}"
            )
        digest, name = match.group(1).lower(), match.group(2)
        unknown = [e for e in _ESCAPE.findall(name) if e not in _ESCAPES] if escaped else []
        if unknown:
            raise ValueError(f"{path}, line {number}: unknown escape '\\{unknown[0]}' in the name")
        if escaped:
            name = _ESCAPE.sub(lambda escape: _ESCAPES[escape.group(1)], name)
        while name.startswith("./"):
            name = name[2:]
        if not name:
            raise ValueError(f"{path}, line {number}: the file name is empty")
        if result.get(name, digest) != digest:
            raise ValueError(
                f"{path}, line {number}: {name!r} is listed twice with different digests"
            )
        result[name] = digest
        lines.setdefault(name, number)
    return result, lines


@phase("data verify")
def resolve_dataset(
    manifest: Manifest, settings: Settings, shard: Shard | None = None
) -> ResolvedDataset:
    """The first folder holding every selected file, its files verified and labels read; ``shard``:
    only that shard's samples are looked for, verified and downloaded."""
    return _Resolver(manifest, settings, shard).resolve()


# What the labels and class-names files say: (id, label) sorted by id and limited, the names.
_Contents = tuple[list[tuple[str, int]], tuple[str, ...] | None]


class _Resolver:
    def __init__(self, manifest: Manifest, settings: Settings, shard: Shard | None = None) -> None:
        self.manifest = manifest
        self.settings = settings
        self.shard = shard
        self.ds: Dataset = manifest.dataset
        self.checksum_lines: dict[str, int] = {}
        self.checksum_path, self.checksums = self._load_checksums()
        self.meta: list[str] = []
        if self.ds.labels_from == "file":
            self._check_relative(("dataset", "labels"), self.ds.labels)
            self.meta.append(self.ds.labels)
        if self.ds.class_names is not None:
            self._check_relative(("dataset", "class_names"), self.ds.class_names)
            self.meta.append(self.ds.class_names)
        for name in self.meta:
            if name not in self.checksums:
                raise self._error(
                    ("dataset", "checksums"),
                    f"{self.checksum_path} has no line for {name!r}: every file of the data set "
                    "needs its sha256",
                )
        self.cache = settings.cache_dir / "datasets" / self.ds.name
        # Labels kept by the project next to its manifests: verified once, never downloaded.
        self.meta_dir: Path | None = None
        if self.ds.labels_dir is not None:
            try:
                self.meta_dir = resolve_inside(manifest.path.parent, self.ds.labels_dir, settings)
            except OutsideProject as exc:
                raise self._error(("dataset", "labels_dir"), str(exc)) from None
            missing = self._provide("project", self.meta_dir, self.meta, None)
            if missing:
                raise self._error(
                    ("dataset", "labels_dir"), f"{self.meta_dir / missing[0]} does not exist"
                )
        self.meta_in_data = [] if self.meta_dir is not None else list(self.meta)

    # -- the checksum list and the files it covers ---------------------------------------------

    def _error(self, field: KeyPath, message: str) -> ManifestError:
        return self.manifest.error(field, message)

    def _pinned_at(self, name: str) -> str:
        """``list:line: name``: where the checksum list pins ``name``."""
        line = self.checksum_lines.get(name)
        return f"{self.checksum_path}:{line}: {name}" if line else str(self.checksum_path)

    def _load_checksums(self) -> tuple[Path, dict[str, str]]:
        field = ("dataset", "checksums")
        try:
            path = resolve_inside(self.manifest.path.parent, self.ds.checksums, self.settings)
        except OutsideProject as exc:
            raise self._error(field, f"checksum list refused: {exc}") from None
        except (OSError, RuntimeError, ValueError) as exc:  # symlink loops, NUL bytes
            raise self._error(field, f"checksum list {self.ds.checksums!r}: {exc}") from None
        try:
            checksums, self.checksum_lines = read_checksum_lines(path)
        except FileNotFoundError:
            raise self._error(
                field,
                f"checksum list {path} does not exist (the path is "
                "relative to the manifest's folder)",
            ) from None
        except OSError as exc:
            raise self._error(
                field, f"cannot read the checksum list {path}: {exc.strerror or exc}"
            ) from None
        except ValueError as exc:
            raise self._error(field, str(exc)) from None
        return path, checksums

    def _check_relative(self, field: KeyPath, name: str, where: str = "") -> None:
        plain = name and "\0" not in name and "\\" not in name and not name.startswith("/")
        if not plain or PureWindowsPath(name).drive or ".." in name.split("/"):
            why = f"{where}{name!r} is not a plain relative path inside the data set folder"
            raise self._error(field, why)
        problem = name_problem(name)
        if problem is not None:  # OSError 36 (File name too long) at the first look otherwise
            raise self._error(field, f"{where}{problem}")

    # -- the search -----------------------------------------------------------------------------

    def resolve(self) -> ResolvedDataset:
        searched: list[str] = []
        mirrors = [("mirror", mirror / self.ds.name) for mirror in self.settings.data_mirrors]
        for kind, folder in [*mirrors, ("cache", self.cache)]:
            found = self._from_folder(kind, folder)
            if isinstance(found, ResolvedDataset):
                return found
            searched.append(f"{folder} ({found})")
        if self.ds.url is not None and self.settings.allow_download:
            return self._download(self.ds.url)
        raise self._unavailable(searched)

    def _confine(self, path: Path, *, file: bool = True) -> None:
        """The cache is a shared place: a path ``_files.confine`` refuses is not read."""
        try:
            confine(path, self.settings.cache_dir, file=file)
        except Unconfined as exc:
            raise self._unsafe_cache(exc) from None

    def _unsafe_cache(self, exc: Unconfined) -> IntegrityError:
        return IntegrityError(f"data set {self.ds.name!r}: the cache is not safe to use: {exc}")

    def _has(self, kind: str, path: Path) -> bool:
        """Whether ``path`` is a file (in the cache, not reached through a link)."""
        if kind != "cache":
            return path.is_file()
        self._confine(path)
        return path.exists()

    def _from_folder(
        self, kind: str, folder: Path, download_from: str | None = None
    ) -> ResolvedDataset | str:
        """The data set from ``folder``, else why not; ``download_from``: fetch what it lacks."""
        if kind == "cache":
            self._confine(folder, file=False)
        if not folder.is_dir():
            return "no such folder"
        missing_meta = self._provide(kind, folder, self.meta_in_data, download_from)
        if missing_meta and download_from is None:
            return f"no {missing_meta[0]}"
        contents = self._read(self.meta_dir or folder)
        if self.ds.labels_from == "folders":
            self._check_class_folders(folder)
        wanted = [sample_id for sample_id, _ in contents[0]]
        missing = self._provide(kind, folder, wanted, download_from)
        if missing and download_from is None:
            return f"{len(missing)} of the {len(wanted)} images are missing, e.g. {missing[0]!r}"
        origin = f"{kind} {folder}"
        if missing_meta or missing:  # downloaded (else the search stopped above)
            origin = f"downloaded from {download_from} into {folder}"
        return self._result(folder, contents, origin)

    def _provide(
        self, kind: str, folder: Path, names: Sequence[str], download_from: str | None
    ) -> list[str]:
        """The files of ``names`` that ``folder`` lacks, downloaded from ``download_from``."""
        missing = [name for name in names if not self._has(kind, folder / name)]
        if not missing or download_from is not None:
            self._verify(kind, folder, sorted(set(names) - set(missing)))
            self._fetch_all(download_from or "", missing)  # no name to fetch without a url
        return missing

    def _result(self, folder: Path, contents: _Contents, origin: str) -> ResolvedDataset:
        samples = tuple(
            Sample(name, folder / name, label, self.checksums[name]) for name, label in contents[0]
        )
        return ResolvedDataset(
            root=folder,
            samples=samples,
            class_names=contents[1],
            origin=origin,
            checksums={sample.id: self.checksums[sample.id] for sample in samples},
            identity=checksums_identity(self.checksums),
        )

    def _unavailable(self, searched: Sequence[str]) -> DatasetUnavailable:
        name = self.ds.name
        message = f"data set {name!r} is not available here; searched: " + "; ".join(searched)
        if not self.settings.data_mirrors:
            message += " (no data mirror is configured)"
        how = (
            f"Set MLREPRO_DATA (or the ini key mlrepro_data) to a folder that contains "
            f"'{name}/' with {self.ds.labels}"
            + (f", {self.ds.class_names}" if self.ds.class_names else "")
            + f" and the images listed in {self.checksum_path}"
        )
        if self.ds.url is not None:
            how += (
                f"; or, on a machine with internet access, allow downloads (they are off "
                f"here) to fetch it from {self.ds.url} into {self.cache}"
            )
        else:
            how += " (the manifest gives no 'url' to download it from)"
        return DatasetUnavailable(message, how=how)

    # -- verification ---------------------------------------------------------------------------

    def _verify(self, kind: str, folder: Path, names: Sequence[str]) -> None:
        """Check every file against its sha256 in threads; the first mismatch by name raises."""
        if not names:
            return
        paths = [folder / name for name in names]
        cached = kind == "cache"
        if cached:
            for path in paths:
                self._confine(path)

        def digest(path: Path) -> str:
            # In the cache, a link is never followed (nor hashed, nor its digest shown).
            return _sha256_once(path, follow_symlinks=not cached)

        try:
            with ThreadPoolExecutor(min(_HASH_WORKERS, len(paths))) as pool:
                digests = list(pool.map(digest, paths))
        except NotARegularFile as exc:
            raise IntegrityError(
                f"data set {self.ds.name!r}: {exc}: not read (a data set file must be a "
                "regular file)"
            ) from None
        except OSError as exc:
            raise DatasetUnavailable(
                f"cannot read {exc.filename or folder}: {exc.strerror or exc}",
                how=f"check that the files under {folder} are readable",
            ) from None
        bad = sorted(
            (name, self.checksums[name], actual)
            for name, actual in zip(names, digests, strict=True)
            if actual != self.checksums[name]
        )
        if bad:
            name, expected, actual = bad[0]
            more = f" ({len(bad) - 1} more files differ)" if len(bad) > 1 else ""
            fix = (
                "delete it to download it again"
                if kind == "cache"
                else "replace it with the copy the checksum list describes"
            )
            raise IntegrityError(
                f"{name!r} in the data set folder {folder} ({kind}) does not match "
                f"{self._pinned_at(name)}: expected sha256 {expected}, got {actual}{more}; {fix}"
            )

    # -- labels and class names -----------------------------------------------------------------

    def _read(self, folder: Path) -> _Contents:
        """The samples (the first ``limit``, then the shard's) and the class names."""
        names: tuple[str, ...] | None = None
        if self.ds.labels_from == "folders":
            samples, names = self._read_folders()
        else:
            samples = self._read_labels(folder / self.ds.labels)
        if self.ds.limit is not None:
            samples = samples[: self.ds.limit]
        if self.shard is not None:
            samples = [sample for sample in samples if self.shard.holds(sample[0])]
        if self.ds.class_names is not None:
            names = self._read_class_names(folder / self.ds.class_names)
        return samples, names

    def _class_folders(self) -> list[str]:
        """The class folders the checksum list names, sorted as ``ImageFolder`` sorts them."""
        return sorted({name.split("/")[0] for name in self.checksums if name.count("/") == 1})

    def _read_folders(self) -> tuple[list[tuple[str, int]], tuple[str, ...]]:
        """One folder per class: samples and labels from the checksum list, which pins each."""
        classes = self._class_folders()
        where = f"{self.checksum_path}: "
        if not classes:
            raise self._error(
                ("dataset", "checksums"),
                f"{where}names no '<class folder>/<image>' files, but the manifest says "
                "'labels_from: folders'",
            )
        if len(classes) != self.ds.classes:
            raise self._error(
                ("dataset", "classes"),
                f"{where}names {len(classes)} class folders ({classes[0]!r} … "
                f"{classes[-1]!r}), the manifest declares classes: {self.ds.classes}",
            )
        index = {name: i for i, name in enumerate(classes)}
        samples = sorted(
            (name, index[name.split("/")[0]])
            for name in self.checksums
            if name.count("/") == 1 and name not in self.meta
        )
        for sample_id, _ in samples:
            self._check_relative(("dataset", "checksums"), sample_id, where)
        return samples, tuple(classes)

    def _check_class_folders(self, folder: Path) -> None:
        """An unlisted class folder would shift later class indices for ``ImageFolder``: refused."""
        listed = set(self._class_folders())
        try:
            present = {p.name for p in folder.iterdir() if p.is_dir()}
        except OSError as exc:
            raise DatasetUnavailable(
                f"cannot list {folder}: {exc.strerror or exc}",
                how=f"check that {folder} is readable",
            ) from None
        extra = sorted(present - listed)
        if extra:
            raise IntegrityError(
                f"the data set folder {folder} has class folders that {self.checksum_path} does "
                f"not list: {', '.join(map(repr, extra[:5]))}; with one folder per class they "
                "would renumber the classes: remove them or list their images"
            )

    def _read_text(self, field: KeyPath, path: Path) -> str:
        try:
            return _read_list(path)
        except OSError as exc:
            raise self._error(field, f"cannot read {path}: {exc.strerror or exc}") from None
        except ValueError as exc:  # not UTF-8 text
            raise self._error(field, str(exc)) from None

    def _read_labels(self, path: Path) -> list[tuple[str, int]]:
        ds = self.ds
        field = ("dataset", "labels")
        reader = csv.DictReader(io.StringIO(self._read_text(field, path), newline=""))
        try:
            columns = reader.fieldnames
        except csv.Error as exc:
            raise self._error(field, f"{path}: not a valid CSV file ({exc})") from None
        if not columns:
            raise self._error(
                field,
                f"{path} is empty: expected a header line with the "
                f"columns {ds.file_column!r} and {ds.label_column!r}",
            )
        for key, column in (("file_column", ds.file_column), ("label_column", ds.label_column)):
            if column not in columns:
                known = ", ".join(map(repr, columns))
                why = f"{path} has no column {column!r}; its columns are {known}"
                raise self._error(("dataset", key), why)
        seen: dict[str, int] = {}
        samples: list[tuple[str, int]] = []
        uncovered: list[str] = []
        try:
            for row in reader:
                line = reader.line_num
                where = f"{path}:{line}: "
                sample_id, value = row.get(ds.file_column), row.get(ds.label_column)
                if sample_id is None or value is None:
                    raise self._error(field, f"{where}the row has fewer fields than the header")
                if not sample_id:
                    raise self._error(field, f"{where}the {ds.file_column!r} field is empty")
                self._check_relative(field, sample_id, where)
                if sample_id in seen:
                    raise self._error(
                        field,
                        f"{where}{sample_id!r} is listed again (first on line {seen[sample_id]})",
                    )
                seen[sample_id] = line
                # int() also takes '١' (an Arabic-Indic digit), '0_1' and '+1': a label is
                # plain ASCII digits, so that every reader of the file sees the same number.
                digits = value.strip(" \t")
                if not _LABEL.fullmatch(digits):
                    raise self._error(
                        field,
                        f"{where}the label {value!r} of {sample_id!r} is not an integer "
                        "written in plain decimal ASCII digits (0-9)",
                    )
                # Python refuses int() of over 4300 digits: a longer label is out of range.
                label = int(digits) if len(digits) <= 40 else ds.classes
                if not 0 <= label < ds.classes:
                    shown = label if len(digits) <= 40 else digits[:40] + "…"
                    raise self._error(
                        field,
                        f"{where}the label {shown} of {sample_id!r} is outside [0, {ds.classes}) "
                        f"(the manifest declares classes: {ds.classes})",
                    )
                if sample_id not in self.checksums:
                    uncovered.append(sample_id)
                samples.append((sample_id, label))
        except csv.Error as exc:
            raise self._error(field, f"{path}:{reader.line_num}: not valid CSV ({exc})") from None
        if not samples:
            raise self._error(field, f"{path} lists no samples")
        if uncovered:
            shown = ", ".join(map(repr, uncovered[:3])) + (", …" if len(uncovered) > 3 else "")
            raise self._error(
                ("dataset", "checksums"),
                f"{self.checksum_path} has no line for "
                f"{len(uncovered)} file(s) named in {path}: {shown}",
            )
        samples.sort()
        return samples

    def _read_class_names(self, path: Path) -> tuple[str, ...]:
        field = ("dataset", "class_names")
        names: list[str] = []
        for line in self._read_text(field, path).splitlines():
            text = line.strip()
            if not text:
                continue
            parts = text.split(maxsplit=1)
            if len(parts) == 2 and _WNID.fullmatch(parts[0]):
                text = parts[1].strip()
            names.append(text)
        if len(names) != self.ds.classes:
            raise self._error(
                field, f"{path} has {len(names)} classes, the manifest declares {self.ds.classes}"
            )
        return tuple(names)

    # -- download -------------------------------------------------------------------------------

    def _download(self, url: str) -> ResolvedDataset:
        base = url.rstrip("/")
        root = self.settings.cache_dir
        try:
            make_confined_folder(self.cache, root)
        except Unconfined as exc:
            raise self._unsafe_cache(exc) from None
        except OSError as exc:
            # Not "unavailable here": the cache cannot be written; the item fails.
            raise write_error(self.cache, exc, "data set cache folder") from None
        lock = self.cache.parent / f"{self.ds.name}.lock"
        try:
            with file_lock(lock, inside=root):
                # Another process may have fetched some or all of it while we waited for the lock.
                found = self._from_folder("cache", self.cache, base)
        except Unconfined as exc:
            raise self._unsafe_cache(exc) from None
        except OSError as exc:
            raise DatasetUnavailable(
                f"cannot lock {lock}: {exc.strerror or exc}",
                how="set MLREPRO_CACHE to a writable folder",
            ) from None
        assert isinstance(found, ResolvedDataset)  # a download leaves no file missing
        return found

    def _fetch_all(self, base: str, names: Sequence[str]) -> None:
        """Download ``names`` in parallel; on the first failure stop the others and raise it."""
        if not names:
            return
        stop = threading.Event()
        with ThreadPoolExecutor(min(DOWNLOAD_WORKERS, len(names))) as pool:
            futures: dict[Future[None], str] = {
                pool.submit(self._fetch, base, name, stop): name for name in names
            }
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)
            if any(future.exception() is not None for future in done):
                stop.set()
                for future in futures:
                    future.cancel()
        failures = sorted(
            (futures[future], error)
            for future in futures
            if not future.cancelled()
            and (error := future.exception()) is not None
            and not isinstance(error, Stopped)
        )
        if failures:
            raise failures[0][1]

    def _fetch(self, base: str, name: str, stop: threading.Event) -> None:
        """Download one file into the cache, verified; a failure leaves nothing under the name."""
        if stop.is_set():
            raise Stopped
        url = f"{base}/{urllib.parse.quote(name)}"
        dest = self.cache / name
        try:
            fetch_verified(
                url,
                dest,
                self.checksums[name],
                stop=stop,
                limit=min(MAX_DATA_FILE_BYTES, configured_download_cap() or MAX_DATA_FILE_BYTES),
                inside=self.settings.cache_dir,
            )
        except (RefusedRedirect, TooLarge, DigestMismatch) as exc:
            why = f": {visible(str(exc))}: refusing it"
            if isinstance(exc, TooLarge):
                why = f" downloaded from {url} is too large: {exc}"
            elif isinstance(exc, DigestMismatch):
                why = (
                    f" downloaded from {url} does not match {self._pinned_at(name)}: expected "
                    f"sha256 {self.checksums[name]}, got {exc.actual}"
                )
            raise IntegrityError(f"{name!r}{why}; nothing was kept in {self.cache}") from None
        except Unconfined as exc:
            raise self._unsafe_cache(exc) from None
        except SourceUnreadable as exc:
            raise DatasetUnavailable(
                f"cannot download data set {self.ds.name!r} file {url}: {visible(str(exc))}",
                how=(
                    f"check the network and the manifest's url; or set MLREPRO_DATA (or the "
                    f"ini key mlrepro_data) to a folder that contains '{self.ds.name}/'"
                ),
            ) from None
        except OSError as exc:
            # A local failure (disk full, I/O error) is not "unavailable here": the item fails.
            raise write_error(dest, exc, "downloaded data set file") from None
