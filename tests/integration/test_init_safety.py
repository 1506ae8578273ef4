"""``mlrepro init`` on files a user just downloaded: it reads a model only through the checks a
test run makes (a .pt2 whose pickles would run code, an ONNX file too large to be one, external
data outside the model's folder), follows no data path out of the data folder, refuses an input
too large to allocate, and leaves no half-made manifest or checksum list when it fails.

Each init runs in a child process (the worktree's package first on its path): the .pt2 payload,
if unpickled, runs there, and a memory limit can be set on it alone."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import CHILD_TIMEOUT_S, make_assets, make_evil_torch_files, make_onnx_with_input

REPO = Path(__file__).resolve().parents[2]
INIT = ["--data", "data/tiny", "--preset", "timm", "--size", "16"]


@pytest.fixture(scope="module")
def assets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_assets(tmp_path_factory.mktemp("init-safety"), torchscript=False)


@pytest.fixture
def project(tmp_path: Path, assets: Path) -> Path:
    project = tmp_path / "project"
    shutil.copytree(assets, project)
    return project


def _limit_memory(limit: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def init(project: Path, *args: str, memory: int | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MLREPRO_DATA", "PYTEST_ADDOPTS")}
    env.update(
        PYTHONPATH=str(REPO), MLREPRO_CACHE=str(project / ".cache"), OPENBLAS_NUM_THREADS="1"
    )
    return subprocess.run(
        [sys.executable, "-m", "pytest_mlrepro.cli", "init", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        preexec_fn=None if memory is None else _limit_memory(memory),
    )


def _written(project: Path) -> list[str]:
    folder = project / "manifests"
    return (
        sorted(p.relative_to(project).as_posix() for p in folder.rglob("*"))
        if folder.exists()
        else []
    )


def test_init_refuses_a_pt2_whose_sample_inputs_would_run_code(
    project: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "EXECUTED"
    make_evil_torch_files(project / "models", marker, batch=2)
    result = init(project, "models/evil.pt2", *INIT)
    assert not marker.exists(), "init ran the pickle in the archive's sample inputs"
    assert result.returncode == 1, result.stderr
    assert "does not load with weights_only=True" in result.stderr, result.stderr
    assert _written(project) == []


def _onnx_reading(project: Path, location: str) -> None:
    """models/split.onnx: the tiny model, its one weight kept in the external file
    ``location`` (which holds the real weight, so that it would load)."""
    import onnx
    from onnx import numpy_helper

    make_onnx_with_input(project / "models" / "split.onnx", ["batch", 3, "h", "w"])
    model = onnx.load(str(project / "models" / "split.onnx"))
    (scale,) = model.graph.initializer
    raw = numpy_helper.from_array(numpy_helper.to_array(scale), scale.name)
    weights = raw.raw_data
    raw.ClearField("raw_data")
    raw.data_location = onnx.TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(len(weights)))):
        entry = raw.external_data.add()
        entry.key, entry.value = key, value
    scale.CopyFrom(raw)
    (project / "models" / "split.onnx").write_bytes(model.SerializeToString())
    target = Path(location) if Path(location).is_absolute() else project / "models" / location
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(weights)


@pytest.mark.parametrize("how", ["absolute", "dot-dot", "symlink"])
def test_init_refuses_onnx_external_data_outside_the_model_folder(
    project: Path, tmp_path: Path, how: str
) -> None:
    outside = tmp_path / "outside" / "secret.bin"
    location = {
        "absolute": str(outside),
        "dot-dot": "../../outside/secret.bin",
        "symlink": "link.bin",
    }[how]
    if how == "symlink":
        _onnx_reading(project, str(outside))  # writes the weight to the outside file
        (project / "models" / "link.bin").symlink_to(outside)
    _onnx_reading(project, location)
    assert outside.is_file()
    result = init(project, "models/split.onnx", *INIT)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "outside the model's folder" in result.stderr, result.stderr
    assert _written(project) == []


@pytest.mark.parametrize("how", ["dot-dot", "absolute", "symlink"])
def test_init_refuses_labels_rows_outside_the_data_folder(
    project: Path, tmp_path: Path, how: str
) -> None:
    outside = tmp_path / "outside.png"
    data = project / "data" / "tiny"
    shutil.copy(data / "img00.png", outside)
    row = {
        "dot-dot": "../../../outside.png",
        "absolute": str(outside),
        "symlink": "link.png",
    }[how]
    if how == "symlink":
        (data / "link.png").symlink_to(outside)
    assert (data / row).is_file()  # the row names an existing image
    with (data / "labels.csv").open("a") as labels:
        labels.write(f"{row},1\n")
    result = init(project, "models/tiny.onnx", *INIT)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "outside the data folder" in result.stderr, result.stderr
    assert _written(project) == []


def test_init_refuses_a_class_names_file_linked_out_of_the_data_folder(
    project: Path, tmp_path: Path
) -> None:
    """The class names beside a labels CSV are hashed like the images: a link out is refused."""
    outside = tmp_path / "names.txt"
    outside.write_text("a\nb\nc\n")
    (project / "data" / "tiny" / "synset.txt").symlink_to(outside)
    result = init(project, "models/tiny.onnx", *INIT)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "'synset.txt' resolves to" in result.stderr, result.stderr
    assert _written(project) == []


def test_a_failed_init_leaves_no_half_made_files(project: Path) -> None:
    """Discovery fails (a label the model's 3 classes cannot have): nothing is left, and a
    manifest that was there (--force) is as it was."""
    labels = project / "data" / "tiny" / "labels.csv"
    labels.write_text(labels.read_text().replace("img01.png,1", "img01.png,7"))
    args = ["models/tiny.onnx", "--data", "data/tiny", "--discover", "--size", "16"]
    failed = init(project, *args, "--samples", "10")
    assert failed.returncode != 0, failed.stdout
    assert _written(project) == []
    (project / "manifests").mkdir()
    (project / "manifests" / "tiny.yaml").write_text("# the owner's manifest\n")
    again = init(project, *args, "--samples", "10", "--force")
    assert again.returncode != 0, again.stdout
    assert _written(project) == ["manifests/tiny.yaml"]
    assert (project / "manifests" / "tiny.yaml").read_text() == "# the owner's manifest\n"


def test_init_refuses_an_input_too_large_to_allocate(project: Path) -> None:
    make_onnx_with_input(project / "models" / "huge.onnx", ["batch", 3, 100000, 100000])
    # The limit turns an attempt to allocate the images into a MemoryError at once, instead of
    # a machine swapping.
    result = init(
        project, "models/huge.onnx", "--data", "data/tiny", "--discover", memory=8 * 1024**3
    )
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "MemoryError" not in result.stderr, result.stderr
    assert "100000×100000 is more than 89478485 pixels" in result.stderr, result.stderr
    assert _written(project) == []


def test_a_3_gib_file_is_refused_without_being_read(project: Path) -> None:
    with open(project / "models" / "big.onnx", "wb") as big:
        big.truncate(3 * 1024**3)  # sparse: no disk used
    # 2.5 GiB of address space: reading the file whole would fail with a MemoryError.
    result = init(project, "models/big.onnx", *INIT, memory=5 * 1024**3 // 2)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "MemoryError" not in result.stderr, result.stderr
    assert "more than an ONNX file can be" in result.stderr, result.stderr
    assert _written(project) == []
