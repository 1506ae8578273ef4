"""Downloads that fail honestly and cost bounded (issue 31, point 4), against a real HTTP server
on 127.0.0.1: a declared or streamed length over the limit is refused (and the stream stopped),
transient failures are retried a bounded number of times and announced, redirects lead only to
http and https, a killed download's ``.part`` is cleaned like a golden's temporary file, and a
lock file planted as a link is never followed."""

from __future__ import annotations

import fcntl
import hashlib
import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pytest_mlrepro import _download
from pytest_mlrepro._download import (
    DownloadRetried,
    RefusedRedirect,
    SourceUnreadable,
    TooLarge,
    fetch_verified,
)
from pytest_mlrepro._files import Unconfined, confine, file_lock

pytestmark = pytest.mark.usefixtures("_no_proxy")  # tests/conftest.py

BODY = b"the pinned bytes\n" * 64
SHA = hashlib.sha256(BODY).hexdigest()

Reply = Callable[[BaseHTTPRequestHandler, int], None]
"""What the server does for the n-th request (0-based) of a path."""


class Server:
    def __init__(self, routes: dict[str, Reply]) -> None:
        self.counts: dict[str, int] = {}
        self.sent = 0  # body bytes the server managed to write
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                n = server.counts.get(self.path, 0)
                server.counts[self.path] = n + 1
                routes.get(self.path, not_found)(self, n)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(10)


@pytest.fixture
def serve() -> Iterator[Callable[[dict[str, Reply]], Server]]:
    servers: list[Server] = []

    def start(routes: dict[str, Reply]) -> Server:
        servers.append(Server(routes))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.fixture(autouse=True)
def _no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    # The backoff's length is not what these tests check: its count and its announcement are.
    monkeypatch.setattr(_download, "RETRY_DELAYS", (0.0, 0.0))


def body(handler: BaseHTTPRequestHandler, n: int) -> None:
    handler.send_response(200)
    handler.send_header("Content-Length", str(len(BODY)))
    handler.end_headers()
    handler.wfile.write(BODY)


def not_found(handler: BaseHTTPRequestHandler, n: int) -> None:
    handler.send_error(404)


def status(code: int) -> Reply:
    def reply(handler: BaseHTTPRequestHandler, n: int) -> None:
        handler.send_error(code)

    return reply


def first_then_body(first: Reply, times: int = 1) -> Reply:
    def reply(handler: BaseHTTPRequestHandler, n: int) -> None:
        (first if n < times else body)(handler, n)

    return reply


def reset(handler: BaseHTTPRequestHandler, n: int) -> None:
    """Close the connection with a TCP reset (SO_LINGER 0) before any reply."""
    handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    handler.connection.close()
    handler.close_connection = True


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_a_declared_length_over_the_limit_is_refused_before_a_byte_is_kept(
    serve: Callable[[dict[str, Reply]], Server], tmp_path: Path
) -> None:
    def huge(handler: BaseHTTPRequestHandler, n: int) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(100 << 30))  # 100 GiB: more than ONNX holds
        handler.end_headers()
        handler.wfile.write(BODY)

    server = serve({"/m.onnx": huge})
    with pytest.raises(TooLarge, match=r"declares 107374182400 bytes, more than the limit of "):
        fetch_verified(
            f"{server.url}/m.onnx", tmp_path / "m.onnx", SHA, limit=2**31 - 1, inside=tmp_path
        )
    assert leftovers(tmp_path) == [], "no file and no .part kept"


