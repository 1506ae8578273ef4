"""``mlrepro init`` takes the input size from the model (a signature, a builder's declaration, the
module's own record of it) or from ``--size``, and otherwise refuses, writing nothing: a wrong
size is a silently wrong recipe, so it is never assumed."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import QUIET, make_assets, make_onnx_with_input
from init_helpers import MEANS_MODULE, import_torch_parts, init_project

from pytest_mlrepro.cli import main
from pytest_mlrepro.manifest import load_manifest
from pytest_mlrepro.onboarding import module_input_size
from pytest_mlrepro.pipeline import Resize

SIZED_CONFTEST = (
    MEANS_MODULE
    + """\


@pytest_mlrepro.model_builder("declared", input_size=16)
def declared():
    return Means()


@pytest_mlrepro.model_builder("recorded")
def recorded():
    module = Means()
    module.image_size = 12  # what e.g. efficientnet_lite_pytorch keeps as input_image_size
    return module


@pytest_mlrepro.model_builder("silent")
def silent():
    return Means()
"""
)


@pytest.fixture(scope="module")
def assets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import_torch_parts()
    import torch

    root = make_assets(tmp_path_factory.mktemp("size-assets"), torchscript=False)
    torch.save({"scale": torch.full((3,), 10.0)}, str(root / "models" / "means.pt"))
    make_onnx_with_input(root / "models" / "free.onnx", ["batch", 3, "height", "width"])
    make_onnx_with_input(root / "models" / "fixed.onnx", ["batch", 3, 16, 16])
    return root


@pytest.fixture
def project(
    pytester: pytest.Pytester, assets: Path, monkeypatch: pytest.MonkeyPatch
) -> pytest.Pytester:
    return init_project(pytester, assets, monkeypatch, conftest=SIZED_CONFTEST)


def init(*args: str) -> int:
    return main(["init", *args, "--data", "data/tiny", "--preset", "keras-tf"])


def resize_size(path: Path) -> tuple[int, int]:
    manifest = load_manifest(path)
    (resize,) = [s for s in manifest.input.preprocess if isinstance(s, Resize)]
    assert isinstance(resize.size, tuple), resize.size  # init writes [height, width]
    return resize.size


def nothing_written(root: Path) -> bool:
    return not (root / "manifests").exists() and not (root / "golden").exists()


def test_a_builder_declared_size_is_used(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    status = init("models/means.pt", "--builder", "declared", "-o", "manifests/d.yaml")
    assert status == 0, capsys.readouterr()
    path = project.path / "manifests" / "d.yaml"
    assert resize_size(path) == (16, 16)
    assert "# Input size 16×16: declared by model builder 'declared'." in path.read_text()
    result = project.runpytest(*QUIET, "manifests/d.yaml", "--mlrepro-update")
    result.assert_outcomes(passed=1)


def test_the_size_the_module_records_is_used(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    status = init("models/means.pt", "--builder", "recorded", "-o", "manifests/r.yaml")
    assert status == 0, capsys.readouterr()
    path = project.path / "manifests" / "r.yaml"
    assert resize_size(path) == (12, 12)
    assert "the module's image_size attribute" in path.read_text()


def test_a_module_that_does_not_say_is_refused_without_size(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    assert init("models/means.pt", "--builder", "silent", "-o", "manifests/s.yaml") == 1
    err = capsys.readouterr().err
    assert "cannot tell the input size" in err and "give --size S" in err
    assert nothing_written(project.path)
    # --size settles it.
    status = init(
        "models/means.pt", "--builder", "silent", "--size", "20", "-o", "manifests/s.yaml"
    )
    assert status == 0, capsys.readouterr()
    assert resize_size(project.path / "manifests" / "s.yaml") == (20, 20)


def test_an_onnx_model_with_a_free_size_is_refused_without_size(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    assert init("models/free.onnx", "-o", "manifests/free.yaml") == 1
    assert "give --size S" in capsys.readouterr().err
    assert nothing_written(project.path)
    assert init("models/free.onnx", "--size", "24", "-o", "manifests/free.yaml") == 0
    assert resize_size(project.path / "manifests" / "free.yaml") == (24, 24)


def test_the_onnx_signature_gives_the_size_and_a_contradicting_size_is_refused(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    assert init("models/fixed.onnx", "--size", "32", "-o", "manifests/fixed.yaml") == 1
    assert "the model's input is 16×16" in capsys.readouterr().err
    assert nothing_written(project.path)
    assert init("models/fixed.onnx", "-o", "manifests/fixed.yaml") == 0
    path = project.path / "manifests" / "fixed.yaml"
    assert resize_size(path) == (16, 16)
    assert "# Input size 16×16: the model's input signature." in path.read_text()


def test_a_preset_refuses_a_size_it_does_not_define(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["init", "models/fixed.onnx", "--data", "data/tiny", "--preset",
                   "efficientnet-lite2", "-o", "manifests/l2.yaml"])  # fmt: skip
    assert status == 1
    assert "defined for size 260 only" in capsys.readouterr().err
    assert nothing_written(project.path)


class _Timm:
    def __init__(self) -> None:
        self.pretrained_cfg = {"input_size": (3, 288, 256)}


class _PatchEmbed:
    img_size = (384, 384)


class _Vit:
    patch_embed = _PatchEmbed()  # timm's ViT keeps its size there


def test_module_input_size_reads_the_known_records() -> None:
    assert module_input_size(_Timm()) == ((288, 256), "the module's pretrained_cfg['input_size']")
    assert module_input_size(_Vit()) == ((384, 384), "the module's patch_embed.img_size")
    assert module_input_size(object()) is None
    flagged = type("Flagged", (), {"image_size": True})()  # a bool is no size
    assert module_input_size(flagged) is None
