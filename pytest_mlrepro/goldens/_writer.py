"""The one way a golden file is written, whoever writes it: the golden directory confined (no
link out of the project), one lock per golden between processes (in the cache, never committed),
compare-and-swap under it (a golden changed since the writer read it is never written over:
GoldenChanged), then the atomic replacement."""

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
    """The golden changed between the writer's read and its write (another run wrote it): not
    written over; the message names the file and the command to run again."""


@dataclass(frozen=True)
class Based:
    """What a write is based on: the sha256 of the golden file's bytes as the writer read them,
    None when there was no file."""

    digest: str | None


@contextlib.contextmanager
def golden_lock(settings: Settings, path: Path, what: str = "golden") -> Iterator[None]:
    """The golden directory checked, then this golden's lock held: what is read inside the block
    cannot change before a write in it (every writer of pytest-mlrepro takes the lock)."""
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
    """The sha256 of the file at ``path`` now, None when there is none. Something that cannot
    be hashed (a symlink, a FIFO, a file over the limit) has a digest no read gave."""
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
    """Steps 3 and 4 of the module: call it holding :func:`golden_lock` for ``path``.
    ``rerun``: the command that records from the golden as it is now (for the refusal)."""
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
    """Write a golden file the one way (the module's four steps). OutputError (GoldenChanged
    when another run wrote it since ``based_on`` was read) leaves the file as it was."""
    with golden_lock(settings, path, what):
        replace_locked(path, data, settings, based_on, what=what, rerun=rerun)
