"""Resource limits and silent damage.

* Every decode backend refuses an image whose header declares more than ``MAX_IMAGE_PIXELS``
  pixels, before it allocates them (a real PNG, its IHDR written here, claiming 30000 × 30000).
* A manifest's size is checked before it is read: a sparse 3 GiB manifest, under a 2 GiB memory
  limit, fails alone and the other manifests still run; a FIFO is refused without blocking.
* Locating ``model.file.package`` runs none of the package's code.
* Labels are plain ASCII decimal integers (``'١'``, ``'0_1'``, ``'+1'``, ``'１'`` are refused).
* An empty crop and images with samples wider than 16 bits are errors, the same on every backend.
"""

from __future__ import annotations

import functools
import io
import os
import shutil
import struct
import subprocess
import sys
import textwrap
import threading
import zlib
from pathlib import Path

import numpy as np
import pytest
from helpers import CHILD_TIMEOUT_S, Project, checksum_list
from PIL import Image
from test_odd_images import odd_manifest, write_dataset

from pytest_mlrepro.errors import ManifestError, SampleError
from pytest_mlrepro.manifest._spec import load_manifest
from pytest_mlrepro.pipeline._steps import MAX_IMAGE_PIXELS, Crop, Decode, Pipeline, Resize

REPO = Path(__file__).resolve().parents[2]
BACKENDS = ["pil", "opencv"]


# --- files built here ---------------------------------------------------------------------------


def _chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


@functools.cache
def big_png(width: int, height: int, rows: int | None = None) -> bytes:
    """A real 8-bit RGB PNG declaring ``width`` × ``height`` pixels, all black. Its data holds
    ``rows`` rows (all of them when None: then it decodes completely); the file stays small
    because black rows compress about a thousand times."""
    packer = zlib.compressobj(9)
    row = bytes(1 + 3 * width)  # filter byte 0, then black pixels
    data = b"".join(packer.compress(row) for _ in range(height if rows is None else rows))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB, no interlace
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", data + packer.flush())
        + _chunk(b"IEND", b"")
    )


def png(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, "PNG")
    return buffer.getvalue()


def tiff(array: np.ndarray) -> bytes:
    """A TIFF of ``array`` as Pillow writes it (int32 → 32-bit integer samples, float32 →
    32-bit floating-point samples)."""
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, "TIFF")
    return buffer.getvalue()


WIDE = {
    # Values that an 8-bit reduction wraps (70000 → 17 by Pillow's high byte) or clips.
    "int32.tiff": (tiff(np.array([[1, 256, 70000, 2**31 - 1]] * 4, np.int32)), "32-bit"),
    "float32.tiff": (tiff(np.array([[0.25, 300.0, -1.0, 1e9]] * 4, np.float32)), "floating"),
}


# --- the pixel limit ----------------------------------------------------------------------------


def test_every_backend_refuses_a_pixel_bomb_before_allocating_it(tmp_path: Path) -> None:
    """A 30000 × 30000 PNG of a few kB would take 2.7 GB decoded: under a 512 MiB address-space
    allowance every backend must refuse it from its header, not run out of memory."""
    bomb = tmp_path / "bomb.png"
    bomb.write_bytes(big_png(30000, 30000, rows=4))
    assert bomb.stat().st_size < 50_000
    script = textwrap.dedent("""\
        import resource, sys
        import cv2, numpy, PIL.Image
        from pytest_mlrepro.errors import ManifestError, SampleError
        from pytest_mlrepro.pipeline._steps import Decode
        data = open(sys.argv[1], "rb").read()
        size = [l for l in open("/proc/self/status") if l.startswith("VmSize:")][0]
        allowance = int(size.split()[1]) * 1024 + (512 << 20)
        resource.setrlimit(resource.RLIMIT_AS, (allowance, resource.RLIM_INFINITY))
        for backend in ("pil", "opencv"):
            try:
                Decode(backend=backend).decode(data, "n0/bomb.png")
                print(backend, "DECODED")
            except SampleError as exc:
                print(backend, "SampleError", exc)
            except BaseException as exc:
                print(backend, type(exc).__name__, exc)
        """)
    done = subprocess.run(
        [sys.executable, "-c", script, str(bomb)],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith(("pil ", "opencv "))]
    assert len(lines) == 2, done.stdout + done.stderr
    for line in lines:
        assert "SampleError sample 'n0/bomb.png': " in line, line
        assert f"30000×30000 = 900000000 pixels, more than the limit of {MAX_IMAGE_PIXELS}" in line


