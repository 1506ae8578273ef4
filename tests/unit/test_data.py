"""Tests of pytest_mlrepro.data: finding, verifying and downloading labelled image data sets."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import multiprocessing
import os
import shutil
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

import pytest
from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from pytest_mlrepro.data._datasets import (
    ResolvedDataset,
    Sample,
    read_checksum_lines,
    resolve_dataset,
    sha256_file,
)
from pytest_mlrepro.errors import DatasetUnavailable, IntegrityError, ManifestError
from pytest_mlrepro.manifest._spec import Manifest, parse_manifest
from pytest_mlrepro.settings import Settings

REAL_DATA = Path(__file__).resolve().parents[3] / "shared/data/imagenet-sample"

# id -> label; sorted ids: "a.png" < "b c.png" < "d'e.jpg" < "f.png"
IMAGES = {"d'e.jpg": 2, "a.png": 0, "f.png": 1, "b c.png": 1}
SORTED_IDS = sorted(IMAGES)
CLASS_LINES = ["n00000001 tabby cat", "n00000002 dog", "bird"]

pytestmark = pytest.mark.usefixtures("_no_proxy")  # tests/conftest.py


def write_image(path: Path, index: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    image = Image.new("RGB", (8 + index, 6), (40 * index % 256, 90, 200 - 30 * index))
    image.save(path, format="JPEG" if path.suffix == ".jpg" else "PNG")


def write_labels(
    path: Path, rows: list[tuple[str, Any]], header: tuple[str, str] = ("file", "class_index")
) -> None:
    with path.open("w", newline="", encoding="utf-8") as stream:
        writer = csv.writer(stream)
        writer.writerow(header)
        writer.writerows(rows)


def write_checksums(path: Path, folder: Path, names: list[str], binary: bool = False) -> None:
    mark = "*" if binary else " "
    lines = [f"{hashlib.sha256((folder / n).read_bytes()).hexdigest()} {mark}{n}" for n in names]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@dataclasses.dataclass
class Tiny:
    """A tiny data set 'tiny' in <tmp>/mirror/tiny, its checksum list beside the manifest."""

    root: Path

    @property
    def mirror(self) -> Path:
        return self.root / "mirror"

    @property
    def folder(self) -> Path:
        return self.mirror / "tiny"

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    @property
    def cached(self) -> Path:
        return self.cache / "datasets" / "tiny"

    @property
    def checksum_file(self) -> Path:
        return self.root / "manifests" / "tiny.sha256"

    def names(self) -> list[str]:
        return ["labels.csv", "classes.txt", *SORTED_IDS]

    def rewrite_checksums(self) -> None:
        write_checksums(self.checksum_file, self.folder, self.names())

    def manifest(self, **dataset: Any) -> Manifest:
        data = {
            "name": "m",
            "version": "1",
            "framework": {"name": "onnxruntime"},
            "model": {"format": "onnx", "file": {"path": "m.onnx", "sha256": "0" * 64}},
            "inputs": [
                {
                    "name": "x",
                    "layout": "NCHW",
                    "preprocess": [
                        {"decode": {}},
                        {"cast": {"dtype": "float32"}},
                        {"layout": {"order": "NCHW"}},
                    ],
                }
            ],
            "dataset": {
                "name": "tiny",
                "checksums": "tiny.sha256",
                "classes": 3,
                "class_names": "classes.txt",
                **dataset,
            },
        }
        manifest = parse_manifest(data, "m.yaml", {})
        return dataclasses.replace(manifest, path=self.root / "manifests" / "m.yaml")

    def settings(self, mirrors: list[Path] | None = None, **kwargs: Any) -> Settings:
        return Settings.for_project(
            self.root,
            cache_dir=self.cache,
            data_mirrors=[self.mirror] if mirrors is None else mirrors,
            **kwargs,
        )


@pytest.fixture
def tiny(tmp_path: Path) -> Tiny:
    data = Tiny(tmp_path)
    for index, name in enumerate(SORTED_IDS):
        write_image(data.folder / name, index)
    write_labels(data.folder / "labels.csv", list(IMAGES.items()))
    (data.folder / "classes.txt").write_text("\n".join(CLASS_LINES) + "\n", encoding="utf-8")
    data.rewrite_checksums()
    return data


@dataclasses.dataclass
class Server:
    url: str
    requests: list[str]  # raw request paths, in arrival order
    close: Callable[[], None]

    def files(self) -> list[str]:
        return [urllib.parse.unquote(p).rsplit("/", 1)[-1] for p in self.requests]


@pytest.fixture
def serve() -> Iterator[Callable[..., Server]]:
    """Start a real HTTP server on 127.0.0.1 serving a folder; all are shut down at teardown."""
    closers: list[Callable[[], None]] = []

    def start(folder: Path, delay: float = 0.0) -> Server:
        requests: list[str] = []
        lock = threading.Lock()

        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                with lock:
                    requests.append(self.path)
                if delay:
                    time.sleep(delay)
                super().do_GET()

        server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(folder)))
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        done = threading.Event()

        def close() -> None:
            if not done.is_set():
                done.set()
                server.shutdown()
                server.server_close()
                thread.join(10)

        closers.append(close)
        port = server.server_address[1]
        return Server(f"http://127.0.0.1:{port}/tiny/", requests, close)

    yield start
    for close in closers:
        close()


def served_copy(tiny: Tiny) -> Path:
    """A copy of the tiny data set to serve, as <served>/tiny/..."""
    served = tiny.root / "served"
    shutil.copytree(tiny.folder, served / "tiny")
    return served


# -- read_checksum_lines / sha256_file -------------------------------------------------------------


def test_read_checksums_formats(tmp_path: Path) -> None:
    a, b, c = "a" * 64, "B" * 64, "0123456789abcdef" * 4
    path = tmp_path / "list.sha256"
    path.write_text(
        f"# made by sha256sum\n\n{a}  plain.png\r\n{b} *it's a file.jpg\n"
        f"   \n{c}  ./sub/x y.png\n\\{a}  back\\\\slash\\nnewline\n",
        encoding="utf-8",
    )
    assert read_checksum_lines(path)[0] == {
        "plain.png": a,
        "it's a file.jpg": "b" * 64,
        "sub/x y.png": c,
        "back\\slash\nnewline": a,
    }


@pytest.mark.parametrize(
    "bad",
    [
        "abc  short.png",
        "a" * 64 + "x.png",
        "a" * 64 + "  ",
        "g" * 64 + "  x.png",
        "a" * 64 + "\tx.png",
    ],
)
def test_read_checksums_malformed_line_names_its_number(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "list.sha256"
    path.write_text(f"# header\n{'a' * 64}  ok.png\n{bad}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 3\b"):
        read_checksum_lines(path)


def test_read_checksums_conflicting_duplicate(tmp_path: Path) -> None:
    path = tmp_path / "list.sha256"
    path.write_text(f"{'a' * 64}  x.png\n{'a' * 64}  x.png\n{'b' * 64}  x.png\n")
    with pytest.raises(ValueError, match=r"line 3.*twice"):
        read_checksum_lines(path)


SURROGATES: tuple[Literal["Cs"]] = ("Cs",)  # not encodable as UTF-8: no file name has one
_NAMES = st.text(
    st.characters(blacklist_categories=SURROGATES, blacklist_characters="\x00"),
    min_size=1,
    max_size=30,
).filter(lambda n: not n.startswith("./"))


@settings(max_examples=examples(60), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    entries=st.dictionaries(_NAMES, st.binary(min_size=32, max_size=32), max_size=8),
    binary=st.booleans(),
)
def test_read_checksums_round_trip(tmp_path: Path, entries: dict[str, bytes], binary: bool) -> None:
    """What sha256sum writes (escaping names with '\\', newlines) reads back exactly."""
    lines = []
    for name, raw in entries.items():
        escaped = any(ch in name for ch in "\\\n\r")
        shown = (
            name.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
            if escaped
            else name
        )
        prefix = "\\" if escaped else ""
        lines.append(f"{prefix}{raw.hex()} {'*' if binary else ' '}{shown}")
    path = tmp_path / "round.sha256"
    path.write_bytes(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))
    assert read_checksum_lines(path)[0] == {name: raw.hex() for name, raw in entries.items()}


def test_sha256_file(tmp_path: Path) -> None:
    data = bytes(range(256)) * 10_000  # spans several read blocks
    path = tmp_path / "blob"
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()
    (tmp_path / "empty").write_bytes(b"")
    assert sha256_file(tmp_path / "empty") == hashlib.sha256(b"").hexdigest()


# -- finding and verifying --------------------------------------------------------------------


def test_mirror_hit(tiny: Tiny) -> None:
    found = resolve_dataset(tiny.manifest(), tiny.settings())
    assert isinstance(found, ResolvedDataset)
    assert found.root == tiny.folder.resolve()
    assert found.origin == f"mirror {tiny.folder.resolve()}"
    assert found.samples == tuple(
        Sample(
            id=name,
            path=tiny.folder.resolve() / name,
            label=IMAGES[name],
            sha256=sha256_file(tiny.folder / name),
        )
        for name in SORTED_IDS
    )
    assert found.class_names == ("tabby cat", "dog", "bird")
    assert not tiny.cache.exists()  # nothing was copied or downloaded


def test_no_class_names_file(tiny: Tiny) -> None:
    found = resolve_dataset(tiny.manifest(class_names=None), tiny.settings())
    assert found.class_names is None
    assert [s.id for s in found.samples] == SORTED_IDS


def test_first_complete_mirror_wins(tiny: Tiny, tmp_path: Path) -> None:
    partial_mirror = tmp_path / "partial"
    shutil.copytree(tiny.folder, partial_mirror / "tiny")
    (partial_mirror / "tiny" / "f.png").unlink()
    empty = tmp_path / "empty"
    empty.mkdir()
    complete = tmp_path / "complete"
    shutil.copytree(tiny.folder, complete / "tiny")
    found = resolve_dataset(
        tiny.manifest(), tiny.settings(mirrors=[empty, partial_mirror, complete, tiny.mirror])
    )
    assert found.root == (complete / "tiny").resolve()
    assert found.origin.startswith("mirror ")


def test_mirror_preferred_to_cache_and_cache_used_alone(tiny: Tiny) -> None:
    shutil.copytree(tiny.folder, tiny.cached)
    assert resolve_dataset(tiny.manifest(), tiny.settings()).origin.startswith("mirror ")
    found = resolve_dataset(tiny.manifest(), tiny.settings(mirrors=[]))
    assert found.origin == f"cache {tiny.cached.resolve()}"
    assert found.samples[0].path == tiny.cached.resolve() / "a.png"


def test_checksum_mismatch_names_the_file(tiny: Tiny) -> None:
    path = tiny.folder / "b c.png"
    expected = hashlib.sha256(path.read_bytes()).hexdigest()
    write_image(path, 7)  # a valid image, but not the one the list describes
    actual = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(IntegrityError) as info:
        resolve_dataset(tiny.manifest(), tiny.settings())
    message = str(info.value)
    assert "'b c.png'" in message
    assert expected in message and actual in message
    assert str(tiny.folder.resolve()) in message


def test_checksum_mismatch_names_the_line_of_the_list(tiny: Tiny) -> None:
    """A refusal names file:line:field, here the list's line that pins the file."""
    path = tiny.folder / "b c.png"
    write_image(path, 7)
    with pytest.raises(IntegrityError) as info:
        resolve_dataset(tiny.manifest(), tiny.settings())
    listed = read_checksum_lines(tiny.checksum_file)[1]["b c.png"]
    entries = tiny.checksum_file.read_text().splitlines()
    assert entries[listed - 1].endswith("  b c.png")
    assert f"{tiny.checksum_file.resolve()}:{listed}: b c.png: expected sha256" in str(info.value)


