"""The one way a golden file is written: directory confined, a lock per golden between processes,
compare-and-swap under it (GoldenChanged), then the atomic replacement."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .._files import (
    FileTooLarge,
    NotARegularFile,
    atomic_write_bytes,
    file_lock,
    read_bounded,
    remove_stale_temp_files,
)
from ..errors import OutputError
from ..settings import Settings, golden_dir_escape

MAX_BYTES = 256 * (1 << 20)
"""The largest golden file hashed again before a write (the readers' own limit)."""


class GoldenChanged(OutputError):
    """Another run wrote the golden since this writer read it: not written over."""


@dataclass(frozen=True)
class Based:
    """The sha256 of the golden's bytes as the writer read them, None when there was no file."""

    digest: str | None


@contextlib.contextmanager
def golden_lock(settings: Settings, path: Path, what: str = "golden") -> Iterator[None]:
    """Hold this golden's lock: what is read inside cannot change before a write in it."""
    escape = golden_dir_escape(settings)
    if escape is not None:
        raise OutputError(
            f"{escape}: the {what} would be written there, so it is not written. Make the golden "
            "directory a real folder inside the project, or allow the target with the ini key "
            "mlrepro_allowed_roots"
        )
    # In the cache, a shared place (confined like its model files), not in the golden directory.
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:16]
    lock = settings.cache_dir / "locks" / f"golden-{digest}.lock"
    held = False
    try:
        with file_lock(lock, inside=settings.cache_dir):
            held = True
            yield
    except OSError as exc:
        if held:  # an OSError of the block itself: not the lock's
            raise
        raise OutputError(f"{lock}: cannot lock the {what} {path}: {exc}") from None


def current_digest(path: Path, golden_dir: Path | None) -> str | None:
    """None when there is no file; what cannot be hashed gets a digest no read gave."""
    try:
        raw = read_bounded(path, MAX_BYTES, inside=golden_dir)
    except (NotARegularFile, FileTooLarge, OSError) as exc:
        return f"unreadable: {exc}"
    return None if raw is None else hashlib.sha256(raw).hexdigest()


def replace_locked(
    path: Path,
    data: bytes,
    settings: Settings,
    based_on: Based,
    *,
    what: str = "golden",
    rerun: str = "",
) -> None:
    """Compare-and-swap; call it holding :func:`golden_lock` for ``path``."""
    now = current_digest(path, settings.golden_dir)
    if now != based_on.digest:
        happened = "was created" if based_on.digest is None else "changed"
        again = f"; run `{rerun}` again to work from the {what} as it is now" if rerun else ""
        raise GoldenChanged(
            f"{path}: the {what} {happened} since this run read it (another run wrote it "
            f"meanwhile): this run's {what} was not written over it, the file is left as that "
            f"run wrote it{again}"
        )
    if path.parent.is_dir() and not path.parent.is_symlink():
        remove_stale_temp_files(path)
    atomic_write_bytes(path, data, what=what, inside=settings.golden_dir)


def write_golden(
    path: Path,
    data: bytes,
    settings: Settings,
    based_on: Based,
    *,
    what: str = "golden",
    rerun: str = "",
) -> None:
    """OutputError (GoldenChanged when another run wrote it since ``based_on`` was read) leaves
    the file as it was."""
    with golden_lock(settings, path, what):
        replace_locked(path, data, settings, based_on, what=what, rerun=rerun)
