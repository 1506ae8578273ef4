"""Small file helpers shared by the cache, the data sets and the golden store."""

from __future__ import annotations

import contextlib
import errno
import glob
import hashlib
import json
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, BinaryIO

from .errors import MlreproError, OutputError

try:  # POSIX only: importing the plugin must still work elsewhere (it loads in every pytest run)
    import fcntl as _fcntl
except ImportError:  # pragma: no cover - Windows
    # The ignore: mypy types the name as the module; None stands for its absence here.
    _fcntl = None  # type: ignore[assignment]

POSIX_ONLY = (
    "pytest-mlrepro runs on POSIX systems only (Linux, macOS): its caches, goldens and xdist "
    "locks need fcntl file locks, which this platform ({platform}) lacks"
)


def fcntl_module() -> ModuleType:
    """``fcntl``, or a clear error where the platform has none (the package is POSIX-only)."""
    if _fcntl is None:
        raise MlreproError(POSIX_ONLY.format(platform=sys.platform))
    return _fcntl


def open_regular(path: Path, *, follow_symlinks: bool = True) -> int:
    """Anything else (a FIFO, not waited on; a symlink unless ``follow_symlinks``) is
    NotARegularFile."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks:
            raise NotARegularFile(f"{path} is a symbolic link") from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise NotARegularFile(f"{path} is {_kind(info.st_mode)}")
    os.set_blocking(fd, True)
    return fd


def sha256_file(path: Path, *, follow_symlinks: bool = True) -> str:
    """Lowercase hex; hashlib releases the GIL, so threads hash in parallel."""
    digest = hashlib.sha256()
    view = memoryview(bytearray(1 << 20))
    fd = open_regular(path, follow_symlinks=follow_symlinks)
    with open(fd, "rb", buffering=0) as stream:
        while size := stream.readinto(view):
            digest.update(view[:size])
    return digest.hexdigest()


# -- shared places: a cache other users may write to -------------------------------------------

SHARE_SAFELY = (
    "To share a cache between users, make it a folder owned by a group they are all in, "
    "writable by that group and not by others, with the setgid bit so that what is created in "
    "it keeps the group: `chgrp GROUP DIR && chmod 2770 DIR` (see docs/manifest.md, 'Sharing a "
    "cache'); or give each user a cache of their own (MLREPRO_CACHE)"
)


def this_user() -> int:
    """The effective user id (the owner a shared place is compared against)."""
    return os.geteuid()


class Unconfined(OSError):
    """A path inside a confined root (the cache) that must not be used; nothing behind it read."""


def _refuse_strangers(path: Path, info: os.stat_result, what: str) -> None:
    if info.st_mode & stat.S_IWOTH and info.st_uid != this_user():
        raise Unconfined(
            f"{path} is a {what} that every user of this machine may write to, and it belongs to "
            f"another user (uid {info.st_uid}): anyone could plant links or files there, so it "
            f"is not used. {SHARE_SAFELY}"
        )


def confine(path: Path, root: Path, *, file: bool = True) -> None:
    """Unconfined unless every folder down to ``path`` is real, none writable by all and
    another's. Nothing is opened."""
    try:
        info = os.stat(root)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        raise Unconfined(f"{root} is {_kind(info.st_mode)}, not a folder")
    _refuse_strangers(root, info, "folder")
    if not path.is_relative_to(root):
        raise Unconfined(f"{path} is not inside {root}")
    parts = path.relative_to(root).parts
    current = root
    for index, part in enumerate(parts):
        current = current / part
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            return
        leaf = file and index == len(parts) - 1
        wanted = "a regular file" if leaf else "a folder"
        if not (stat.S_ISREG if leaf else stat.S_ISDIR)(info.st_mode):
            raise Unconfined(
                f"{current} is {_kind(info.st_mode)}, not {wanted}: nothing behind it is read or "
                "written (a link in a cache could lead anywhere)"
            )
        _refuse_strangers(current, info, "file" if leaf else "folder")