def test_a_stream_past_the_limit_is_stopped_there(
    serve: Callable[[dict[str, Reply]], Server], tmp_path: Path
) -> None:
    def endless(handler: BaseHTTPRequestHandler, n: int) -> None:
        handler.send_response(200)
        handler.end_headers()  # no Content-Length: the length is only known by reading
        chunk = b"\0" * (1 << 20)
        try:
            for _ in range(256):
                handler.wfile.write(chunk)
                server.sent += len(chunk)
        except OSError:
            pass

    server = serve({"/m.onnx": endless})
    with pytest.raises(TooLarge, match="passed the limit of 1048576 bytes"):
        fetch_verified(
            f"{server.url}/m.onnx", tmp_path / "m.onnx", SHA, limit=1 << 20, inside=tmp_path
        )
    server.close()  # waits for the handler: ``sent`` is final
    # The reader stopped after at most two chunks; what else was sent sat in socket buffers.
    assert server.sent < 64 << 20, "the server could not stream the 256 MiB it offered"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize(
    ("first", "said"),
    [(status(503), "503"), (status(500), "500"), (reset, "reset"), (status(429), "429")],
    ids=["503", "500", "reset", "429"],
)
def test_transient_failures_are_retried_and_announced(
    serve: Callable[[dict[str, Reply]], Server], tmp_path: Path, first: Reply, said: str
) -> None:
    server = serve({"/m.onnx": first_then_body(first, times=2)})
    with pytest.warns(DownloadRetried) as warned:
        fetch_verified(f"{server.url}/m.onnx", tmp_path / "m.onnx", SHA, inside=tmp_path)
    assert (tmp_path / "m.onnx").read_bytes() == BODY
    assert server.counts["/m.onnx"] == 3
    messages = [str(w.message) for w in warned]
    assert len(messages) == 2
    assert said in messages[0].lower() and "attempt 2 of 3" in messages[0]
    assert "attempt 3 of 3" in messages[1]