def test_the_tf_backend_refuses_it_too() -> None:
    pytest.importorskip("tensorflow")
    with pytest.raises(SampleError) as info:
        # 100 M pixels: over the limit, and small enough to decode (300 MB) if it were not.
        Decode(backend="tf").decode(big_png(10000, 10000), "n0/bomb.png")
    assert info.value.sample == "n0/bomb.png"
    assert f"10000×10000 = 100000000 pixels, more than the limit of {MAX_IMAGE_PIXELS}" in str(
        info.value
    )


# --- silent pixel damage: wide samples, empty crops --------------------------------------------


@pytest.mark.parametrize("name", sorted(WIDE))
def test_wide_samples_are_refused_alike_by_every_backend(name: str) -> None:
    data, words = WIDE[name]
    messages = []
    for backend in BACKENDS:
        with pytest.raises(SampleError) as info:
            Decode(backend=backend).decode(data, f"n0/{name}")  # type: ignore[arg-type]
        assert info.value.sample == f"n0/{name}"
        messages.append(str(info.value))
    assert messages[0] == messages[1]  # the same outcome, whichever backend
    assert words in messages[0] and "only 8-bit and 16-bit unsigned integer" in messages[0]


def test_an_empty_crop_is_refused_naming_sample_and_step() -> None:
    steps = [Decode(), Crop(fraction=0.5), Resize(size=4)]
    dot = png(np.full((1, 1, 3), 200, np.uint8))
    with pytest.raises(SampleError) as info:
        Pipeline(steps)(dot, "n0/dot.png")
    assert info.value.sample == "n0/dot.png"
    assert "crop failed: the crop of this 1×1 image is 0×0 pixels, empty" in str(info.value)
    # A 2 × 2 image still crops to 1 × 1: only an empty crop is refused.
    out = Pipeline(steps)(png(np.full((2, 2, 3), 200, np.uint8)), "n0/two.png")
    assert out.shape == (4, 4, 3) and (out == 200).all()


def test_refused_images_fail_their_items_on_both_backends(serial_project: Project) -> None:
    """Through the plugin: a pixel bomb that decodes completely (the old code recorded it), a
    32-bit TIFF and an image too small for its crop fail their items naming the sample; nothing
    is recorded."""
    project = serial_project
    project.make({})
    good = {f"ok{i}.png": png(np.full((40, 48, 3), 60 + 40 * i, np.uint8)) for i in range(3)}
    bad = {
        "bomb": ("bomb.png", big_png(10000, 10000), "10000×10000 = 100000000 pixels"),
        "wide": ("wide.tiff", WIDE["int32.tiff"][0], "32-bit signed integer samples"),
        "dot": ("dot.png", png(np.full((1, 1, 3), 90, np.uint8)), "crop failed: the crop"),
    }
    for dataset, (file, data, _) in bad.items():
        write_dataset(project, dataset, {**good, file: data})
        for backend in BACKENDS:
            text = odd_manifest(project, f"{dataset}_{backend}", dataset, backend)
            if dataset == "dot":
                text = text.replace(
                    "{crop: {size: [32, 32], rounding: google}}", "{crop: {fraction: 0.875}}"
                )
            (project.path / "manifests" / f"{dataset}_{backend}.yaml").write_text(text)
    result = project.run("--mlrepro-update")
    result.assert_outcomes(failed=len(bad) * len(BACKENDS))
    for dataset, (file, _, words) in bad.items():
        for backend in BACKENDS:
            result.stdout.fnmatch_lines([f"FAILED manifests/{dataset}_{backend}.yaml::accuracy*"])
        assert sum(f"sample '{file}': " in line and words in line for line in result.outlines) >= 2
    assert list((project.path / "golden").iterdir()) == []


# --- the manifest size limit --------------------------------------------------------------------

MEMORY_LIMIT_CONFTEST = """\
import resource

# The 2 GiB memory limit of a CI runner: address space now in use + 2 GiB.
with open("/proc/self/status") as status:
    used = [int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:")][0]
resource.setrlimit(resource.RLIMIT_AS, (used + (2 << 30), resource.RLIM_INFINITY))
"""


