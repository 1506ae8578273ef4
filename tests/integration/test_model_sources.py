"""Where a cached model file comes from: a model mirror, a URL (a real HTTP server on 127.0.0.1),
or a registered builder; each checked against the pin before it takes its name in the cache,
recorded in the cache, readable by the group, and explained when it does not match."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

import pytest
from helpers import Project, sha256
from machines import environment_of

from pytest_mlrepro.fingerprint import cpu_model

pytestmark = pytest.mark.usefixtures("_no_proxy", "_usual_umask")


@pytest.fixture
def _usual_umask() -> Iterator[None]:
    old = os.umask(0o022)
    yield
    os.umask(old)


class Server:
    """A real HTTP server on 127.0.0.1 serving one folder; ``requests`` lists the paths asked."""

    def __init__(self, folder: Path) -> None:
        self.requests: list[str] = []
        requests = self.requests

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                requests.append(self.path)
                super().do_GET()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(folder)))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> Server:
        import threading

        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(10)


def cached_manifest(project: Project, name: str, file_ref: str) -> str:
    """The tiny ONNX manifest with ``model.file`` replaced by ``file_ref`` (a flow mapping)."""
    sha = sha256(project.assets / "models" / "tiny.onnx")
    return project.manifest(name).replace(
        f"    path: ../models/tiny.onnx\n    sha256: {sha}\n",
        "".join(f"    {part.strip()}\n" for part in file_ref.split(",")),
    )


def cache(project: Project) -> Path:
    return Path(os.environ["MLREPRO_CACHE"]) / "models"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def serve_tiny(p: Project, tmp_path: Path, extra: bytes = b"") -> Path:
    """A folder to serve holding the tiny ONNX model's bytes (``extra`` appended)."""
    served = tmp_path / "served"
    served.mkdir()
    (served / "tiny.onnx").write_bytes((p.assets / "models" / "tiny.onnx").read_bytes() + extra)
    return served


def test_a_model_is_fetched_from_its_url_verified_cached_and_not_fetched_again(
    serial_project: Project, tmp_path: Path
) -> None:
    p = serial_project
    served = serve_tiny(p, tmp_path)
    sha = sha256(served / "tiny.onnx")
    with Server(served) as server:
        ref = f"cache: fetched.onnx, url: {server.url}/tiny.onnx, sha256: {sha}"
        p.make({"m.yaml": cached_manifest(p, "tiny_onnx", ref)})
        first = p.run("--mlrepro-update")
        first.assert_outcomes(passed=1)
        assert server.requests == ["/tiny.onnx"]
        second = p.run()
        second.assert_outcomes(passed=1)
        assert server.requests == ["/tiny.onnx"], "a cached model must not be fetched again"
    cached = cache(p) / "fetched.onnx"
    assert sha256(cached) == sha
    assert mode(cached) == 0o644, "cache files are written like goldens: 0666 less the umask"
    origin = json.loads((cache(p) / "fetched.onnx.origin.json").read_text())
    assert origin["source"] == "url" and origin["from"] == f"{server.url}/tiny.onnx"
    assert origin["sha256"] == sha and origin["manifest"] == "manifests/m.yaml"


def test_no_download_skips_a_model_that_only_a_url_gives_and_fetches_nothing(
    serial_project: Project, tmp_path: Path
) -> None:
    p = serial_project
    served = serve_tiny(p, tmp_path)
    with Server(served) as server:
        sha = sha256(served / "tiny.onnx")
        ref = f"cache: offline.onnx, url: {server.url}/tiny.onnx, sha256: {sha}"
        p.make({"m.yaml": cached_manifest(p, "tiny_onnx", ref)})
        offline = p.run("--mlrepro-update", "--mlrepro-no-download", "-rs")
        offline.assert_outcomes(skipped=1)
        offline.stdout.fnmatch_lines(
            [
                "*model file 'offline.onnx' is not in the cache*downloads are turned off "
                "(--mlrepro-no-download)*run once without --mlrepro-no-download*"
            ]
        )
        assert server.requests == []
        assert not (cache(p) / "offline.onnx").exists()
        strict = p.run("--mlrepro-update", "--mlrepro-no-download", "--mlrepro-strict")
        strict.assert_outcomes(failed=1)
        assert server.requests == []

        p.run("--mlrepro-update").assert_outcomes(passed=1)
        assert server.requests == ["/tiny.onnx"]
    # Once cached, the model needs no download: the flag changes nothing.
    p.run("--mlrepro-no-download").assert_outcomes(passed=1)