def test_truncated_file_is_a_mismatch(tiny: Tiny) -> None:
    path = tiny.folder / "d'e.jpg"
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(IntegrityError, match=r"d'e\.jpg"):
        resolve_dataset(tiny.manifest(), tiny.settings())


def test_labels_are_verified_too(tiny: Tiny) -> None:
    with (tiny.folder / "labels.csv").open("a", encoding="utf-8") as stream:
        stream.write("\n")
    with pytest.raises(IntegrityError, match=r"labels\.csv"):
        resolve_dataset(tiny.manifest(), tiny.settings())


def test_mismatch_in_cache(tiny: Tiny) -> None:
    shutil.copytree(tiny.folder, tiny.cached)
    (tiny.cached / "a.png").write_bytes(b"not a png")
    with pytest.raises(IntegrityError, match=r"'a\.png'.*cache.*delete it"):
        resolve_dataset(tiny.manifest(), tiny.settings(mirrors=[]))


def test_missing_data_says_how_to_provide_it(tiny: Tiny, tmp_path: Path) -> None:
    nowhere = tmp_path / "nowhere"
    with pytest.raises(DatasetUnavailable) as info:
        resolve_dataset(tiny.manifest(), tiny.settings(mirrors=[nowhere]))
    error = info.value
    assert "MLREPRO_DATA" in error.how and "mlrepro_data" in error.how
    assert "'tiny/'" in error.how
    assert "no 'url'" in error.how
    assert str(nowhere / "tiny") in str(error)  # the folders searched
    assert str(tiny.cached.resolve()) in str(error)


