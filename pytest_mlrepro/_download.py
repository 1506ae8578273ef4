"""Fetching one file by URL (``http``, ``https`` or ``file``) into a folder: streamed, hashed as it
arrives, checked against its sha256 and moved into place atomically. Shared by the data sets
(``data/``) and the model files (``runners/_artifacts.py``): a failed or mismatching fetch never
leaves a file under the final name, and the bytes that were hashed are the bytes kept.

Errors are plain exceptions of this module; each caller words them for its own context (which
manifest, which checksum list, which setting to change).
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import io
import os
import tempfile
import threading
import urllib.parse
import urllib.request
from pathlib import Path

from ._files import default_file_mode

DOWNLOAD_TIMEOUT = 30.0
"""Seconds a download may wait for the server (connect, or between two reads)."""
_CHUNK = 1 << 20
SCHEMES = ("http", "https", "file")


class Stopped(Exception):
    """Another download of the same batch failed first; this one gave up."""


class SourceUnreadable(Exception):
    """The URL could not be read: network, HTTP status, a missing file. ``str()`` says why."""


class DigestMismatch(Exception):
    """The fetched bytes do not have the expected sha256; nothing was kept."""

    def __init__(self, actual: str) -> None:
        super().__init__(actual)
        self.actual = actual


def file_url(path: Path) -> str:
    """The ``file://`` URL of an absolute path."""
    return path.resolve().as_uri()


def local_path(url: str) -> Path | None:
    """The path a ``file://`` URL names, or None for any other URL."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "file":
        return None
    return Path(urllib.request.url2pathname(parts.path))


def fetch_verified(
    url: str, dest: Path, sha256: str, *, stop: threading.Event | None = None
) -> None:
    """Copy ``url``'s body to ``dest`` if its sha256 is ``sha256``.

    The body goes into a temporary file beside ``dest`` (mode 0666 less the umask, like every
    file the tool writes: a shared cache stays readable by its group), is hashed on the way,
    synced, and renamed over ``dest`` only when the hash matches. Raises SourceUnreadable,
    DigestMismatch, Stopped, or OSError for a local write failure; ``dest`` is then untouched.
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_name = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    temp = Path(temp_name)
    try:
        with os.fdopen(handle, "wb") as out:
            os.fchmod(out.fileno(), default_file_mode())
            actual = _stream(url, out, stop)
            out.flush()
            os.fsync(out.fileno())
        if actual != sha256:
            raise DigestMismatch(actual)
        os.replace(temp, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()


class _WriteFailed(Exception):
    """A local write failed while streaming (kept apart from errors of the source)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


def _stream(url: str, out: io.BufferedWriter, stop: threading.Event | None) -> str:
    digest = hashlib.sha256()
    path = local_path(url)
    if path is not None and not path.is_file():
        # urllib would open a FIFO and wait on it forever, or read a folder listing.
        raise SourceUnreadable(f"{path} is not a regular file" if path.exists() else "not found")
    request = urllib.request.Request(url, headers={"User-Agent": "pytest-mlrepro"})
    try:
        with urllib.request.urlopen(request, timeout=DOWNLOAD_TIMEOUT) as response:
            while chunk := response.read(_CHUNK):
                if stop is not None and stop.is_set():
                    raise Stopped
                digest.update(chunk)
                try:
                    out.write(chunk)
                except OSError as exc:
                    raise _WriteFailed(exc) from None
    except _WriteFailed as failed:
        raise failed.error from None
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise SourceUnreadable(str(exc)) from None
    return digest.hexdigest()