def make_confined_folder(folder: Path, root: Path) -> None:
    """Without following a link planted on the way."""
    confine(folder, root, file=False)
    root.mkdir(parents=True, exist_ok=True)
    current = root
    for part in folder.relative_to(root).parts:
        current = current / part
        with contextlib.suppress(FileExistsError):
            os.mkdir(current)  # mkdir never follows a link at the name: EEXIST
    confine(folder, root, file=False)


@contextlib.contextmanager
def file_lock(path: Path, *, inside: Path) -> Iterator[None]:
    """Between processes (xdist workers); a link planted at ``path`` is refused, never followed."""
    fcntl = fcntl_module()
    make_confined_folder(path.parent, inside)
    confine(path, inside)
    # O_NOFOLLOW holds with O_CREAT too: a link at the name, dangling or not, fails (ELOOP).
    flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CREAT
    try:
        fd = os.open(path, flags, default_file_mode())
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Unconfined(
                f"{path} is a symbolic link: a lock file is never followed; remove it"
            ) from None
        raise
    with open(fd, "a+b") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise Unconfined(f"{path} is {_kind(info.st_mode)}, not a lock file: remove it")
        _refuse_strangers(path, info, "file")
        os.set_blocking(fh.fileno(), True)
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


STALE_AFTER_S = 60.0  # an older temporary file that no writer locks was left by a killed one


class NotARegularFile(OSError):
    """A path that must be a plain file (or absent) is a symlink, a folder, a FIFO, a device..."""


class FileTooLarge(OSError):
    """A file larger than its reader's limit: refused before (or while) it is read."""

    def __init__(self, path: Path, size: str, limit: int) -> None:
        super().__init__(
            f"{path} is {size}, larger than the limit of {limit} bytes: refused without reading it"
        )
        self.size = size


class TooDeep(ValueError):
    """A JSON document nested deeper than its reader allows."""


_KINDS = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
)


def _kind(mode: int) -> str:
    return next((kind for test, kind in _KINDS if test(mode)), "not a regular file")


def check_real_folders(path: Path, inside: Path | None) -> None:
    """NotARegularFile for a symlink (it could lead anywhere) or file between ``inside`` and
    ``path``."""
    if inside is None or not path.is_relative_to(inside):
        return
    current = inside
    for part in path.relative_to(inside).parts[:-1]:
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except FileNotFoundError:
            return
        if not stat.S_ISDIR(mode):
            raise NotARegularFile(f"{current} is {_kind(mode)}, not a folder")


MIB = 1 << 20


def read_bounded(
    path: Path,
    limit: int,
    *,
    inside: Path | None = None,
    follow_symlinks: bool = False,
) -> bytes | None:
    """None: no file; FileTooLarge past ``limit`` even if it grows while read. The one reader of
    files others hand the tool, so that none blocks the run (NotARegularFile)."""
    check_real_folders(path, inside)
    try:
        fd = open_regular(path, follow_symlinks=follow_symlinks)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise FileTooLarge(path, f"{size} bytes", limit)
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(limit + 1 - size, 16 * MIB))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise FileTooLarge(path, "more than that (it grew while read)", limit)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows (the file holds finite numbers)")


def parse_json(raw: bytes, max_depth: int, *, allow_nan: bool = True) -> Any:
    """Every failure is a ValueError (TooDeep past ``max_depth``, also for a RecursionError)."""
    text = raw.decode("utf-8")
    try:
        document = json.loads(text, parse_constant=None if allow_nan else _refuse_constant)
    except RecursionError:
        raise TooDeep(f"nested deeper than {max_depth} levels") from None
    # An iterative walk: the depth check itself must not recurse.
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > max_depth:
                raise TooDeep(f"nested deeper than {max_depth} levels")
            children = value.values() if isinstance(value, dict) else value
            stack.extend((child, depth + 1) for child in children)
    return document


def default_file_mode() -> int:
    """0666 less the umask, as an editor makes a file (``mkstemp``'s 0600 shuts out a CI group
    sharing a cache, or another user reviewing a golden)."""
    # The umask read without setting it where Linux allows (a brief set races with threads).
    with (
        contextlib.suppress(OSError, ValueError),
        open("/proc/self/status", encoding="ascii", errors="replace") as fh,
    ):
        for line in fh:
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


