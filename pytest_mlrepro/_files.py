"""Small file helpers shared by the cache, the data sets and the golden store."""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from .errors import MlreproError

try:  # POSIX only: importing the plugin must still work elsewhere (it loads in every pytest run)
    import fcntl as _fcntl
except ImportError:  # pragma: no cover - Windows
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


def sha256_file(path: Path) -> str:
    """Lowercase hex sha256, read in 1 MiB blocks (hashlib releases the GIL: threads hash in
    parallel)."""
    digest = hashlib.sha256()
    view = memoryview(bytearray(1 << 20))
    with open(path, "rb", buffering=0) as stream:
        while size := stream.readinto(view):
            digest.update(view[:size])
    return digest.hexdigest()


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock between processes (pytest-xdist workers) on ``path``."""
    fcntl = fcntl_module()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


STALE_AFTER_S = 60.0
"""A temporary file of :func:`atomic_write_bytes` older than this whose writer holds no lock on
it was left by a killed writer."""


def _temp_pattern(path: Path) -> str:
    return f".{glob.escape(path.name)}.*.tmp"


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, never a part.

    The data goes to a temporary file beside ``path`` (``.<name>.<random>.tmp``), is synced, and
    is renamed over ``path``. The writer holds an exclusive lock on the temporary file until the
    rename, so that :func:`stale_temp_files` can tell a killed writer's leftover from a live one.
    """
    fcntl = fcntl_module()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)  # released when the file closes
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def stale_temp_files(path: Path, older_than: float = STALE_AFTER_S) -> list[Path]:
    """Temporary files that writers of ``path`` killed mid-write left behind: older than
    ``older_than`` seconds and locked by no process (a live writer holds its lock)."""
    import time

    if _fcntl is None:  # no locks to tell a live writer from a dead one: claim none stale
        return []
    fcntl = _fcntl
    stale = []
    now = time.time()
    for candidate in sorted(path.parent.glob(_temp_pattern(path))):
        try:
            if now - candidate.lstat().st_mtime < older_than or not candidate.is_file():
                continue
            with open(candidate, "rb") as fh:
                try:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a writer is still at work
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        except OSError:
            continue
        stale.append(candidate)
    return stale


def remove_stale_temp_files(path: Path, older_than: float = STALE_AFTER_S) -> list[Path]:
    """Delete what :func:`stale_temp_files` finds; return what was deleted."""
    removed = []
    for candidate in stale_temp_files(path, older_than):
        with contextlib.suppress(FileNotFoundError):
            candidate.unlink()
            removed.append(candidate)
    return removed
