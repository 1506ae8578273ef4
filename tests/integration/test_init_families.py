"""``mlrepro init --discover`` on the families whose files say more than an 8-bit colour image:
16-bit grey PNGs, 12-bit data stored in 16-bit TIFFs, colour with an alpha that carries the
class, 13-band ``.npy`` arrays (H×W×C, and C×H×W behind a channels-last model whose signature
``[batch, 32, 32, 13]`` alone does not tell its layout) and multi-page TIFFs.

For each, a small model is fitted here (seeded) on features made with a known recipe (the
truth): a logistic regression, by maximum likelihood, on the per-channel means of the
preprocessed image. The classes overlap (the truth gets 75-95 % right), so a recipe that
scales the features otherwise is not only less accurate but less likely: the fitted model is the
most likely of every affine transform of its features, which is what discovery ranks by. init
reads the files, discovers a recipe and writes a manifest; the predictions of that manifest's
preprocessing agree with the truth's on ≥ 99 % of the samples, each computed with the project's
own pipeline ops and run through ONNX Runtime. A preset of the wrong family is refused."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import QUIET
from init_helpers import init_project

from pytest_mlrepro import pipeline
from pytest_mlrepro.cli import main
from pytest_mlrepro.manifest import load_manifest
from pytest_mlrepro.onboarding._presets import (
    Bands,
    Candidate,
    Geometry,
    StepText,
    Values,
    decode_steps,
)

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

COUNT = 128


@dataclass(frozen=True)
class Family:
    """A data set written by ``write`` (each file's array and label), the recipe it was made
    for, and the model's input layout and spatial size."""

    name: str
    write: Callable[[Path, int, np.random.Generator], tuple[str, int]]
    order: str  # the truth's decode order (L16, RGBA, bands)
    values: Callable[[list[np.ndarray]], Values]  # the truth's values, from the decoded files
    layout: str = "NCHW"
    size: int = 16
    bands: Bands | None = None


def _png16(folder: Path, index: int, rng: np.random.Generator) -> tuple[str, int]:
    """16-bit grey, a faint class: a level of 30000 or 30400 out of 65535 (σ 200), a little
    texture: the high byte that mode L reads is 116 to 120 for both."""
    from PIL import Image

    label = index % 2
    level = 30000 + 400 * label + rng.normal(0, 200)
    pixels = np.rint(level) + rng.integers(-10, 11, size=(16, 16))
    name = f"s{index:03d}.png"
    Image.fromarray(pixels.astype(np.uint16)).save(folder / name)
    return name, label


def _tiff12(folder: Path, index: int, rng: np.random.Generator) -> tuple[str, int]:
    """12-bit values (0..4095) in 16-bit TIFFs: a level of 1800 or 2000 (σ 100)."""
    from PIL import Image

    label = index % 2
    level = 1800 + 200 * label + rng.normal(0, 100)
    pixels = np.rint(level) + rng.integers(-5, 6, size=(16, 16))
    name = f"t{index:03d}.tif"
    Image.fromarray(pixels.astype(np.uint16)).save(folder / name)
    return name, label


def _rgba(folder: Path, index: int, rng: np.random.Generator) -> tuple[str, int]:
    """Colour noise; the class is the alpha shape: an opaque square of 6 or 12 pixels."""
    from PIL import Image

    label = index % 2
    image = rng.integers(0, 256, size=(16, 16, 4))
    image[:, :, 3] = 0
    side = 12 if label else 6
    start = (16 - side) // 2 + int(rng.integers(-2, 3)) * (1 - label)
    image[start : start + side, start : start + side, 3] = 255
    name = f"a{index:03d}.png"
    Image.fromarray(image.astype(np.uint8), "RGBA").save(folder / name)
    return name, label


BAND_LEVELS = 1000 * np.arange(1, 14)


def _bands(index: int, rng: np.random.Generator, size: int) -> tuple[np.ndarray, int]:
    """13 bands at levels 1000..13000 (σ 250); class 1 has band 4 brighter and band 9 darker
    by 300."""
    label = index % 2
    levels = np.rint(BAND_LEVELS + rng.normal(0, 250, size=13))
    levels[4] += 300 * label
    levels[9] -= 300 * label
    array = levels[None, None, :] + rng.integers(-10, 11, size=(size, size, 13))
    return array.astype(np.uint16), label


def _npy_hwc(folder: Path, index: int, rng: np.random.Generator) -> tuple[str, int]:
    array, label = _bands(index, rng, 32)
    name = f"b{index:03d}.npy"
    np.save(folder / name, array)
    return name, label


def _npy_chw(folder: Path, index: int, rng: np.random.Generator) -> tuple[str, int]:
    array, label = _bands(index, rng, 16)
    name = f"c{index:03d}.npy"
    np.save(folder / name, np.ascontiguousarray(array.transpose(2, 0, 1)))
    return name, label


def _pages(folder: Path, index: int, rng: np.random.Generator) -> tuple[str, int]:
    """5 pages of 16-bit samples; class 1 has page 2 at 24000 instead of 20000 (σ 3000)."""
    from PIL import Image

    label = index % 2
    means = np.asarray([8000, 12000, 20000 + 4000 * label, 30000, 40000])
    levels = np.rint(means + rng.normal(0, 3000, 5))
    pages = [
        Image.fromarray((level + rng.integers(-20, 21, size=(16, 16))).astype(np.uint16))
        for level in levels
    ]
    name = f"p{index:03d}.tif"
    pages[0].save(folder / name, save_all=True, append_images=pages[1:])
    return name, label


def _scaled(divisor: float) -> Callable[[list[np.ndarray]], Values]:
    return lambda arrays: Values(f"/{divisor:g}", divisor, None, None)


def _per_band(arrays: list[np.ndarray]) -> Values:
    flat = np.concatenate([a.reshape(-1, a.shape[2]).astype(np.float64) for a in arrays])
    return Values("per-band mean/std", None, tuple(flat.mean(0)), tuple(flat.std(0)))


RGBA_TRUTH = Values("/255, mean 0.5, std (0.25, 0.25, 0.25, 0.5)", 255.0, (0.5,) * 4,
                    (0.25, 0.25, 0.25, 0.5))  # fmt: skip
FAMILIES = {
    f.name: f
    for f in (
        Family("grey16", _png16, "L16", _scaled(65535.0)),
        Family("tiff12", _tiff12, "L16", _scaled(4095.0)),
        Family("rgba", _rgba, "RGBA", lambda arrays: RGBA_TRUTH, layout="NHWC"),
        Family("npy_hwc", _npy_hwc, "bands", _per_band, "NHWC", 32,
               Bands(13, "uint16", "numpy")),
        Family("npy_chw", _npy_chw, "bands", _per_band, "NCHW", 16,
               Bands(13, "uint16", "numpy", "CHW")),
        Family("pages", _pages, "bands", _scaled(65535.0), "NCHW", 16,
               Bands(5, "uint16", "pil")),
    )
}  # fmt: skip


def _steps(texts: list[StepText]) -> list[pipeline.Step]:
    steps = []
    for text in texts:
        ((op, params),) = text.items()
        steps.append(pipeline.STEPS[op](**{k: tuple(v) if isinstance(v, list) else v
                                           for k, v in params.items()}))  # fmt: skip
    return steps


def _tensors(steps: list[pipeline.Step], files: list[Path]) -> np.ndarray:
    """The files through ``steps``, with the project's own ops (as a test run computes them)."""
    decode, rest = steps[0], steps[1:]
    out = []
    for file in files:
        tensor = decode.decode(file.read_bytes(), file.name)  # type: ignore[attr-defined]
        for step in rest:
            tensor = step.apply(tensor)
        out.append(tensor.array)
    return np.stack(out)


def _truth_steps(family: Family, arrays: list[np.ndarray]) -> list[StepText]:
    size = family.size
    candidate = Candidate(family.order, Geometry("resize", method="bilinear"),
                          family.values(arrays), bands=family.bands)  # fmt: skip
    return candidate.steps(size, size, family.layout, "float32")


def _logistic(features: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, float]:
    """Logistic regression by maximum likelihood (Newton's method on standardised features,
    a negligible ridge for conditioning): the weights and bias on the raw features."""
    mu, sd = features.mean(0), features.std(0)
    sd = np.where(sd > 0, sd, 1.0)
    x = np.column_stack([(features - mu) / sd, np.ones(len(features))])
    beta = np.zeros(x.shape[1])
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(x @ beta)))
        hessian = x.T @ (x * (p * (1 - p))[:, None]) + 1e-6 * np.eye(x.shape[1])
        beta += np.linalg.solve(hessian, x.T @ (labels - p) - 1e-6 * beta)
    w = beta[:-1] / sd
    return w, float(beta[-1] - w @ mu)