def test_missing_data_with_url_but_downloads_off(tiny: Tiny) -> None:
    manifest = tiny.manifest(url="http://127.0.0.1:9/tiny/")
    with pytest.raises(DatasetUnavailable) as info:
        resolve_dataset(manifest, tiny.settings(mirrors=[], allow_download=False))
    assert "allow downloads" in info.value.how
    assert "http://127.0.0.1:9/tiny/" in info.value.how
    assert "MLREPRO_DATA" in info.value.how


def test_incomplete_mirror_is_skipped_and_reported(tiny: Tiny) -> None:
    (tiny.folder / "f.png").unlink()
    with pytest.raises(DatasetUnavailable, match=r"1 of the 4 images are missing.*'f\.png'"):
        resolve_dataset(tiny.manifest(), tiny.settings())


def test_limit_takes_the_first_ids_and_needs_only_those(tiny: Tiny) -> None:
    (tiny.folder / "d'e.jpg").unlink()
    (tiny.folder / "f.png").unlink()
    found = resolve_dataset(tiny.manifest(limit=2), tiny.settings())
    assert [s.id for s in found.samples] == ["a.png", "b c.png"]
    assert [s.label for s in found.samples] == [0, 1]
    with pytest.raises(DatasetUnavailable):
        resolve_dataset(tiny.manifest(limit=3), tiny.settings())


