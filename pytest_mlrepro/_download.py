"""Fetching one file by URL: streamed, hashed as it arrives and moved into place only if its
sha256 matches, so that the bytes hashed are the bytes kept."""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import IO, Any, BinaryIO

from ._files import confine, make_confined_folder, remove_stale_temp_files, replacing
from ._visible import visible

DOWNLOAD_TIMEOUT = 30.0
"""Seconds a download may wait for the server (connect, or between two reads)."""
_CHUNK = 1 << 20
REDIRECT_SCHEMES = ("http", "https")
"""Where a server may redirect a download: never to ``file:`` (a local file), ``ftp:`` or any
other scheme the manifest did not name."""

RETRY_DELAYS: Sequence[float] = (1.0, 4.0)
"""Seconds before each retry of a transient failure (reset, timeout, HTTP 5xx or 429): one flaky
reply does not fail a data set, a server that stays down fails it within seconds."""

PART_SUFFIX = ".part"

MAX_DOWNLOAD_ENV = "MLREPRO_MAX_DOWNLOAD"


def configured_download_cap() -> int | None:
    """``MLREPRO_MAX_DOWNLOAD`` in bytes, or None when unset."""
    value = os.environ.get(MAX_DOWNLOAD_ENV, "").strip()
    return int(value) if value.isdigit() else None


class DownloadRetried(UserWarning):
    """A download failed transiently and was tried again (it may then have succeeded)."""


class Stopped(Exception):
    """Another download of the same batch failed first; this one gave up."""


class SourceUnreadable(Exception):
    """The URL could not be read: network, HTTP status, a missing file. ``str()`` says why."""


class RefusedRedirect(Exception):
    """A redirect to a scheme other than http(s): refused as hostile, not as "unavailable"."""


class TooLarge(Exception):
    """The source is (or declares itself) larger than the limit: refused, nothing kept."""


class DigestMismatch(Exception):
    """The fetched bytes do not have the expected sha256; nothing was kept."""

    def __init__(self, actual: str) -> None:
        super().__init__(actual)
        self.actual = actual


def file_url(path: Path) -> str:
    return path.resolve().as_uri()


def local_path(url: str) -> Path | None:
    """The path a ``file://`` URL names, or None for any other URL."""
    parts = urllib.parse.urlsplit(url)
    return Path(urllib.request.url2pathname(parts.path)) if parts.scheme == "file" else None


def fetch_verified(
    url: str,
    dest: Path,
    sha256: str,
    *,
    stop: threading.Event | None = None,
    limit: int | None = None,
    inside: Path,
) -> None:
    """At most ``limit`` bytes, retrying transient failures; on any failure (this module's
    exceptions, Unconfined, OSError) ``dest`` is untouched."""
    make_confined_folder(dest.parent, inside)
    confine(dest, inside)
    remove_stale_temp_files(dest, suffix=PART_SUFFIX)
    with replacing(dest, suffix=PART_SUFFIX) as out:
        actual = _stream_with_retries(url, out, stop, limit)
        if actual != sha256:
            raise DigestMismatch(actual)
        confine(dest, inside)  # a link planted at the name meanwhile is not replaced


class _Transient(Exception):
    """A failure worth another attempt; ``str()`` says what it was."""


class _HttpOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to http or https (urllib's own handler also follows ``ftp:``)."""

    def http_error_302(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
    ) -> Any:
        location = headers.get("location") or headers.get("uri")
        if location is not None:
            target = urllib.parse.urljoin(req.full_url, location)
            if urllib.parse.urlsplit(target).scheme.lower() not in REDIRECT_SCHEMES:
                raise RefusedRedirect(
                    f"{req.full_url} redirects to {target!r}: a download follows redirects "
                    "only to http and https"
                )
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


_OPENER = urllib.request.build_opener(_HttpOnlyRedirects)


def _stream_with_retries(
    url: str, out: BinaryIO, stop: threading.Event | None, limit: int | None
) -> str:
    attempts = len(RETRY_DELAYS) + 1
    failures: list[str] = []
    for attempt, delay in enumerate((*RETRY_DELAYS, None)):
        out.seek(0)
        out.truncate()
        try:
            return _stream(url, out, stop, limit)
        except _Transient as exc:
            failures.append(str(exc))
        if delay is None:  # that was the last attempt
            break
        # Said; but a retry notice turned into an error (``-W error``) must not end the
        # download it announces.
        with contextlib.suppress(DownloadRetried):
            warnings.warn(
                DownloadRetried(
                    f"download of {visible(url)} failed ({visible(failures[-1])}); trying "
                    f"again in {delay:g} s (attempt {attempt + 2} of {attempts})"
                ),
                stacklevel=2,
            )
        if stop is not None:
            if stop.wait(delay):
                raise Stopped from None
        else:
            time.sleep(delay)
    raise SourceUnreadable(
        f"{failures[-1]} (gave up after {attempts} attempts: {'; '.join(failures)})"
    )


_TRANSIENT_ERRORS = (
    ConnectionResetError,
    ConnectionAbortedError,
    BrokenPipeError,
    TimeoutError,
    http.client.IncompleteRead,
    http.client.RemoteDisconnected,
)


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, urllib.error.HTTPError):
        return exc.code >= 500 or exc.code == 429
    if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException):
        return _is_transient(exc.reason)
    return isinstance(exc, _TRANSIENT_ERRORS)


def _stream(url: str, out: BinaryIO, stop: threading.Event | None, limit: int | None) -> str:
    digest = hashlib.sha256()
    # The source's chunks, written here: a local write's OSError is not the source's failure.
    with contextlib.closing(_chunks(url, stop, limit)) as chunks:
        for chunk in chunks:
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


def _chunks(
    url: str, stop: threading.Event | None, limit: int | None
) -> Generator[bytes, None, None]:
    path = local_path(url)
    if path is not None and not path.is_file():
        # urllib would open a FIFO and wait on it forever, or read a folder listing.
        raise SourceUnreadable(f"{path} is not a regular file" if path.exists() else "not found")
    request = urllib.request.Request(url, headers={"User-Agent": "pytest-mlrepro"})
    size = 0
    try:
        with _OPENER.open(request, timeout=DOWNLOAD_TIMEOUT) as response:
            declared = (response.headers.get("Content-Length") or "").strip()
            if limit is not None and declared.isdigit() and int(declared) > limit:
                raise TooLarge(
                    f"the server declares {int(declared)} bytes, more than the limit of {limit} "
                    "bytes: refused before a byte was read"
                )
            while chunk := response.read(_CHUNK):
                if stop is not None and stop.is_set():
                    raise Stopped
                size += len(chunk)
                if limit is not None and size > limit:
                    raise TooLarge(
                        f"the body passed the limit of {limit} bytes: the download was stopped "
                        "there"
                    )
                yield chunk
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if _is_transient(exc):
            raise _Transient(str(exc) or type(exc).__name__) from None
        raise SourceUnreadable(str(exc)) from None