def _model(
    path: Path, family: Family, features: np.ndarray, labels: np.ndarray
) -> tuple[np.ndarray, float]:
    """The per-channel means of the input times a head fitted on ``features`` (the truth's
    per-channel means) by logistic regression: logits (0, w·f + b)."""
    from onnx import TensorProto, helper, numpy_helper

    channels = features.shape[1]
    w, b = _logistic(features, labels)
    head = np.stack([np.zeros(channels), w], axis=1).astype(np.float32)
    bias = np.asarray([0.0, b], np.float32)
    size = family.size
    shape: list[int | str] = (
        ["batch", channels, size, size]
        if family.layout == "NCHW"
        else ["batch", size, size, channels]
    )
    axes = [2, 3] if family.layout == "NCHW" else [1, 2]
    graph = helper.make_graph(
        [
            helper.make_node("ReduceMean", ["input", "axes"], ["means"], keepdims=0),
            helper.make_node("MatMul", ["means", "head"], ["scaled"]),
            helper.make_node("Add", ["scaled", "bias"], ["logits"]),
        ],
        family.name,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 2])],
        [
            numpy_helper.from_array(np.asarray(axes, np.int64), "axes"),
            numpy_helper.from_array(head, "head"),
            numpy_helper.from_array(bias, "bias"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return w, b


def _predict(model: Path, batch: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    out = session.run(None, {"input": batch.astype(np.float32)})[0]
    return np.asarray(out).argmax(axis=1)


@pytest.fixture(scope="module")
def assets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every family's data set under data/NAME, its model as models/NAME.onnx, and the truth's
    predictions as data/NAME.truth.npy (outside the data set's folder)."""
    root = tmp_path_factory.mktemp("family-assets")
    (root / "models").mkdir()
    for seed, family in enumerate(FAMILIES.values()):
        folder = root / "data" / family.name
        folder.mkdir(parents=True)
        rng = np.random.default_rng(100 + seed)
        rows = [family.write(folder, index, rng) for index in range(COUNT)]
        (folder / "labels.csv").write_text(
            "file,class_index\n" + "".join(f"{n},{label}\n" for n, label in rows)
        )
        files = [folder / name for name, _ in rows]
        labels = np.asarray([label for _, label in rows])
        decoded = _tensors(_steps(decode_steps(family.order, bands=family.bands)), files)
        truth = _tensors(_steps(_truth_steps(family, list(decoded))), files)
        axes = (2, 3) if family.layout == "NCHW" else (1, 2)
        model = root / "models" / f"{family.name}.onnx"
        w, b = _model(model, family, truth.mean(axis=axes).astype(np.float64), labels)
        np.savez(root / "data" / f"{family.name}.fit.npz", w=w, b=b)
        predicted = _predict(model, truth)
        assert (predicted == labels).mean() >= 0.7, family.name  # the truth works
        np.save(root / "data" / f"{family.name}.truth.npy", predicted)
    return root


@pytest.fixture
def project(
    pytester: pytest.Pytester, assets: Path, monkeypatch: pytest.MonkeyPatch
) -> pytest.Pytester:
    return init_project(pytester, assets, monkeypatch)


def _agreement(project: pytest.Pytester, name: str) -> float:
    manifest = load_manifest(project.path / "manifests" / f"{name}.yaml")
    folder = project.path / "data" / name
    files = [folder / line.split(",")[0]
             for line in (folder / "labels.csv").read_text().splitlines()[1:]]  # fmt: skip
    found = _predict(project.path / "models" / f"{name}.onnx",
                     _tensors(list(manifest.input.preprocess), files))  # fmt: skip
    truth = np.load(project.path / "data" / f"{name}.truth.npy")
    return float((found == truth).mean())


@pytest.mark.parametrize("name", list(FAMILIES))
def test_discovery_reproduces_the_true_recipe(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    family = FAMILIES[name]
    status = main(["init", f"models/{name}.onnx", "--data", f"data/{name}", "--discover",
                   "-o", f"manifests/{name}.yaml"])  # fmt: skip
    out, err = capsys.readouterr()
    assert status == 0, out + err
    assert "Traceback" not in out + err
    text = (project.path / "manifests" / f"{name}.yaml").read_text()
    manifest = load_manifest(project.path / "manifests" / f"{name}.yaml")
    decode = manifest.input.preprocess[0]
    want = {"L16": "L16", "RGBA": "RGBA", "bands": "bands"}[family.order]
    assert decode.mode == want, text  # type: ignore[attr-defined]
    assert manifest.input.layout == family.layout, text
    if family.bands is not None:
        assert (decode.channels, decode.dtype) == (family.bands.channels, "uint16")  # type: ignore[attr-defined]
        assert decode.axes == ("CHW" if family.bands.axes == "CHW" else None)  # type: ignore[attr-defined]
    assert "the data's files, read first:" in text
    assert _agreement(project, name) >= 0.99, out
    # The manifest written runs: a golden recorded from it.
    result = project.runpytest(*QUIET, f"manifests/{name}.yaml", "--mlrepro-update")
    result.assert_outcomes(passed=1)


def test_the_channels_last_model_is_read_by_the_data_band_count(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """[batch, 32, 32, 13]: neither axis is 1, 3 or 4; the data's 13 bands say NHWC."""
    status = main(["init", "models/npy_hwc.onnx", "--data", "data/npy_hwc", "--discover",
                   "-o", "manifests/m.yaml"])  # fmt: skip
    assert status == 0, capsys.readouterr()
    data = yaml.safe_load((project.path / "manifests" / "m.yaml").read_text())
    assert data["inputs"][0]["layout"] == "NHWC"
    decode = data["inputs"][0]["preprocess"][0]["decode"]
    assert decode["channels"] == 13 and "32" not in str(decode)


@pytest.mark.parametrize(
    ("name", "preset", "expected"),
    [
        ("grey16", "grey-01", "the data's files are 16-bit grey"),
        ("tiff12", "mnist", "12-bit values, up to"),
        ("npy_chw", "grey-01", "13-band uint16 .npy arrays, bands first"),
    ],
)
def test_a_preset_of_another_family_is_refused(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str], name: str, preset: str,
    expected: str,
) -> None:  # fmt: skip
    status = main(["init", f"models/{name}.onnx", "--data", f"data/{name}", "--preset", preset,
                   "-o", "manifests/m.yaml"])  # fmt: skip
    err = capsys.readouterr().err
    assert status == 1, err
    assert expected in err and "Traceback" not in err, err
    fix = "L16" if name != "npy_chw" else "decode: {mode: bands, channels: 13, dtype: uint16}"
    assert f"--preset {preset} decodes" in err and fix in err
    assert not (project.path / "manifests").exists()


def test_a_poor_best_is_said_before_it_is_written(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """The grey16 files under labels that have nothing to do with them (seeded shuffle): the
    best recipe is near chance, which init says in words, with the runners-up, and writes as a
    TODO in the manifest."""
    folder = project.path / "data" / "grey16"
    rows = folder.joinpath("labels.csv").read_text().splitlines()
    labels = np.random.default_rng(7).permutation([int(r.split(",")[1]) for r in rows[1:]])
    names = [r.split(",")[0] for r in rows[1:]]
    folder.joinpath("labels.csv").write_text(
        "file,class_index\n" + "".join(f"{n},{label}\n" for n, label in zip(names, labels))
    )
    status = main(["init", "models/grey16.onnx", "--data", "data/grey16", "--discover",
                   "-o", "manifests/poor.yaml"])  # fmt: skip
    out, err = capsys.readouterr()
    assert status == 0, out + err
    assert "the best recipe found is poor: top-1" in out and "Runners-up: L16" in out, out
    assert "near chance for 2 classes (50.0%)" in out
    text = (project.path / "manifests" / "poor.yaml").read_text()
    assert "# TODO: the best recipe found is poor" in text


def test_an_rgba_data_set_with_files_without_alpha_is_refused_naming_them(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    from PIL import Image

    folder = project.path / "data" / "rgba"
    for name in ("a001.png", "a002.png"):
        with Image.open(folder / name) as image:
            image.convert("RGB").save(folder / name)
    status = main(["init", "models/rgba.onnx", "--data", "data/rgba", "--discover",
                   "-o", "manifests/m.yaml"])  # fmt: skip
    err = capsys.readouterr().err
    assert status == 1, err
    assert "2 of the 128 files read have no alpha channel ('a001.png', 'a002.png')" in err, err
    assert not (project.path / "manifests").exists()


@pytest.mark.slow
def test_an_nhwc_tflite_model_of_13_bands(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """The npy_hwc model as Keras → TFLite (its signature [1, 32, 32, 13]: the layout told by
    the data's 13 bands): init discovers a manifest that agrees with the truth, run by LiteRT."""
    pytest.importorskip("tensorflow")
    import keras
    import tensorflow as tf

    from pytest_mlrepro.runners.tensorflow import litert_interpreter

    fit = np.load(project.path / "data" / "npy_hwc.fit.npz")
    inputs = keras.Input(shape=(32, 32, 13), name="input")
    dense = keras.layers.Dense(2, name="logits")
    model = keras.Model(inputs, dense(keras.layers.GlobalAveragePooling2D()(inputs)))
    dense.set_weights([np.stack([np.zeros(13), fit["w"]], 1).astype(np.float32),
                       np.asarray([0.0, float(fit["b"])], np.float32)])  # fmt: skip
    path = project.path / "models" / "bands.tflite"
    path.write_bytes(tf.lite.TFLiteConverter.from_keras_model(model).convert())
    status = main(["init", "models/bands.tflite", "--data", "data/npy_hwc", "--discover",
                   "-o", "manifests/bands.yaml"])  # fmt: skip
    out, err = capsys.readouterr()
    assert status == 0, out + err
    manifest = load_manifest(project.path / "manifests" / "bands.yaml")
    assert manifest.input.layout == "NHWC"
    assert manifest.input.preprocess[0].channels == 13  # type: ignore[attr-defined]
    folder = project.path / "data" / "npy_hwc"
    files = [folder / line.split(",")[0]
             for line in (folder / "labels.csv").read_text().splitlines()[1:]]  # fmt: skip
    interpreter_class, _ = litert_interpreter()
    interpreter = interpreter_class(model_path=str(path))
    interpreter.allocate_tensors()
    found = []
    for tensor in _tensors(list(manifest.input.preprocess), files):
        interpreter.set_tensor(interpreter.get_input_details()[0]["index"], tensor[None])
        interpreter.invoke()
        found.append(int(interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
                         .argmax()))  # fmt: skip
    truth = np.load(project.path / "data" / "npy_hwc.truth.npy")
    assert float((np.asarray(found) == truth).mean()) >= 0.99, out


def test_the_discovery_memory_bound_counts_the_bands(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """13 bands of 16 bits are 26 bytes a pixel, not 3: the subset that would not fit is
    refused before anything is read, with the count that fits."""
    most = 2 * 1024**3 // (32 * 32 * 13 * 2)
    status = main(["init", "models/npy_hwc.onnx", "--data", "data/npy_hwc", "--discover",
                   "--samples", str(most + 1), "-o", "manifests/m.yaml"])  # fmt: skip
    err = capsys.readouterr().err
    assert status == 1, err
    assert f"give --samples {most} or fewer" in err, err
    assert not (project.path / "manifests").exists()
