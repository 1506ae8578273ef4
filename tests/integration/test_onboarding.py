"""``mlrepro init``, presets, recipe discovery, class-folder data sets, and a run with no golden
that says so before it runs the model (issue 14): the owner's loop on tiny models built here."""

from __future__ import annotations

import importlib.util
import shutil
import warnings
from pathlib import Path

import pytest
from helpers import (
    BUILDERS_CONFTEST,
    QUIET,
    make_assets,
    make_empty_weights,
    sha256,
)
from init_helpers import init_project

from pytest_mlrepro.cli import main
from pytest_mlrepro.data._datasets import read_checksum_lines
from pytest_mlrepro.manifest import load_manifest
from pytest_mlrepro.onboarding import checksum_line
from pytest_mlrepro.onboarding.export import export_onnx


@pytest.fixture(scope="module")
def assets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_assets(tmp_path_factory.mktemp("onboard-assets"))
    # torch.export is imported here, once: an in-process pytest run (pytester) unloads what it
    # imported, and torch.export's registrations cannot be made twice.
    import torch

    class Means(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.mean(dim=(2, 3)) * 10.0

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.export.export(Means(), (torch.zeros(2, 3, 16, 16),))
        torch.export.save(program, str(root / "models" / "tiny.pt2"))
    # The reusable ONNX export, twice (torch.onnx is imported here for the same reason).
    for copy in ("a", "b"):
        export_onnx(Means(), root / f"exported_{copy}.onnx", size=16)
    return root


@pytest.fixture
def project(
    pytester: pytest.Pytester, assets: Path, monkeypatch: pytest.MonkeyPatch
) -> pytest.Pytester:
    """A project folder holding the tiny data set under data/ and the models under models/."""
    return init_project(pytester, assets, monkeypatch)


def init(*args: str) -> int:
    return main(["init", *args])


def test_init_record_pass_then_drift_is_diagnosed(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """The owner's loop: init writes a manifest that records at once; a plain run passes; a
    changed preprocessing fails with a diagnosis."""
    status = init(
        "models/tiny.onnx", "--data", "data/tiny", "--preset", "efficientnet-lite",
        "--size", "16", "-o", "manifests/tiny.yaml",
    )  # fmt: skip
    assert status == 0, capsys.readouterr()
    text = (project.path / "manifests" / "tiny.yaml").read_text()
    assert "# preset 'efficientnet-lite'" in text  # where the recipe came from
    manifest = load_manifest(project.path / "manifests" / "tiny.yaml")
    assert manifest.model.file is not None
    assert manifest.model.file.sha256 == sha256(project.path / "models" / "tiny.onnx")
    assert manifest.input.name == "input" and manifest.input.layout == "NCHW"
    assert manifest.dataset.classes == 3
    checksums = read_checksum_lines(project.path / "manifests" / "datasets" / "tiny.sha256")[0]
    assert "labels.csv" in checksums and len(checksums) == 25
    project.runpytest(*QUIET, "manifests/tiny.yaml", "--mlrepro-update").assert_outcomes(passed=1)
    project.runpytest(*QUIET, "manifests/tiny.yaml").assert_outcomes(passed=1)
    path = project.path / "manifests" / "tiny.yaml"
    path.write_text(text.replace("order: RGB", "order: BGR"))
    result = project.runpytest(*QUIET, "manifests/tiny.yaml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*diagnosis*"])
    result.stdout.fnmatch_lines(["*BGR*"])


def test_init_needs_a_preset_or_discovery(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    assert init("models/tiny.onnx", "--data", "data/tiny") == 2
    assert "give --preset NAME or --discover" in capsys.readouterr().err
    assert not (project.path / "manifests").exists()


def test_discovery_finds_the_colour_order_the_labels_need(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """Labels swapped 0 <-> 2 are what a BGR model gives: discovery must pick BGR, print the
    ranking with intervals and write the runner-up in a comment."""
    labels = project.path / "data" / "tiny" / "labels.csv"
    rows = labels.read_text().splitlines()
    swap = {"0": "2", "2": "0", "1": "1"}
    labels.write_text(
        "\n".join([rows[0]] + [f"{r.split(',')[0]},{swap[r.split(',')[1]]}" for r in rows[1:]])
        + "\n"
    )
    status = init(
        "models/tiny.onnx", "--data", "data/tiny", "--discover", "--size", "16",
        "-o", "manifests/bgr.yaml",
    )  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0, out
    assert "recipe discovery:" in out and "95% Wilson interval" in out
    manifest = load_manifest(project.path / "manifests" / "bgr.yaml")
    assert manifest.input.preprocess[0].order == "BGR"  # type: ignore[attr-defined]
    text = (project.path / "manifests" / "bgr.yaml").read_text()
    assert "# discovered by mlrepro init --discover: BGR" in text
    assert "# runner-up:" in text
    result = project.runpytest(*QUIET, "manifests/bgr.yaml", "--mlrepro-update")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*100.00*golden recorded*"])


def test_class_folders_are_a_data_set(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """One folder per class (ImageFolder): init writes labels_from: folders, the loader numbers
    the classes by sorted folder name, and a class folder the checksum list lacks is refused."""
    flat = project.path / "data" / "tiny"
    folders = project.path / "data" / "tinyfolders"
    names = {"0": "a red", "1": "b green's", "2": "c blue"}  # spaces and apostrophes
    for row in (flat / "labels.csv").read_text().splitlines()[1:]:
        file, label = row.split(",")
        (folders / names[label]).mkdir(parents=True, exist_ok=True)
        shutil.copy(flat / file, folders / names[label] / file)
    status = init(
        "models/tiny.onnx", "--data", "data/tinyfolders", "--preset", "efficientnet-lite",
        "--size", "16", "-o", "manifests/folders.yaml",
    )  # fmt: skip
    assert status == 0, capsys.readouterr()
    manifest = load_manifest(project.path / "manifests" / "folders.yaml")
    assert manifest.dataset.labels_from == "folders"
    listed = project.path / "manifests" / "datasets" / "tinyfolders.sha256"
    checksums = read_checksum_lines(listed)[0]
    assert "b green's/img01.png" in checksums and len(checksums) == 24
    result = project.runpytest(*QUIET, "manifests/folders.yaml", "--mlrepro-update")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*24 *100.00*golden recorded*"])  # labels in sorted order
    (folders / "0 extra").mkdir()
    result = project.runpytest(*QUIET, "manifests/folders.yaml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*class folders that*do*not list: '0 extra'*"])


def test_a_word_yaml_reads_as_another_type_is_written_quoted(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """A data folder named ``yes`` (a boolean to YAML, unquoted) is the data set's name in the
    manifest init writes: the manifest loads, and names it."""
    shutil.copytree(project.path / "data" / "tiny", project.path / "data" / "yes")
    status = init(
        "models/tiny.onnx", "--data", "data/yes", "--preset", "efficientnet-lite",
        "--size", "16", "-o", "manifests/yes.yaml",
    )  # fmt: skip
    assert status == 0, capsys.readouterr()
    assert load_manifest(project.path / "manifests" / "yes.yaml").dataset.name == "yes"


def test_checksum_lines_read_back_for_odd_names(tmp_path: Path) -> None:
    names = ["yellow lady's slipper.JPEG", "back\\slash.png", "two  spaces.png"]
    path = tmp_path / "list.sha256"
    path.write_text("".join(checksum_line("ab" * 32, n) for n in names))
    assert read_checksum_lines(path)[0] == {n: "ab" * 32 for n in names}


def test_init_reads_a_torchscript_model(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    status = init(
        "models/tiny.pt", "--data", "data/tiny", "--preset", "timm", "--size", "16",
        "-o", "manifests/ts.yaml",
    )  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0, out
    assert "the model outputs 3 classes" in out  # asked the loaded model
    manifest = load_manifest(project.path / "manifests" / "ts.yaml")
    assert (manifest.model.format, manifest.framework.name) == ("torchscript", "torch")
    project.runpytest(*QUIET, "manifests/ts.yaml", "--mlrepro-update").assert_outcomes(passed=1)


def test_init_reads_a_torch_export_program(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    status = init(
        "models/tiny.pt2", "--data", "data/tiny", "--preset", "keras-torch",
        "-o", "manifests/ep.yaml",
    )  # fmt: skip
    assert status == 0, capsys.readouterr()
    manifest = load_manifest(project.path / "manifests" / "ep.yaml")
    assert manifest.model.format == "torch_export"
    assert manifest.input.preprocess[1].size == (16, 16)  # type: ignore[attr-defined]
    assert manifest.dataset.classes == 3


def test_init_of_a_state_dict_needs_its_builder(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    make_empty_weights(project.path / "models" / "weights.pt")
    assert init("models/weights.pt", "--data", "data/tiny", "--preset", "keras-caffe") == 1
    assert "--builder NAME" in capsys.readouterr().err
    (project.path / "conftest.py").write_text(BUILDERS_CONFTEST)
    status = init(
        "models/weights.pt", "--data", "data/tiny", "--preset", "keras-caffe", "--size", "16",
        "--builder", "means", "-o", "manifests/sd.yaml",
    )  # fmt: skip
    assert status == 0, capsys.readouterr()
    manifest = load_manifest(project.path / "manifests" / "sd.yaml")
    assert (manifest.model.format, manifest.model.builder) == ("state_dict", "means")
    assert manifest.input.preprocess[0].order == "BGR"  # type: ignore[attr-defined]


def test_a_run_without_golden_says_so_before_running_the_model(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """The model raises when called: no golden is reported, not the model's error."""
    make_empty_weights(project.path / "models" / "weights.pt")
    (project.path / "conftest.py").write_text(BUILDERS_CONFTEST)
    status = init(
        "models/weights.pt", "--data", "data/tiny", "--preset", "keras-caffe", "--size", "16",
        "--builder", "means", "-o", "manifests/sd.yaml",
    )  # fmt: skip
    assert status == 0, capsys.readouterr()
    path = project.path / "manifests" / "sd.yaml"
    path.write_text(path.read_text().replace("builder: means", "builder: raises"))
    result = project.runpytest(*QUIET, "manifests/sd.yaml")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["no golden at golden/weights.json: record one with"])
    result.stdout.no_fnmatch_line("*the model broke*")
    result.stdout.fnmatch_lines(["*weights *cpu *torch *24 *no golden*"])


@pytest.fixture(scope="module")
def tf_models(tf_model_files: Path) -> Path:
    """The TensorFlow formats of tests/tf_helpers.py (tests/conftest.py makes them)."""
    # Imported once, before any test's pytester: pytester unloads the modules a test imported,
    # and TensorFlow cannot be imported a second time into one process.
    importlib.import_module("tensorflow")
    importlib.import_module("keras")
    if importlib.util.find_spec("ai_edge_litert") is not None:
        importlib.import_module("ai_edge_litert.interpreter")
    return tf_model_files


@pytest.mark.parametrize(
    ("file", "fmt", "framework"),
    [
        ("tiny.keras", "keras", "tensorflow"),
        ("tiny_saved_model.tar", "saved_model", "tensorflow"),
        ("tiny.tflite", "tflite", "tflite"),
        ("tiny_int8.tflite", "tflite", "tflite"),
    ],
)
def test_init_reads_the_tensorflow_formats(
    project: pytest.Pytester,
    tf_models: Path,
    file: str,
    fmt: str,
    framework: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shutil.copy(tf_models / file, project.path / "models" / file)
    status = init(
        f"models/{file}", "--data", "data/tiny", "--preset", "keras-tf", "-o", "manifests/tf.yaml"
    )
    assert status == 0, capsys.readouterr()
    manifest = load_manifest(project.path / "manifests" / "tf.yaml")
    assert (manifest.model.format, manifest.framework.name) == (fmt, framework)
    assert (manifest.input.name, manifest.input.layout) == ("input", "NHWC")
    assert manifest.input.dtype == "float32"  # a quantised TFLite input takes float32 data
    assert manifest.input.preprocess[1].size == (16, 16)  # type: ignore[attr-defined]
    assert manifest.dataset.classes == 3


def test_the_onnx_export_is_byte_reproducible_and_onboards(
    project: pytest.Pytester, assets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = assets / "exported_a.onnx", assets / "exported_b.onnx"
    assert first.read_bytes() == second.read_bytes()
    shutil.copy(first, project.path / "models" / "exported.onnx")
    status = init(
        "models/exported.onnx", "--data", "data/tiny", "--preset", "inception",
        "-o", "manifests/exported.yaml",
    )  # fmt: skip
    assert status == 0, capsys.readouterr()
    manifest = load_manifest(project.path / "manifests" / "exported.yaml")
    assert manifest.input.preprocess[2].size == (16, 16)  # type: ignore[attr-defined]
    project.runpytest(*QUIET, "manifests/exported.yaml", "--mlrepro-update").assert_outcomes(
        passed=1
    )


def test_init_pins_onnx_external_data(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(project.path / "models" / "tiny.onnx"))
    (scale,) = model.graph.initializer  # as raw bytes, which onnx saves as external data
    scale.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(scale), scale.name))
    onnx.save(
        model,
        str(project.path / "models" / "split.onnx"),
        save_as_external_data=True,
        location="split.weights",
        size_threshold=0,
    )
    status = init(
        "models/split.onnx", "--data", "data/tiny", "--preset", "timm", "--size", "16",
        "-o", "manifests/split.yaml",
    )  # fmt: skip
    assert status == 0, capsys.readouterr()
    manifest = load_manifest(project.path / "manifests" / "split.yaml")
    weights = project.path / "models" / "split.weights"
    assert manifest.model.external_data == {"split.weights": sha256(weights)}
    project.runpytest(*QUIET, "manifests/split.yaml", "--mlrepro-update").assert_outcomes(passed=1)
