"""``mlrepro init`` on models that are not 3-channel: the channel count read from the model's
signature (or a PyTorch module's first convolution), a preset of another count refused with the
fix before anything is written, discovery among grey (1 channel) and colour-and-alpha
(4 channels) conventions, and the manifest it writes recorded and passing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers import QUIET, make_images
from init_helpers import init_project

from pytest_mlrepro.cli import main
from pytest_mlrepro.manifest import load_manifest

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")


def _grey_images(folder: Path, count: int = 48, *, bright_label: int = 1) -> None:
    """16×16 grey PNGs, dark (20..80) or bright (170..230); the bright ones labelled
    ``bright_label``, the dark ones the other class."""
    from PIL import Image

    folder.mkdir(parents=True)
    rng = np.random.default_rng(29)
    rows = ["file,class_index"]
    for index in range(count):
        bright = index % 2 == 1
        low = 170 if bright else 20
        pixels = rng.integers(low, low + 60, size=(16, 16)).astype(np.uint8)
        name = f"g{index:02d}.png"
        Image.fromarray(pixels, mode="L").save(folder / name)
        rows.append(f"{name},{bright_label if bright else 1 - bright_label}")
    (folder / "labels.csv").write_text("\n".join(rows) + "\n")


def _model(path: Path, shape: list[int | str], axes: list[int], head: np.ndarray) -> None:
    """An ONNX model: the input's mean over ``axes`` (one value per channel), times ``head``
    (channels × classes), plus a bias that centres 0..1 grey at 0.5."""
    from onnx import TensorProto, helper, numpy_helper

    classes = head.shape[1]
    bias = np.zeros(classes, np.float32)
    if head.shape[0] == 1:  # grey: logits (0.5 - m)·10 and (m - 0.5)·10
        bias = np.asarray([5.0, -5.0], np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("ReduceMean", ["input", "axes"], ["means"], keepdims=0),
            helper.make_node("MatMul", ["means", "head"], ["scaled"]),
            helper.make_node("Add", ["scaled", "bias"], ["logits"]),
        ],
        "tiny",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes])],
        [
            numpy_helper.from_array(np.asarray(axes, np.int64), "axes"),
            numpy_helper.from_array(head.astype(np.float32), "head"),
            numpy_helper.from_array(bias, "bias"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


@pytest.fixture(scope="module")
def assets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("channel-assets")
    make_images(root / "data" / "tiny")  # RGB, the dominant channel is the label (0, 1, 2)
    _grey_images(root / "data" / "grey")
    _grey_images(root / "data" / "negatives", bright_label=0)
    (root / "models").mkdir()
    # Grey, NCHW [batch, 1, 16, 16]: 0..1 brightness above 0.5 is class 1.
    _model(root / "models" / "grey.onnx", ["batch", 1, 16, 16], [2, 3],
           np.asarray([[-10.0, 10.0]]))  # fmt: skip
    # Colour and alpha, NHWC [batch, 16, 16, 4]: the brightest colour channel (alpha ignored).
    rgba_head = np.zeros((4, 3))
    rgba_head[[0, 1, 2], [0, 1, 2]] = 10.0
    _model(root / "models" / "rgba.onnx", ["batch", 16, 16, 4], [1, 2], rgba_head)
    return root


@pytest.fixture
def project(
    pytester: pytest.Pytester, assets: Path, monkeypatch: pytest.MonkeyPatch
) -> pytest.Pytester:
    return init_project(pytester, assets, monkeypatch)


def init(*args: str) -> int:
    return main(["init", *args])


def test_discovery_on_a_grey_model_writes_a_grey_manifest_that_passes(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    status = init("models/grey.onnx", "--data", "data/grey", "--discover",
                  "-o", "manifests/grey.yaml")  # fmt: skip
    out, err = capsys.readouterr()
    assert status == 0, out + err
    assert "Traceback" not in out + err
    manifest = load_manifest(project.path / "manifests" / "grey.yaml")
    steps = [step.op for step in manifest.input.preprocess]
    decode = manifest.input.preprocess[0]
    assert decode.mode == "L" and "invert" not in steps  # type: ignore[attr-defined]
    assert (
        "# discovered by mlrepro init --discover: L (luma)"
        in (project.path / "manifests" / "grey.yaml").read_text()
    )
    result = project.runpytest(*QUIET, "manifests/grey.yaml", "--mlrepro-update")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*100.00*golden recorded*"])


def test_discovery_finds_inverted_grey_data(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same model, the data's labels the other way round: what it needs is 255 − x."""
    status = init("models/grey.onnx", "--data", "data/negatives", "--discover",
                  "-o", "manifests/negatives.yaml")  # fmt: skip
    out, err = capsys.readouterr()
    assert status == 0, out + err
    manifest = load_manifest(project.path / "manifests" / "negatives.yaml")
    assert [s.op for s in manifest.input.preprocess][:2] == ["decode", "invert"]
    result = project.runpytest(*QUIET, "manifests/negatives.yaml", "--mlrepro-update")
    result.stdout.fnmatch_lines(["*100.00*golden recorded*"])