def test_limit_larger_than_the_set(tiny: Tiny) -> None:
    found = resolve_dataset(tiny.manifest(limit=100), tiny.settings())
    assert len(found.samples) == 4


# -- manifest-level errors ---------------------------------------------------------------------


def test_checksum_path_escaping_the_project_is_refused(tiny: Tiny) -> None:
    with pytest.raises(ManifestError) as info:
        resolve_dataset(tiny.manifest(checksums="../../etc/passwd"), tiny.settings())
    assert info.value.field == "dataset.checksums"
    assert "outside" in info.value.message


def test_missing_checksum_list(tiny: Tiny) -> None:
    tiny.checksum_file.unlink()
    with pytest.raises(ManifestError, match="does not exist") as info:
        resolve_dataset(tiny.manifest(), tiny.settings())
    assert info.value.field == "dataset.checksums"


def test_malformed_checksum_list(tiny: Tiny) -> None:
    with tiny.checksum_file.open("a", encoding="utf-8") as stream:
        stream.write("not a checksum line\n")
    with pytest.raises(ManifestError, match=r"line 7") as info:
        resolve_dataset(tiny.manifest(), tiny.settings())
    assert info.value.field == "dataset.checksums"


def test_image_missing_from_checksum_list(tiny: Tiny) -> None:
    names = [n for n in tiny.names() if n != "f.png"]
    write_checksums(tiny.checksum_file, tiny.folder, names)
    with pytest.raises(ManifestError, match=r"no line for 1 file.*'f\.png'") as info:
        resolve_dataset(tiny.manifest(limit=1), tiny.settings())  # covered even past the limit
    assert info.value.field == "dataset.checksums"