# What to do about a write that failed, by errno: the message says what is wrong and the fix.
_WRITE_FIXES = {
    errno.ENOSPC: "the disk is full: free some space and run again",
    errno.EDQUOT: "the disk quota is exhausted: free some space and run again",
    errno.EFBIG: "the file is larger than this process may write (the file size limit, "
    "`ulimit -f`, or the file system's largest file): raise the limit and run again",
    errno.EROFS: "the file system is read-only: write to a writable checkout",
    errno.EACCES: "permission denied: make the folder writable for this user",
    errno.EPERM: "permission denied: make the folder writable for this user",
    errno.ENOTDIR: "a part of the path is a file, not a folder: move it away or choose "
    "another path",
    errno.EEXIST: "a part of the path exists and is not a folder: move it away or choose "
    "another path",
}


def write_error(path: Path, exc: OSError, what: str) -> OutputError:
    fix = _WRITE_FIXES.get(exc.errno or 0, f"{exc.strerror or exc}: fix that and run again")
    return OutputError(f"{path}: cannot write the {what}: {fix}; nothing was changed there")


@contextlib.contextmanager
def replacing(path: Path, *, suffix: str = ".tmp") -> Iterator[BinaryIO]:
    """Replaces ``path`` when the block ends without an exception; locked until then so that
    :func:`stale_temp_files` tells a killed writer's leftover from a live one."""
    fcntl = fcntl_module()
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    try:
        with os.fdopen(fd, "w+b") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)  # released when the file closes
            os.fchmod(fh.fileno(), default_file_mode())
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
            os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def atomic_write_bytes(
    path: Path, data: bytes, *, what: str = "file", inside: Path | None = None
) -> None:
    """Any failure is an OutputError naming the file and the fix, the old file intact."""
    try:
        check_real_folders(path, inside)
        with contextlib.suppress(FileNotFoundError):
            mode = os.lstat(path).st_mode
            if not stat.S_ISREG(mode):
                raise NotARegularFile(f"{path} is {_kind(mode)}")
        path.parent.mkdir(parents=True, exist_ok=True)
        with replacing(path) as fh:
            fh.write(data)
    except NotARegularFile as exc:
        raise OutputError(
            f"{exc}: refusing to replace it with the {what} (a {what} must be a regular "
            "file); remove it and run again"
        ) from None
    except OSError as exc:
        raise write_error(path, exc, what) from None
    with contextlib.suppress(OSError):  # the rename survives a power loss too
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def check_writable_folder(folder: Path, what: str) -> None:
    """Tried for real: permission bits say nothing for root or read-only mounts."""
    probe = folder
    while not probe.exists() and probe != probe.parent:
        if probe.is_symlink():  # a dangling symlink: mkdir would fail on it
            break
        probe = probe.parent
    try:
        if not probe.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(probe))
        fd, tmp = tempfile.mkstemp(prefix=".mlrepro-probe.", suffix=".tmp", dir=probe)
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        raise write_error(folder, exc, what) from None


def stale_temp_files(
    path: Path, older_than: float = STALE_AFTER_S, *, suffix: str = ".tmp"
) -> list[Path]:
    """Killed writers' leftovers: older than ``older_than`` seconds and locked by no process."""
    import time

    if _fcntl is None:  # no locks to tell a live writer from a dead one: claim none stale
        return []
    fcntl = _fcntl
    stale = []
    now = time.time()
    for candidate in sorted(path.parent.glob(f".{glob.escape(path.name)}.*{suffix}")):
        try:
            info = candidate.lstat()
            if now - info.st_mtime < older_than or not stat.S_ISREG(info.st_mode):
                continue
            with open(open_regular(candidate, follow_symlinks=False), "rb") as fh:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a writer is still at work
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        except OSError:
            continue
        stale.append(candidate)
    return stale


def remove_stale_temp_files(
    path: Path, older_than: float = STALE_AFTER_S, *, suffix: str = ".tmp"
) -> list[Path]:
    removed = []
    for candidate in stale_temp_files(path, older_than, suffix=suffix):
        with contextlib.suppress(FileNotFoundError):
            candidate.unlink()
            removed.append(candidate)
    return removed