def test_a_timeout_is_retried(
    serve: Callable[[dict[str, Reply]], Server],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release = threading.Event()

    def silent(handler: BaseHTTPRequestHandler, n: int) -> None:
        release.wait(30)  # says nothing until the client has given up on it

    monkeypatch.setattr(_download, "DOWNLOAD_TIMEOUT", 0.2)
    server = serve({"/m.onnx": first_then_body(silent)})
    try:
        with pytest.warns(DownloadRetried, match="timed out"):
            fetch_verified(f"{server.url}/m.onnx", tmp_path / "m.onnx", SHA, inside=tmp_path)
    finally:
        release.set()
    assert (tmp_path / "m.onnx").read_bytes() == BODY


def test_retries_are_bounded_and_the_failure_says_how_many(
    serve: Callable[[dict[str, Reply]], Server], tmp_path: Path
) -> None:
    server = serve({"/m.onnx": status(503)})
    with (
        pytest.warns(DownloadRetried),
        pytest.raises(SourceUnreadable, match=r"gave up after 3 attempts"),
    ):
        fetch_verified(f"{server.url}/m.onnx", tmp_path / "m.onnx", SHA, inside=tmp_path)
    assert server.counts["/m.onnx"] == 3
    assert leftovers(tmp_path) == []


def test_a_missing_file_is_not_retried(
    serve: Callable[[dict[str, Reply]], Server], tmp_path: Path
) -> None:
    server = serve({})
    with pytest.raises(SourceUnreadable, match="404"):
        fetch_verified(f"{server.url}/m.onnx", tmp_path / "m.onnx", SHA, inside=tmp_path)
    assert server.counts["/m.onnx"] == 1


@pytest.mark.parametrize("target", ["ftp://127.0.0.1/m.onnx", "file:///etc/passwd"])
def test_redirects_lead_only_to_http_and_https(
    serve: Callable[[dict[str, Reply]], Server], tmp_path: Path, target: str
) -> None:
    def redirect(handler: BaseHTTPRequestHandler, n: int) -> None:
        handler.send_response(302)
        handler.send_header("Location", target)
        handler.end_headers()

    server = serve({"/m.onnx": redirect})
    with pytest.raises(RefusedRedirect, match="follows redirects only to http and https"):
        fetch_verified(f"{server.url}/m.onnx", tmp_path / "m.onnx", SHA, inside=tmp_path)
    assert leftovers(tmp_path) == []
    assert server.counts["/m.onnx"] == 1, "a refused redirect is not a transient failure"


def test_a_redirect_to_http_is_followed(
    serve: Callable[[dict[str, Reply]], Server], tmp_path: Path
) -> None:
    def redirect(handler: BaseHTTPRequestHandler, n: int) -> None:
        handler.send_response(302)
        handler.send_header("Location", "/elsewhere.onnx")
        handler.end_headers()

    server = serve({"/m.onnx": redirect, "/elsewhere.onnx": body})
    fetch_verified(f"{server.url}/m.onnx", tmp_path / "m.onnx", SHA, inside=tmp_path)
    assert (tmp_path / "m.onnx").read_bytes() == BODY


def test_a_killed_downloads_part_file_is_cleaned_like_a_stale_golden_temp_file(
    serve: Callable[[dict[str, Reply]], Server], tmp_path: Path
) -> None:
    stale = tmp_path / ".m.onnx.k1ll3d.part"
    stale.write_bytes(b"half a model")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    fresh = tmp_path / ".m.onnx.l1v3.part"  # a live download's, too young to be judged
    fresh.write_bytes(b"in progress")
    busy = tmp_path / ".m.onnx.b5sy.part"  # old, but its writer holds its lock: alive
    busy.write_bytes(b"a slow download")
    os.utime(busy, (old, old))
    server = serve({"/m.onnx": body})
    with open(busy, "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        fetch_verified(f"{server.url}/m.onnx", tmp_path / "m.onnx", SHA, inside=tmp_path)
    assert leftovers(tmp_path) == [".m.onnx.b5sy.part", ".m.onnx.l1v3.part", "m.onnx"]


def test_a_failed_download_leaves_no_part_file(
    serve: Callable[[dict[str, Reply]], Server], tmp_path: Path
) -> None:
    server = serve({"/m.onnx": body})
    with pytest.raises(_download.DigestMismatch):
        fetch_verified(f"{server.url}/m.onnx", tmp_path / "m.onnx", "0" * 64, inside=tmp_path)
    assert leftovers(tmp_path) == []


def test_a_lock_file_planted_as_a_link_is_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "m.onnx.lock").symlink_to(outside / "created")
    with (
        pytest.raises(Unconfined, match="is a symbolic link"),
        file_lock(cache / "m.onnx.lock", inside=cache),
    ):
        pass
    assert list(outside.iterdir()) == [], "nothing is created through the link"


def test_a_download_into_a_cache_folder_replaced_by_a_link_writes_nothing_there(
    serve: Callable[[dict[str, Reply]], Server], tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "models").symlink_to(outside, target_is_directory=True)
    server = serve({"/m.onnx": body})
    with pytest.raises(Unconfined, match="is a symbolic link, not a folder"):
        fetch_verified(f"{server.url}/m.onnx", cache / "models" / "m.onnx", SHA, inside=cache)
    assert list(outside.iterdir()) == []
    assert server.counts == {}, "nothing was even asked for"


def test_confine_allows_a_linked_root_and_refuses_links_below_it(tmp_path: Path) -> None:
    real = tmp_path / "real-cache"
    (real / "models").mkdir(parents=True)
    (real / "models" / "m.onnx").write_bytes(BODY)
    root = tmp_path / "cache"
    root.symlink_to(real, target_is_directory=True)  # the configured root may be a link
    confine(root / "models" / "m.onnx", root)
    (real / "models" / "n.onnx").symlink_to(real / "models" / "m.onnx")
    with pytest.raises(Unconfined, match=r"n\.onnx is a symbolic link, not a regular file"):
        confine(root / "models" / "n.onnx", root)
    fifo = real / "models" / "f.onnx"
    os.mkfifo(fifo)
    with pytest.raises(Unconfined, match="a FIFO"):
        confine(root / "models" / "f.onnx", root)


def test_a_retry_notice_turned_into_an_error_does_not_end_the_download(
    serve: Callable[[dict[str, Reply]], Server], tmp_path: Path
) -> None:
    import warnings

    server = serve({"/m.onnx": first_then_body(status(503))})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # as under pytest -W error
        fetch_verified(f"{server.url}/m.onnx", tmp_path / "m.onnx", SHA, inside=tmp_path)
    assert (tmp_path / "m.onnx").read_bytes() == BODY