def test_labels_missing_from_checksum_list(tiny: Tiny) -> None:
    write_checksums(tiny.checksum_file, tiny.folder, SORTED_IDS)
    with pytest.raises(ManifestError, match=r"labels\.csv") as info:
        resolve_dataset(tiny.manifest(), tiny.settings())
    assert info.value.field == "dataset.checksums"


def test_class_count_mismatch(tiny: Tiny) -> None:
    with pytest.raises(ManifestError) as info:
        resolve_dataset(tiny.manifest(classes=4), tiny.settings())
    assert info.value.field == "dataset.class_names"
    assert "has 3 classes, the manifest declares 4" in info.value.message


def test_label_out_of_range_names_the_row(tiny: Tiny) -> None:
    rows = [(name, 3 if name == "f.png" else label) for name, label in IMAGES.items()]
    write_labels(tiny.folder / "labels.csv", rows)
    tiny.rewrite_checksums()
    with pytest.raises(ManifestError) as info:
        resolve_dataset(tiny.manifest(), tiny.settings())
    line = 2 + list(IMAGES).index("f.png")
    assert f"labels.csv:{line}:" in info.value.message
    assert "outside [0, 3)" in info.value.message


@pytest.mark.parametrize(
    ("value", "message"), [("-1", "outside"), ("x", "not an integer"), ("1.0", "not an integer")]
)
def test_bad_labels(tiny: Tiny, value: str, message: str) -> None:
    write_labels(tiny.folder / "labels.csv", [("a.png", value), ("f.png", 1)])
    tiny.rewrite_checksums()
    with pytest.raises(ManifestError, match=message):
        resolve_dataset(tiny.manifest(), tiny.settings())


def test_duplicate_rows(tiny: Tiny) -> None:
    write_labels(tiny.folder / "labels.csv", [("a.png", 0), ("f.png", 1), ("a.png", 0)])
    tiny.rewrite_checksums()
    with pytest.raises(ManifestError, match=r"labels\.csv:4: 'a\.png' is listed again.*line 2"):
        resolve_dataset(tiny.manifest(), tiny.settings())


def test_missing_column(tiny: Tiny) -> None:
    write_labels(tiny.folder / "labels.csv", [("a.png", 0)], header=("file", "label"))
    tiny.rewrite_checksums()
    with pytest.raises(ManifestError, match=r"no column 'class_index'") as info:
        resolve_dataset(tiny.manifest(), tiny.settings())
    assert info.value.field == "dataset.label_column"
    found = resolve_dataset(tiny.manifest(label_column="label"), tiny.settings())
    assert [(s.id, s.label) for s in found.samples] == [("a.png", 0)]


def test_sample_path_escaping_the_folder(tiny: Tiny) -> None:
    write_labels(tiny.folder / "labels.csv", [("../secret.png", 0)])
    tiny.rewrite_checksums()
    with tiny.checksum_file.open("a", encoding="utf-8") as stream:
        stream.write(f"{'a' * 64}  ../secret.png\n")
    with pytest.raises(ManifestError, match=r"not a plain relative path"):
        resolve_dataset(tiny.manifest(), tiny.settings())


