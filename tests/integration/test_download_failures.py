"""A fetch that failed for a reason other than "not available here" fails the item instead of
skipping it (issue 31, point 4), and a model larger than its format can hold is refused
before it fills the disk. A real HTTP server on 127.0.0.1."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from helpers import Project, sha256

pytestmark = pytest.mark.usefixtures("_no_proxy")


def cached(p: Project, ref: str) -> None:
    sha = sha256(p.assets / "models" / "tiny.onnx")
    text = p.manifest("tiny_onnx").replace(
        f"    path: ../models/tiny.onnx\n    sha256: {sha}\n",
        "".join(f"    {part.strip()}\n" for part in ref.format(sha=sha).split(",")),
    )
    p.make({"m.yaml": text})


@pytest.fixture
def huge_server() -> Iterator[str]:
    """Serves /m.onnx declaring 100 GiB (more than protobuf can hold), then a few bytes."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(100 << 30))
            self.end_headers()
            self.wfile.write(b"\0" * 1024)

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()
    thread.join(10)


def test_an_onnx_file_declared_larger_than_protobuf_holds_fails_unread(
    serial_project: Project, huge_server: str
) -> None:
    p = serial_project
    cached(p, f"cache: m.onnx, url: {huge_server}/m.onnx, sha256: {{sha}}")
    result = p.run("--mlrepro-update")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "is too large for model file 'm.onnx'" in out
    assert "declares 107374182400 bytes, more than the limit of 2147483647 bytes" in out
    models = Path(os.environ["MLREPRO_CACHE"]) / "models"
    assert sorted(p.name for p in models.iterdir()) == ["m.onnx.lock"], "no .part is left"


def test_a_configured_download_cap_is_enforced(
    serial_project: Project, huge_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = serial_project
    monkeypatch.setenv("MLREPRO_MAX_DOWNLOAD", "1000")
    cached(p, f"cache: m.onnx, url: {huge_server}/m.onnx, sha256: {{sha}}")
    result = p.run("--mlrepro-update")
    result.assert_outcomes(failed=1)
    assert "more than the limit of 1000 bytes" in result.stdout.str()


def test_a_fetch_that_fails_writing_the_cache_fails_the_item_not_skips_it(
    serial_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_mlrepro import _download

    def disk_full(*args: object) -> str:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    # What a full disk does to the copy into the cache (the run is in this process).
    monkeypatch.setattr(_download, "_stream", disk_full)
    p = serial_project
    cached(p, "cache: m.onnx, sha256: {sha}")
    mirror = p.path / "data" / "models"
    mirror.mkdir()
    (mirror / "m.onnx").write_bytes((p.assets / "models" / "tiny.onnx").read_bytes())
    result = p.run("--mlrepro-update")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "cannot write the model file: the disk is full" in out
    assert not (Path(os.environ["MLREPRO_CACHE"]) / "models" / "m.onnx").exists()


def test_a_redirect_to_ftp_fails_the_item_not_skips_it(serial_project: Project) -> None:
    class Redirect(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(302)
            self.send_header("Location", "ftp://127.0.0.1/m.onnx")
            self.end_headers()

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        p = serial_project
        url = f"http://127.0.0.1:{httpd.server_address[1]}/m.onnx"
        cached(p, f"cache: m.onnx, url: {url}, sha256: {{sha}}")
        result = p.run("--mlrepro-update")
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(10)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "redirects to 'ftp://127.0.0.1/m.onnx': a download follows redirects only to" in out