def test_discovery_on_a_four_channel_model_decodes_rgba(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    status = init("models/rgba.onnx", "--data", "data/tiny", "--discover",
                  "-o", "manifests/rgba.yaml")  # fmt: skip
    out, err = capsys.readouterr()
    assert status == 0, out + err
    manifest = load_manifest(project.path / "manifests" / "rgba.yaml")
    decode = manifest.input.preprocess[0]
    assert (decode.mode, decode.order) == ("RGBA", "RGB")  # type: ignore[attr-defined]
    # The files are RGB: the opaque alpha the model is fed is declared, not invented silently.
    assert decode.alpha == "add-opaque"  # type: ignore[attr-defined]
    assert manifest.input.layout == "NHWC"
    result = project.runpytest(*QUIET, "manifests/rgba.yaml", "--mlrepro-update")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*100.00*golden recorded*"])


@pytest.mark.parametrize(
    ("model", "data", "expected"),
    [
        ("grey.onnx", "grey", "takes 1 channel; use a grey preset (--preset grey-01, mnist, "
                              "grey-255) or --discover"),
        ("rgba.onnx", "tiny", "takes 4 channels; use --discover (it searches colour-and-alpha "
                              "conventions: decode mode RGBA)"),
    ],
)  # fmt: skip
def test_a_preset_of_another_channel_count_is_refused_with_the_fix(
    project: pytest.Pytester,
    capsys: pytest.CaptureFixture[str],
    model: str,
    data: str,
    expected: str,
) -> None:
    status = init(f"models/{model}", "--data", f"data/{data}", "--preset", "torchvision",
                  "-o", "manifests/m.yaml")  # fmt: skip
    err = capsys.readouterr().err
    assert status == 1, err
    assert "--preset torchvision makes 3-channel colour (RGB) images" in err
    assert expected in err and "Traceback" not in err
    assert not (project.path / "manifests").exists()  # refused before anything is written


def test_a_grey_preset_on_a_grey_model(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    status = init("models/grey.onnx", "--data", "data/grey", "--preset", "grey-01",
                  "-o", "manifests/g.yaml")  # fmt: skip
    assert status == 0, capsys.readouterr()
    manifest = load_manifest(project.path / "manifests" / "g.yaml")
    assert manifest.input.preprocess[0].mode == "L"  # type: ignore[attr-defined]
    result = project.runpytest(*QUIET, "manifests/g.yaml", "--mlrepro-update")
    result.stdout.fnmatch_lines(["*100.00*golden recorded*"])


GREY_CONV_CONFTEST = """\
import pytest_mlrepro


@pytest_mlrepro.model_builder("grey_conv", input_size=16)
def grey_conv():
    import torch

    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 2, 1), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()
    )
"""


def test_a_torch_builder_of_one_channel_gets_a_grey_manifest(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """Weights without a signature: the channels come from the builder's first convolution,
    before the weights are loaded; a colour preset is refused naming it, a grey one,
    discovery and an export to ONNX write grey manifests that pass."""
    torch = pytest.importorskip("torch")
    weights = {
        "0.weight": torch.tensor([[[[-10.0]]], [[[10.0]]]]),
        "0.bias": torch.tensor([5.0, -5.0]),
    }
    torch.save(weights, str(project.path / "models" / "grey.pt"))
    (project.path / "conftest.py").write_text(GREY_CONV_CONFTEST)
    common = ["models/grey.pt", "--builder", "grey_conv", "--data", "data/grey"]
    assert init(*common, "--preset", "torchvision", "-o", "manifests/no.yaml") == 1
    err = capsys.readouterr().err
    assert "the model's first convolution '0' is Conv2d(1, 2" in err
    assert "takes 1 channel; use a grey preset" in err and "Traceback" not in err
    assert init(*common, "--preset", "grey-01", "--name", "preset",
                "-o", "manifests/preset.yaml") == 0  # fmt: skip
    assert init(*common, "--discover", "--name", "found",
                "-o", "manifests/found.yaml") == 0, capsys.readouterr()  # fmt: skip
    # Exported to ONNX at the module's own channel count (a 3-channel trace would fail).
    assert init(*common, "--preset", "grey-01", "--export", "onnx", "--name", "exported",
                "-o", "manifests/exported.yaml") == 0, capsys.readouterr()  # fmt: skip
    for name in ("preset", "found", "exported"):
        manifest = load_manifest(project.path / "manifests" / f"{name}.yaml")
        assert manifest.input.preprocess[0].mode == "L"  # type: ignore[attr-defined]
    result = project.runpytest(*QUIET, "manifests/", "--mlrepro-update")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*100.00*golden recorded*"])


def test_weights_without_a_builder_are_told_the_ways_forward(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    torch = pytest.importorskip("torch")
    torch.save({}, str(project.path / "models" / "w.pt"))
    assert init("models/w.pt", "--data", "data/grey", "--preset", "grey-01") == 1
    err = capsys.readouterr().err
    assert "@pytest_mlrepro.model_builder('NAME', input_size=S)" in err
    assert "--builder NAME" in err and "torch.export.save" in err and "ONNX" in err


def test_a_model_that_fails_when_run_is_an_error_not_a_traceback(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """ONNX Runtime's own exception while init runs the model (two classes gathered from the
    256 pixels, one index out of range) is said as init's error, naming what was being done."""
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [
            helper.make_node("Flatten", ["input"], ["flat"]),
            helper.make_node("Gather", ["flat", "picked"], ["logits"], axis=1),
        ],
        "broken",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 1, 16, 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 2])],
        [numpy_helper.from_array(np.asarray([0, 300], np.int64), "picked")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.save(model, str(project.path / "models" / "broken.onnx"))
    status = init("models/broken.onnx", "--data", "data/grey", "--discover",
                  "-o", "manifests/broken.yaml")  # fmt: skip
    err = capsys.readouterr().err
    assert status == 1, err
    assert "the model failed when run on the discovery candidates: InvalidArgument" in err
    assert "Traceback" not in err and not (project.path / "manifests").exists()