# -- downloading --------------------------------------------------------------------------------


def test_download_then_cache(tiny: Tiny, serve: Callable[..., Server]) -> None:
    server = serve(served_copy(tiny))
    manifest = tiny.manifest(url=server.url)
    found = resolve_dataset(manifest, tiny.settings(mirrors=[]))
    cached = tiny.cached.resolve()
    assert found.origin == f"downloaded from {server.url.rstrip('/')} into {cached}"
    assert found.root == cached
    for name in tiny.names():
        assert (cached / name).read_bytes() == (tiny.folder / name).read_bytes()
    assert sorted(server.files()) == sorted(tiny.names())
    # names are quoted in URLs
    assert "/tiny/d%27e.jpg" in server.requests and "/tiny/b%20c.png" in server.requests
    assert not list(tiny.cache.rglob("*.part"))

    server.close()  # the second resolve needs no server
    again = resolve_dataset(manifest, tiny.settings(mirrors=[]))
    assert again.origin == f"cache {cached}"
    assert again.samples == found.samples


def test_download_only_what_is_missing(tiny: Tiny, serve: Callable[..., Server]) -> None:
    server = serve(served_copy(tiny))
    tiny.cached.mkdir(parents=True)
    for name in ("labels.csv", "a.png"):
        shutil.copy(tiny.folder / name, tiny.cached / name)
    found = resolve_dataset(tiny.manifest(url=server.url), tiny.settings(mirrors=[]))
    assert found.origin.startswith("downloaded from ")
    assert sorted(server.files()) == sorted(["classes.txt", "b c.png", "d'e.jpg", "f.png"])


def test_download_verifies_what_is_already_cached(tiny: Tiny, serve: Callable[..., Server]) -> None:
    server = serve(served_copy(tiny))
    tiny.cached.mkdir(parents=True)
    shutil.copy(tiny.folder / "labels.csv", tiny.cached / "labels.csv")
    (tiny.cached / "f.png").write_bytes(b"damaged")
    with pytest.raises(IntegrityError, match=r"'f\.png'"):
        resolve_dataset(tiny.manifest(url=server.url), tiny.settings(mirrors=[]))


def test_download_respects_limit(tiny: Tiny, serve: Callable[..., Server]) -> None:
    server = serve(served_copy(tiny))
    found = resolve_dataset(tiny.manifest(url=server.url, limit=2), tiny.settings(mirrors=[]))
    assert [s.id for s in found.samples] == ["a.png", "b c.png"]
    assert sorted(server.files()) == sorted(["labels.csv", "classes.txt", "a.png", "b c.png"])
    assert not (tiny.cached / "f.png").exists()


def test_corrupted_download(tiny: Tiny, serve: Callable[..., Server]) -> None:
    served = served_copy(tiny)
    bad = served / "tiny" / "d'e.jpg"
    bad.write_bytes(bad.read_bytes()[:-1] + b"\x00")
    server = serve(served)
    with pytest.raises(IntegrityError) as info:
        resolve_dataset(tiny.manifest(url=server.url), tiny.settings(mirrors=[]))
    assert "d'e.jpg" in str(info.value)
    assert hashlib.sha256((tiny.folder / "d'e.jpg").read_bytes()).hexdigest() in str(info.value)
    assert not (tiny.cached / "d'e.jpg").exists()
    assert not list(tiny.cache.rglob("*.part"))
    # whatever did arrive intact is correct
    for path in tiny.cached.iterdir():
        assert path.read_bytes() == (tiny.folder / path.name).read_bytes()


def test_http_error_is_unavailable(tiny: Tiny, serve: Callable[..., Server]) -> None:
    served = served_copy(tiny)
    (served / "tiny" / "f.png").unlink()
    server = serve(served)
    with pytest.raises(DatasetUnavailable, match=r"f\.png.*404") as info:
        resolve_dataset(tiny.manifest(url=server.url), tiny.settings(mirrors=[]))
    assert server.url + "f.png" in str(info.value)
    assert not (tiny.cached / "f.png").exists()
    assert not list(tiny.cache.rglob("*.part"))