def test_a_fetched_model_that_does_not_match_its_pin_is_refused_and_not_kept(
    serial_project: Project, tmp_path: Path
) -> None:
    p = serial_project
    served = serve_tiny(p, tmp_path, extra=b"\0")
    pinned = sha256(p.assets / "models" / "tiny.onnx")
    with Server(served) as server:
        ref = f"cache: fetched.onnx, url: {server.url}/tiny.onnx, sha256: {pinned}"
        p.make({"m.yaml": cached_manifest(p, "tiny_onnx", ref)})
        result = p.run("--mlrepro-update")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    text = (p.path / "manifests" / "m.yaml").read_text()
    line = next(i for i, t in enumerate(text.splitlines(), 1) if "url:" in t)
    assert f"manifests/m.yaml:{line}: model.file.url: {server.url}/tiny.onnx has sha256 " in out
    assert f"{sha256(served / 'tiny.onnx')}, the manifest pins {pinned}: refusing it" in out
    assert "Traceback" not in out
    assert not (cache(p) / "fetched.onnx").exists()
    assert not list(cache(p).glob(".fetched.onnx.*")), "no partial download is left behind"
    assert not (p.path / "golden" / "tiny_onnx.json").exists()


def test_an_unreachable_url_names_the_url_and_how_to_provide_the_file(
    serial_project: Project, tmp_path: Path
) -> None:
    p = serial_project
    served = tmp_path / "served"
    served.mkdir()
    sha = sha256(p.assets / "models" / "tiny.onnx")
    with Server(served) as server:  # serves an empty folder: 404
        ref = f"cache: fetched.onnx, url: {server.url}/missing.onnx, sha256: {sha}"
        p.make({"m.yaml": cached_manifest(p, "tiny_onnx", ref)})
        result = p.run("--mlrepro-strict")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert f"cannot fetch model file 'fetched.onnx' from {server.url}/missing.onnx" in out
    assert "404" in out and "place the file at" in out


def test_a_model_mirror_provides_the_fixed_bytes_before_any_builder(
    serial_project: Project,
) -> None:
    p = serial_project
    sha = sha256(p.assets / "models" / "tiny.onnx")
    ref = f"cache: mirrored.onnx, build: never_called, sha256: {sha}"
    p.make({"m.yaml": cached_manifest(p, "tiny_onnx", ref)})
    mirror = p.path / "data" / "models"
    mirror.mkdir()
    (mirror / "mirrored.onnx").write_bytes((p.assets / "models" / "tiny.onnx").read_bytes())
    # A builder that would fail the item: the mirror's copy must come first.
    (p.path / "conftest.py").write_text(
        "import pytest_mlrepro\n\n"
        "@pytest_mlrepro.artifact_builder('never_called')\n"
        "def build(target):\n"
        "    raise RuntimeError('the builder ran although a mirror holds the file')\n"
    )
    result = p.run("--mlrepro-update")
    result.assert_outcomes(passed=1)
    origin = json.loads((cache(p) / "mirrored.onnx.origin.json").read_text())
    assert origin["source"] == "mirror"
    assert origin["from"] == str((mirror / "mirrored.onnx").resolve())


def test_a_file_url_outside_the_project_is_refused_with_its_line(
    serial_project: Project, tmp_path: Path
) -> None:
    p = serial_project
    outside = tmp_path / "outside.onnx"
    outside.write_bytes((p.assets / "models" / "tiny.onnx").read_bytes())
    ref = f"cache: fetched.onnx, url: {outside.as_uri()}, sha256: {sha256(outside)}"
    p.make({"m.yaml": cached_manifest(p, "tiny_onnx", ref)})
    result = p.run()
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "model.file.url: " in out and "outside the project" in out
    assert "mlrepro_allowed_roots" in out
    assert not (cache(p) / "fetched.onnx").exists()


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://[::1/x.onnx", "not a valid URL"),
        ("ftp://example.org/x.onnx", "expected an http://, https:// or file:// URL"),
        ("https:///x.onnx", "with a host name"),
        ("https://example.org/models/", "must name the file itself"),
    ],
)
def test_a_bad_model_url_is_a_manifest_error_naming_the_field(
    serial_project: Project, url: str, says: str
) -> None:
    p = serial_project
    sha = sha256(p.assets / "models" / "tiny.onnx")
    p.make(
        {"m.yaml": cached_manifest(p, "tiny_onnx", f"cache: x.onnx, url: '{url}', sha256: {sha}")}
    )
    result = p.run()
    out = result.stdout.str()
    assert "model.file.url: " in out and says in out, out
    assert "Traceback" not in out


# --- builds that do not reproduce their pin -------------------------------------------------

BUILDER = """\
import shutil
from pathlib import Path

import pytest_mlrepro

SOURCE = Path(__file__).parent / "models" / "tiny.onnx"


@pytest_mlrepro.artifact_builder("tiny_export", uses=("onnx", "numpy"))
def build(target: Path) -> None:
    shutil.copyfile(SOURCE, target)
    # OTHER_BYTES
"""


OTHER_BYTES = """\
from pathlib import Path


def other_bytes(source: Path) -> bytes:
    import onnx

    model = onnx.load(str(source))
    model.doc_string = "exported on another machine"
    return model.SerializeToString()
"""