def test_a_huge_manifest_fails_alone_without_being_read(serial_project: Project) -> None:
    """A sparse 3 GiB manifest under a 2 GiB memory limit: refused from its size (file, size,
    limit), and the other manifest still runs and passes."""
    project = serial_project.make(goldens=["tiny_onnx"])
    (project.path / "manifests" / "tiny_torch.yaml").unlink()  # this test needs ONNX only
    huge = project.path / "manifests" / "huge.yaml"
    with huge.open("wb") as out:
        # A manifest's first keys (so that it is claimed as one), then a sparse hole: no disk used.
        out.write(b"framework: onnxruntime\nmodel: {format: onnx}\n")
        out.truncate(3 << 30)
    (project.path / "conftest.py").write_text(MEMORY_LIMIT_CONFTEST)
    result = project.run(subprocess=True)  # the conftest limits its process's memory
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*manifests/huge.yaml: the file is 3221225472 bytes, larger than the limit of "
            "1000000 bytes for a manifest*refused without reading it*",
        ]
    )
    result.stdout.fnmatch_lines(["tiny_onnx *cpu *onnxruntime *24 *pass*"])


def test_a_fifo_manifest_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "m.yaml"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def load() -> None:
        try:
            load_manifest(fifo, display="m.yaml")
            outcome.append(None)
        except BaseException as exc:  # reported to the test below
            outcome.append(exc)

    # A daemon thread: on code that blocks on the FIFO, the test fails instead of hanging.
    reader = threading.Thread(target=load, daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert outcome, "load_manifest blocked on a FIFO with no writer"
    error = outcome[0]
    assert isinstance(error, ManifestError)
    assert str(error) == "m.yaml: not a regular file (a FIFO, a device or a folder): not read"


# --- locating a package's file runs none of its code --------------------------------------------

TRAP = """\
import pathlib

pathlib.Path(__file__).with_name("{name}-ran").write_text("executed")
raise RuntimeError("{name}: this package's code must not run to locate a file")
"""


def test_locating_a_package_file_runs_none_of_its_code(serial_project: Project) -> None:
    project = serial_project.make({}, goldens=["tiny_onnx"])
    top = project.path / "lib" / "trap_pkg"
    (top / "weights").mkdir(parents=True)
    (top / "__init__.py").write_text(TRAP.format(name="trap_pkg"))
    (top / "weights" / "__init__.py").write_text(TRAP.format(name="weights"))
    shutil.copy(project.path / "models" / "tiny.onnx", top / "weights" / "tiny.onnx")
    with (project.path / "pytest.ini").open("a") as ini:
        ini.write("pythonpath = lib\n")
    text = project.manifest("tiny_onnx").replace(
        "    path: ../models/tiny.onnx\n",
        "    package: trap_pkg.weights\n    path: tiny.onnx\n",
    )
    assert "package: trap_pkg.weights" in text
    (project.path / "manifests" / "tiny_onnx.yaml").write_text(text)
    result = project.run()
    result.assert_outcomes(passed=1)
    assert sorted(p.name for p in top.rglob("*-ran")) == []


# --- labels are plain ASCII decimal integers ----------------------------------------------------

ODD_LABELS = {
    "arabic": "\u0661",  # ARABIC-INDIC DIGIT ONE: int() reads 1
    "fullwidth": "\uff11",  # FULLWIDTH DIGIT ONE: int() reads 1
    "underscore": "0_1",  # int() reads 1
    "plus": "+1",  # int() reads 1
}


def test_labels_must_be_plain_ascii_decimal_integers(serial_project: Project) -> None:
    project = serial_project.make({})
    source = project.path / "data" / "tiny"
    for name, label in ODD_LABELS.items():
        folder = project.path / "data" / f"labels_{name}"
        shutil.copytree(source, folder)
        rows = (folder / "labels.csv").read_text(encoding="utf-8").splitlines()
        assert rows[2] == "img01.png,1"
        rows[2] = f"img01.png,{label}"
        (folder / "labels.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
        (project.path / "manifests" / f"labels_{name}.sha256").write_text(checksum_list(folder))
        text = odd_manifest(project, f"labels_{name}", f"labels_{name}", "pil")
        (project.path / "manifests" / f"labels_{name}.yaml").write_text(text)
    result = project.run("--mlrepro-update")
    result.assert_outcomes(failed=len(ODD_LABELS))
    for name, label in ODD_LABELS.items():
        result.stdout.fnmatch_lines(
            [
                f"*labels_{name}.yaml:*: dataset.labels: *data/labels_{name}/labels.csv:3: "
                f"the label {label!r} of 'img01.png' is not an integer written in plain "
                "decimal ASCII digits (0-9)*"
            ]
        )
    assert list((project.path / "golden").iterdir()) == []