def test_connection_refused_is_unavailable(tiny: Tiny, serve: Callable[..., Server]) -> None:
    server = serve(tiny.root)
    server.close()  # the port is now closed
    with pytest.raises(DatasetUnavailable, match="cannot download") as info:
        resolve_dataset(tiny.manifest(url=server.url), tiny.settings(mirrors=[]))
    assert server.url in str(info.value)  # the URL tried
    assert "MLREPRO_DATA" in info.value.how


def test_concurrent_downloads_from_two_processes(tiny: Tiny, serve: Callable[..., Server]) -> None:
    """Two processes resolving at once: the lock makes one download, the other reuse."""
    server = serve(served_copy(tiny), delay=0.4)  # long enough for the two to overlap
    manifest = tiny.manifest(url=server.url)
    settings_ = tiny.settings(mirrors=[])
    context = multiprocessing.get_context("spawn")
    with context.Pool(2) as pool:
        results = pool.starmap(resolve_dataset, [(manifest, settings_)] * 2)
    assert sorted(server.files()) == sorted(tiny.names())  # each file fetched once
    assert sorted(r.origin.split()[0] for r in results) == ["cache", "downloaded"]
    assert results[0].samples == results[1].samples
    files = sorted(p.relative_to(tiny.cached).as_posix() for p in tiny.cached.rglob("*"))
    assert files == sorted(tiny.names())
    for name in tiny.names():
        assert (tiny.cached / name).read_bytes() == (tiny.folder / name).read_bytes()


# -- the real sample -----------------------------------------------------------------------


def test_real_imagenet_sample(tmp_path: Path) -> None:
    if not (REAL_DATA / "labels.csv").is_file():
        pytest.skip(f"the shared ImageNet sample is not here ({REAL_DATA})")
    names = sorted(p.name for p in REAL_DATA.iterdir() if p.suffix == ".JPEG")
    write_checksums(
        tmp_path / "manifests" / "imagenet.sha256", REAL_DATA, ["labels.csv", "synset.txt", *names]
    )
    data = {
        "name": "m",
        "version": "1",
        "framework": {"name": "onnxruntime"},
        "model": {"format": "onnx", "file": {"path": "m.onnx", "sha256": "0" * 64}},
        "inputs": [
            {
                "name": "x",
                "layout": "NCHW",
                "preprocess": [
                    {"decode": {}},
                    {"cast": {"dtype": "float32"}},
                    {"layout": {"order": "NCHW"}},
                ],
            }
        ],
        "dataset": {
            "name": REAL_DATA.name,
            "checksums": "imagenet.sha256",
            "class_names": "synset.txt",
            "classes": 1000,
        },
    }
    manifest = dataclasses.replace(
        parse_manifest(data, "m.yaml", {}), path=tmp_path / "manifests" / "m.yaml"
    )
    settings_ = Settings.for_project(
        tmp_path, cache_dir=tmp_path / "cache", data_mirrors=[REAL_DATA.parent]
    )
    found = resolve_dataset(manifest, settings_)
    assert found.origin == f"mirror {REAL_DATA.resolve()}"
    with (REAL_DATA / "labels.csv").open(newline="", encoding="utf-8") as stream:
        expected = {row["file"]: int(row["class_index"]) for row in csv.DictReader(stream)}
    assert len(found.samples) == 1000
    assert {s.id: s.label for s in found.samples} == expected
    assert sorted(s.label for s in found.samples) == list(range(1000))
    assert [s.id for s in found.samples] == sorted(expected)
    assert found.class_names is not None and len(found.class_names) == 1000
    assert found.class_names[0] == "tench"
    assert found.class_names[2] == "great white shark"
    assert all(s.path.is_file() for s in found.samples)


# -- a shared cache (issue 31, points 1 and 4) -----------------------------------------------