def other_build(p: Project) -> bytes:
    """The bytes the other-bytes builder writes: the same model, another doc string."""
    namespace: dict[str, Any] = {}
    exec(OTHER_BYTES, namespace)
    data: bytes = namespace["other_bytes"](p.assets / "models" / "tiny.onnx")
    return data


def build_project(p: Project, other_bytes: bool) -> Path:
    sha = sha256(p.assets / "models" / "tiny.onnx")
    p.make(
        {
            "m.yaml": cached_manifest(
                p, "tiny_onnx", f"cache: built.onnx, build: tiny_export, sha256: {sha}"
            )
        }
    )
    text = BUILDER
    if other_bytes:  # what another machine's exporter does: a valid model with other bytes
        text = text.replace("    # OTHER_BYTES", "    target.write_bytes(other_bytes(SOURCE))")
        text = "from helpers_other_bytes import other_bytes\n" + text
        (p.path / "helpers_other_bytes.py").write_text(OTHER_BYTES)
    (p.path / "conftest.py").write_text(text)
    return p.path / "golden" / "tiny_onnx.json"


def test_a_build_that_matches_its_pin_is_cached_readable_with_its_origin(
    serial_project: Project,
) -> None:
    p = serial_project
    build_project(p, other_bytes=False)
    p.run("--mlrepro-update").assert_outcomes(passed=1)
    assert mode(cache(p) / "built.onnx") == 0o644
    origin = json.loads((cache(p) / "built.onnx.origin.json").read_text())
    assert origin["source"] == "build" and origin["from"] == "tiny_export"
    assert set(origin["packages"]) == {"onnx", "numpy"}
    assert origin["machine"]["cpu"] == cpu_model()


def test_a_build_that_writes_other_bytes_names_the_machines_and_the_ways_forward(
    serial_project: Project, as_machine: Callable[[str], dict[str, Any]]
) -> None:
    # Both machines fixed (tests/machines.py): this one an AMD EPYC, the golden's an Intel Xeon.
    as_machine("amd-epyc-avx2")
    p = serial_project
    golden = build_project(p, other_bytes=False)
    p.run("--mlrepro-update").assert_outcomes(passed=1)
    # The golden as if recorded on another machine with the same packages.
    data = json.loads(golden.read_text())
    env = data["environment"]
    data["environment"] = env = environment_of("intel-xeon-amx", env)
    golden.write_text(json.dumps(data, indent=1))
    for leftover in cache(p).iterdir():
        leftover.unlink()
    build_project(p, other_bytes=True)
    (p.path / "golden" / "tiny_onnx.json").write_text(json.dumps(data, indent=1))

    result = p.run()
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    pinned = sha256(p.assets / "models" / "tiny.onnx")
    assert "builder 'tiny_export' wrote built.onnx with sha256 " in out
    assert f"the manifest pins {pinned}: this build does not reproduce the pinned bytes" in out
    assert f"this machine: {cpu_model()}" in out
    assert cpu_model() == "AMD EPYC 7763 64-Core Processor"
    assert "the build used: numpy " in out and ", onnx " in out
    assert "the libraries installed here" not in out
    assert (
        "the golden (golden/tiny_onnx.json) was recorded on: Intel(R) Xeon(R) Platinum 8480+ "
        f"(GenuineIntel; {' '.join(cast(list[str], env['cpu_flags']))})"
    ) in out
    if "numeric_packages" in env:  # goldens that record packages compare them
        assert "another CPU, the same package versions" in out
    assert "fetch the pinned bytes" in out and "<mirror>/models/built.onnx" in out
    produced = other_build(p)
    assert f"pin this build: set model.file.sha256 to {hashlib.sha256(produced).hexdigest()}" in out
    assert not (cache(p) / "built.onnx").exists(), "a mismatching build never takes the name"
    assert json.loads(golden.read_text()) == data, "the golden is untouched"


def test_a_cached_file_left_by_another_build_is_named_as_such_not_as_tampering(
    serial_project: Project,
) -> None:
    p = serial_project
    build_project(p, other_bytes=True)
    # Version 1 of the manifest pinned the other bytes and built them into the shared cache.
    other = other_build(p)
    other_sha = hashlib.sha256(other).hexdigest()
    pinned = sha256(p.assets / "models" / "tiny.onnx")
    manifest = p.path / "manifests" / "m.yaml"
    manifest.write_text(manifest.read_text().replace(pinned, other_sha))
    p.run("--mlrepro-update").assert_outcomes(passed=1)
    # Version 2 pins the original bytes; the cache still holds version 1's build.
    manifest.write_text(manifest.read_text().replace(other_sha, pinned))
    result = p.run()
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "tampered" not in out
    assert f"the cache holds {other_sha}, which was built by builder 'tiny_export' for " in out
    assert "Another manifest version" in out and "rm " in out

    # The same file without its record: nothing explains it, and the message says so.
    (cache(p) / "built.onnx.origin.json").unlink()
    result = p.run()
    result.assert_outcomes(failed=1)
    assert "the cache has no record of writing it (tampered" in result.stdout.str()