def test_a_data_set_file_planted_in_the_cache_as_a_link_is_not_read(tiny: Tiny) -> None:
    shutil.copytree(tiny.folder, tiny.cached)
    secret = tiny.root / "secret"
    secret.write_bytes(b"root-only secret\n")
    secret.chmod(0o600)
    (tiny.cached / "b c.png").unlink()
    (tiny.cached / "b c.png").symlink_to(secret)
    with pytest.raises(IntegrityError, match="is a symbolic link, not a regular file") as info:
        resolve_dataset(tiny.manifest(), tiny.settings(mirrors=[]))
    assert hashlib.sha256(secret.read_bytes()).hexdigest() not in str(info.value)


def test_a_data_set_lock_planted_as_a_link_creates_nothing_outside(
    tiny: Tiny, serve: Callable[..., Server]
) -> None:
    server = serve(served_copy(tiny))
    outside = tiny.root / "outside"
    outside.mkdir()
    (tiny.cache / "datasets").mkdir(parents=True)
    (tiny.cache / "datasets" / "tiny.lock").symlink_to(outside / "created")
    with pytest.raises(IntegrityError, match=r"tiny\.lock is a symbolic link"):
        resolve_dataset(tiny.manifest(url=server.url), tiny.settings(mirrors=[]))
    assert list(outside.iterdir()) == []
    assert server.requests == []


def test_a_data_set_file_declared_larger_than_any_image_is_refused_unread(tiny: Tiny) -> None:
    from http.server import BaseHTTPRequestHandler

    class Huge(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(100 << 30))  # 100 GiB
            self.end_headers()
            self.wfile.write(b"\0" * 1024)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Huge)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/tiny/"
        with pytest.raises(IntegrityError, match="more than the limit of 1073741824 bytes"):
            resolve_dataset(tiny.manifest(url=url), tiny.settings(mirrors=[]))
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
    assert not [p for p in tiny.cached.rglob("*") if p.is_file()], "nothing kept, no .part"


def test_a_labels_row_the_file_system_cannot_hold_names_its_file_line_and_field(
    tiny: Tiny,
) -> None:
    long_name = "x" * 300 + ".png"
    write_labels(tiny.folder / "labels.csv", [*IMAGES.items(), (long_name, 1)])
    tiny.rewrite_checksums()
    with pytest.raises(ManifestError) as info:
        resolve_dataset(tiny.manifest(), tiny.settings())
    assert info.value.field == "dataset.labels"
    message = str(info.value)
    assert f"{tiny.folder / 'labels.csv'}:6: the name 'xxxx" in message
    assert "is 304 bytes long; file systems hold names of at most 255 bytes" in message


def test_a_session_hashes_each_file_once_until_it_changes(
    tiny: Tiny, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resolving the data set again (the next item of a session) hashes no file that is as it
    was; a file written since (same size, new bytes, its modification time put back) is hashed
    again and refused."""
    from pytest_mlrepro.data import _datasets

    hashed: list[str] = []

    def counting(path: Path, *, follow_symlinks: bool = True) -> str:
        hashed.append(Path(path).name)
        return sha256_file(path, follow_symlinks=follow_symlinks)

    monkeypatch.setattr(_datasets, "_hashed", {})
    monkeypatch.setattr(_datasets, "sha256_file", counting)
    first = resolve_dataset(tiny.manifest(), tiny.settings())
    assert set(SORTED_IDS) <= set(hashed)
    hashed.clear()
    assert resolve_dataset(tiny.manifest(), tiny.settings()) == first
    assert hashed == []

    path = tiny.folder / "f.png"
    before = path.stat()
    # The kernel's change-time clock ticks every few milliseconds: a write in the same tick as
    # the file's creation would keep its change time.
    time.sleep(0.05)
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # same size, other bytes
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(IntegrityError, match=r"f\.png"):
        resolve_dataset(tiny.manifest(), tiny.settings())
    assert hashed == ["f.png"]
