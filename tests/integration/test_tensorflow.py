"""TensorFlow and TFLite runners on tiny models (tf_helpers.py): every format gives the numbers the
model computes, signatures and layouts are checked before the model runs, quantised TFLite inputs
and outputs are converted with the model's scale and zero point, and the plugin runs TF manifests
(and skips them, with the reason, where TensorFlow is missing)."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
from helpers import N_CLASSES, N_SAMPLES, Project, checksum_list, sha256
from tf_helpers import TF_FILES, tf_manifest_text

tf = pytest.importorskip("tensorflow")
pytest.importorskip("ai_edge_litert")

from pytest_mlrepro.errors import (  # noqa: E402
    DeviceUnavailable,
    IntegrityError,
    SignatureError,
)
from pytest_mlrepro.manifest._spec import Manifest, load_manifest  # noqa: E402
from pytest_mlrepro.report._diagnosis_text import layer_section  # noqa: E402
from pytest_mlrepro.runners import check_framework, load_runner  # noqa: E402
from pytest_mlrepro.runners._signature import check_batch_shape  # noqa: E402
from pytest_mlrepro.runners.tensorflow import dequantize, quantize  # noqa: E402
from pytest_mlrepro.settings import Settings  # noqa: E402

FORMATS = ["keras", "saved_model", "frozen_graph", "tflite"]


@pytest.fixture(scope="session")
def tf_assets(
    mlrepro_assets: Path, tf_model_files: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The plugin tests' assets (images, tiny ONNX model, its goldens) plus the tiny TF models
    (tests/conftest.py: made in a subprocess, once per run)."""
    root = tmp_path_factory.mktemp("mlrepro-tf-assets")
    shutil.copytree(mlrepro_assets, root, dirs_exist_ok=True)
    shutil.copytree(tf_model_files, root / "models", dirs_exist_ok=True)
    return root


def manifest_at(tmp_path: Path, assets: Path, text: str) -> Manifest:
    """Write ``text`` as a manifest of a project in ``tmp_path`` with the tiny models."""
    shutil.copytree(assets / "models", tmp_path / "models", dirs_exist_ok=True)
    (tmp_path / "manifests").mkdir(exist_ok=True)
    path = tmp_path / "manifests" / "m.yaml"
    path.write_text(text)
    return load_manifest(path)


def settings_for(tmp_path: Path) -> Settings:
    return Settings.for_project(tmp_path, cache_dir=tmp_path / "cache")


def images(n: int = 4, size: int = 16) -> np.ndarray:
    return np.random.default_rng(7).uniform(0, 1, (n, size, size, 3)).astype(np.float32)


def expected(batch: np.ndarray) -> np.ndarray:
    return batch.mean(axis=(1, 2)) * 10.0


# --- runners ----------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_format_computes_the_model(fmt: str, tmp_path: Path, tf_assets: Path) -> None:
    manifest = manifest_at(tmp_path, tf_assets, tf_manifest_text("m", fmt, assets=tf_assets))
    check_framework(manifest)
    runner = load_runner(manifest, "cpu", settings_for(tmp_path))
    batch = images()
    runner.check_batch(batch, "NHWC")
    out = runner(batch)
    assert out.shape == (4, 3)
    np.testing.assert_allclose(out, expected(batch), rtol=1e-5, atol=1e-5)
    info = runner.info
    assert info["framework"] == ("tflite" if fmt == "tflite" else "tensorflow")
    assert info["device"] == "cpu" and info["input"] in ("input", "input:0")
    assert "intra_op_threads" in info and "inter_op_threads" in info
    # A batch of another size reuses the loaded model (TFLite resizes its input tensor).
    np.testing.assert_allclose(runner(batch[:3]), expected(batch[:3]), rtol=1e-5, atol=1e-5)


def test_a_keras_model_is_traced_at_load_not_in_its_first_batch(
    tmp_path: Path, tf_assets: Path
) -> None:
    """The graph is built while loading (the ``model load`` phase): no batch's call, of any
    size, runs the model's Python again."""
    manifest = manifest_at(tmp_path, tf_assets, tf_manifest_text("m", "keras", assets=tf_assets))
    runner = load_runner(manifest, "cpu", settings_for(tmp_path))
    # The Keras model, as the runner's layers are read from it: partial(layer_outputs, model).
    model = runner.loaded.layers.args[0]  # type: ignore[attr-defined]
    traced: list[object] = []
    original = model.call

    def counting(*args: object, **kwargs: object) -> object:
        traced.append(args)
        return original(*args, **kwargs)

    model.call = counting
    batch = images()
    for size in (4, 3, 4):
        np.testing.assert_allclose(
            runner(batch[:size]), expected(batch[:size]), rtol=1e-5, atol=1e-5
        )
    assert traced == []


def test_tflite_int8_quantises_the_input_and_dequantises_the_output(
    tmp_path: Path, tf_assets: Path
) -> None:
    manifest = manifest_at(
        tmp_path, tf_assets, tf_manifest_text("m", "tflite_int8", assets=tf_assets)
    )
    runner = load_runner(manifest, "cpu", settings_for(tmp_path))
    quant = runner.info["input_quantization"]
    out_quant = runner.info["output_quantization"]
    assert runner.info["input_dtype"] == "int8" and quant["scale"] > 0
    batch = images(8)
    out = runner(batch)
    assert out.dtype == np.float32
    # Within the quantisation steps of the input (mean of 768 values) and of the output.
    np.testing.assert_allclose(out, expected(batch), atol=3 * out_quant["scale"] + quant["scale"])
    assert np.array_equal(out.argmax(1), expected(batch).argmax(1))


def test_int8_pipeline_feeds_a_quantised_model_directly(tmp_path: Path, tf_assets: Path) -> None:
    """A manifest whose pipeline already produces int8 data bypasses the runner's quantisation."""
    text = tf_manifest_text(
        "m",
        "tflite_int8",
        assets=tf_assets,
        preprocess=(
            "{crop: {size: [32, 32], rounding: google}}",
            "{resize: {size: [16, 16], method: bilinear, backend: pil}}",
            "{cast: {dtype: int8}}",
            "{layout: {order: NHWC}}",
        ),
    ).replace("layout: NHWC\n", "layout: NHWC\n    dtype: int8\n", 1)
    manifest = manifest_at(tmp_path, tf_assets, text)
    runner = load_runner(manifest, "cpu", settings_for(tmp_path))
    assert "input_quantization" not in runner.info
    raw = np.full((2, 16, 16, 3), 5, np.int8)
    assert runner(raw).shape == (2, 3)


def test_quantize_rounds_half_away_from_zero_and_clamps() -> None:
    values = np.array([-1.5, -0.5, 0.5, 1.5, 2.49, 1000.0, -1000.0], np.float32)
    q = quantize(values, 1.0, 0, np.dtype(np.int8))
    assert q.tolist() == [-2, -1, 1, 2, 2, 127, -128]
    assert quantize(np.array([0.0], np.float32), 0.5, -3, np.dtype(np.int8)).tolist() == [-3]
    assert dequantize(np.array([-3, 1], np.int8), 0.5, -3).tolist() == [0.0, 2.0]


def test_nhwc_model_with_an_nchw_manifest_fails_before_running(
    tmp_path: Path, tf_assets: Path
) -> None:
    nchw = (*tf_manifest_text("m", "keras", assets=tf_assets).splitlines(keepends=True),)
    text = (
        "".join(nchw)
        .replace("layout: NHWC", "layout: NCHW")
        .replace("{layout: {order: NHWC}}", "{layout: {order: NCHW}}")
    )
    manifest = manifest_at(tmp_path, tf_assets, text)
    with pytest.raises(SignatureError) as info:
        load_runner(manifest, "cpu", settings_for(tmp_path))
    message = str(info.value)
    assert "is [?, 16, 16, 3]: channels last (NHWC)" in message and "declares NCHW" in message
    assert "layout mismatch" in message and "'layout: {order: NHWC}'" in message


def test_batch_shape_check_names_a_layout_mismatch() -> None:
    with pytest.raises(SignatureError, match=r"layout mismatch: the model is NHWC, the pipeline"):
        check_batch_shape("input", [None, 16, 16, 3], np.zeros((2, 3, 16, 16)), "NCHW")
    with pytest.raises(SignatureError, match="size mismatch"):
        check_batch_shape("input", [None, 16, 16, 3], np.zeros((2, 20, 20, 3)), "NHWC")
    with pytest.raises(SignatureError, match="rank 4"):
        check_batch_shape("input", [None, 16, 16, 3], np.zeros((2, 16, 16)), "NHWC")
    check_batch_shape("input", [None, None, None, 3], np.zeros((2, 9, 7, 3)), "NHWC")


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_checks_its_class_count_at_load(
    tmp_path: Path, tf_assets: Path, fmt: str
) -> None:
    """The one signature check (runners/_signature.py) reads each format's output shape: a
    manifest that declares another class count fails at load, at dataset.classes, with the
    message ONNX gives, before any image is decoded."""
    text = tf_manifest_text("m", fmt, assets=tf_assets).replace(
        f"classes: {N_CLASSES}}}", f"classes: {N_CLASSES + 1}}}"
    )
    with pytest.raises(SignatureError) as info:
        load_runner(manifest_at(tmp_path, tf_assets, text), "cpu", settings_for(tmp_path))
    assert f": {N_CLASSES} classes, the manifest declares {N_CLASSES + 1} (a model with" in str(
        info.value
    )
    assert "dataset.classes" in str(info.value)


def test_saved_model_signature_and_names_come_from_the_manifest(
    tmp_path: Path, tf_assets: Path
) -> None:
    settings = settings_for(tmp_path)
    wrong_signature = tf_manifest_text(
        "m", "saved_model", assets=tf_assets, model_extra="  signature: predict\n"
    )
    with pytest.raises(SignatureError, match=r"signatures \['serving_default'\].*'predict'"):
        load_runner(manifest_at(tmp_path, tf_assets, wrong_signature), "cpu", settings)
    wrong_output = tf_manifest_text(
        "m", "saved_model", assets=tf_assets, extra="postprocess: {output: probs}\n"
    )
    with pytest.raises(SignatureError, match=r"outputs are \['logits'\].*'probs'"):
        load_runner(manifest_at(tmp_path, tf_assets, wrong_output), "cpu", settings)
    wrong_input = tf_manifest_text("m", "saved_model", assets=tf_assets).replace(
        "- name: input", "- name: images"
    )
    with pytest.raises(SignatureError, match=r"inputs are \['input'\].*'images'"):
        load_runner(manifest_at(tmp_path, tf_assets, wrong_input), "cpu", settings)


def test_a_saved_model_archive_leaving_its_folder_is_refused(
    tmp_path: Path, tf_assets: Path
) -> None:
    evil = tmp_path / "evil.tar"
    with tarfile.open(evil, "w") as tar:
        data = b"x"
        info = tarfile.TarInfo("../outside.txt")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    (tmp_path / "models").mkdir()
    shutil.copy(evil, tmp_path / "models" / TF_FILES["saved_model"])
    text = tf_manifest_text("m", "saved_model", assets=tf_assets).replace(
        sha256(tf_assets / "models" / TF_FILES["saved_model"]), sha256(evil)
    )
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "m.yaml").write_text(text)
    manifest = load_manifest(tmp_path / "manifests" / "m.yaml")
    with pytest.raises(IntegrityError, match=r"refusing member '\.\./outside\.txt'"):
        load_runner(manifest, "cpu", settings_for(tmp_path))
    assert not (tmp_path / "outside.txt").exists()


def test_keras_file_with_python_code_is_refused(tmp_path: Path, tf_assets: Path) -> None:
    """safe_mode: a Lambda layer would deserialise Python bytecode; Keras refuses to load it."""
    import keras

    from examples.efficientnet_lite0_tf import canonical_keras_zip

    inputs = keras.Input(shape=(16, 16, 3), name="input")
    model = keras.Model(inputs, keras.layers.Lambda(lambda x: x[:, 0, 0, :])(inputs))
    model.save(tmp_path / "lambda.keras")
    (tmp_path / "models").mkdir()
    target = tmp_path / "models" / TF_FILES["keras"]
    target.write_bytes(canonical_keras_zip((tmp_path / "lambda.keras").read_bytes()))
    text = tf_manifest_text("m", "keras", assets=tf_assets).replace(
        sha256(tf_assets / "models" / TF_FILES["keras"]), sha256(target)
    )
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "m.yaml").write_text(text)
    with pytest.raises(SignatureError, match="Keras cannot load"):
        load_runner(load_manifest(tmp_path / "manifests" / "m.yaml"), "cpu", settings_for(tmp_path))


def test_frozen_graph_threads_are_per_session_and_recorded(tmp_path: Path, tf_assets: Path) -> None:
    text = tf_manifest_text("m", "frozen_graph", assets=tf_assets).replace(
        "runtime: {batch_size: 8, devices: [cpu]}",
        "runtime: {batch_size: 8, devices: [cpu], intra_op_threads: 1, inter_op_threads: 1}",
    )
    runner = load_runner(manifest_at(tmp_path, tf_assets, text), "cpu", settings_for(tmp_path))
    assert runner.info["session_intra_op_threads"] == 1
    assert runner.info["session_inter_op_threads"] == 1
    # No output named: the graph's only sink (the Identity a tf.function ends with).
    assert runner.info["output"] == "Identity:0"
    named = text + "postprocess: {output: logits}\n"
    runner = load_runner(manifest_at(tmp_path, tf_assets, named), "cpu", settings_for(tmp_path))
    assert runner.info["output"] == "logits:0"
    batch = images()
    np.testing.assert_allclose(runner(batch), expected(batch), rtol=1e-5, atol=1e-5)


def test_tflite_threads_are_recorded(tmp_path: Path, tf_assets: Path) -> None:
    text = tf_manifest_text("m", "tflite", assets=tf_assets).replace(
        "devices: [cpu]}", "devices: [cpu], intra_op_threads: 1}"
    )
    runner = load_runner(manifest_at(tmp_path, tf_assets, text), "cpu", settings_for(tmp_path))
    assert runner.info["intra_op_threads"] == 1
    assert runner.info["interpreter"] == "ai_edge_litert.interpreter.Interpreter"


@pytest.mark.parametrize("fmt", ["keras", "tflite"])
def test_cuda_without_a_usable_gpu_is_unavailable(
    fmt: str, tmp_path: Path, tf_assets: Path
) -> None:
    if fmt == "keras" and tf.config.list_physical_devices("GPU"):
        pytest.skip("TensorFlow sees a GPU here")
    manifest = manifest_at(tmp_path, tf_assets, tf_manifest_text("m", fmt, assets=tf_assets))
    with pytest.raises(DeviceUnavailable):
        load_runner(manifest, "cuda", settings_for(tmp_path))


def test_a_tampered_model_file_is_refused_before_loading(tmp_path: Path, tf_assets: Path) -> None:
    manifest = manifest_at(tmp_path, tf_assets, tf_manifest_text("m", "tflite", assets=tf_assets))
    target = tmp_path / "models" / TF_FILES["tflite"]
    target.write_bytes(target.read_bytes() + b"\0")
    with pytest.raises(IntegrityError, match="sha256 mismatch"):
        load_runner(manifest, "cpu", settings_for(tmp_path))


def test_framework_and_format_must_match(tmp_path: Path, tf_assets: Path) -> None:
    from pytest_mlrepro.errors import ManifestError

    text = tf_manifest_text("m", "keras", assets=tf_assets).replace(
        "name: tensorflow", "name: tflite"
    )
    with pytest.raises(ManifestError, match=r"model\.format: framework 'tflite' does not read"):
        manifest_at(tmp_path, tf_assets, text)


# --- the plugin ---------------------------------------------------------------------------------


def tf_project(project: Project, tf_assets: Path, manifests: dict[str, str]) -> Project:
    project.assets = tf_assets
    return project.make(manifests, goldens=["tiny_onnx"])


def _fed_nchw(text: str) -> str:
    """A manifest of the NHWC Keras model whose pipeline makes NCHW batches."""
    return text.replace("layout: NHWC", "layout: NCHW").replace(
        "{layout: {order: NHWC}}", "{layout: {order: NCHW}}"
    )


def test_tf_manifests_record_and_pass_like_any_other(project: Project, tf_assets: Path) -> None:
    """Recorded and checked like any other, beside a manifest whose pipeline does not fit its
    model: that one fails with the reason and records nothing (in the same runs: each starts
    TensorFlow in a new process)."""
    manifests = {
        "tiny_onnx.yaml": project.manifest("tiny_onnx"),
        "tiny_keras.yaml": tf_manifest_text(
            "tiny_keras",
            "keras",
            assets=tf_assets,
            extra="reference: {manifest: tiny_onnx, agreement: 1.0, score: 0.00001}\n",
        ),
        "tiny_tflite.yaml": tf_manifest_text("tiny_tflite", "tflite", assets=tf_assets),
        "tiny_nchw.yaml": _fed_nchw(tf_manifest_text("tiny_nchw", "keras", assets=tf_assets)),
    }
    tf_project(project, tf_assets, manifests)
    recorded = project.run("--mlrepro-update")
    recorded.assert_outcomes(passed=3, failed=1)
    recorded.stdout.fnmatch_lines(
        [
            f"tiny_keras *cpu *tensorflow *{N_SAMPLES} *100.00*golden recorded",
            f"tiny_tflite *cpu *tflite *{N_SAMPLES} *100.00*golden recorded",
        ]
    )
    recorded.stdout.fnmatch_lines(
        ["*the model's input 'input' is *channels last (NHWC)*declares NCHW*layout mismatch*"]
    )
    recorded.stdout.fnmatch_lines(["FAILED manifests/tiny_nchw.yaml::accuracy[[]cpu[]]*"])
    assert not project.golden("tiny_nchw").exists()  # nothing recorded from a bad run
    checked = project.run()
    checked.assert_outcomes(passed=3, failed=1)
    # The NHWC Keras model agrees with the NCHW ONNX model, sample by sample.
    checked.stdout.fnmatch_lines(
        ["tiny_keras [[]cpu] vs tiny_onnx: top-1 agreement 1.0000 over 24 samples*: agree"]
    )


_HIDE_TENSORFLOW = '''
"""Simulates an install without TensorFlow or LiteRT: their imports fail, their metadata is gone."""
import importlib.abc
import importlib.metadata
import sys

HIDDEN = ("tensorflow", "keras", "ai_edge_litert", "tf_keras")
DISTS = {"tensorflow", "tensorflow-cpu", "ai-edge-litert", "keras"}


class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Hide())
_version = importlib.metadata.version


def version(name):
    if name.lower() in DISTS:
        raise importlib.metadata.PackageNotFoundError(name)
    return _version(name)


importlib.metadata.version = version
'''


def test_without_tensorflow_other_manifests_run_and_tf_items_skip(
    project: Project, tf_assets: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifests = {
        "tiny_onnx.yaml": project.manifest("tiny_onnx"),
        "tiny_keras.yaml": tf_manifest_text("tiny_keras", "keras", assets=tf_assets),
        "tiny_tflite.yaml": tf_manifest_text("tiny_tflite", "tflite", assets=tf_assets),
        "tiny_tfdecode.yaml": project.manifest(
            "tiny_tfdecode", decode="{decode: {backend: tf, dct_method: INTEGER_ACCURATE}}"
        ),
    }
    tf_project(project, tf_assets, manifests)
    hide = project.path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text(_HIDE_TENSORFLOW)
    monkeypatch.setenv("PYTHONPATH", str(hide))
    result = project.run("-rs", "--mlrepro-json", "out.json", subprocess=True)
    result.assert_outcomes(passed=1, skipped=3)
    for reason in (  # one call each: under xdist the skips are reported in any order
        "*tensorflow is not installed. pip install 'pytest-mlrepro[[]tf]'*",
        "*tflite is not installed. pip install 'pytest-mlrepro[[]tf]'*",
        "*a preprocessing step uses backend 'tf' and TensorFlow is not installed*",
    ):
        result.stdout.fnmatch_lines([reason])
    result.stdout.fnmatch_lines(["tiny_onnx *cpu *onnxruntime *24 *100.00*pass"])
    # --mlrepro-strict turns the skips into failures, the ONNX item still passes.
    strict = project.run("--mlrepro-strict", subprocess=True)
    strict.assert_outcomes(passed=1, failed=3)


def test_hiding_tensorflow_really_hides_it(tmp_path: Path) -> None:
    """The simulation above is real: in that environment TensorFlow cannot be imported."""
    (tmp_path / "sitecustomize.py").write_text(_HIDE_TENSORFLOW)
    done = subprocess.run(
        [sys.executable, "-c", "import tensorflow"],
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode != 0 and "No module named 'tensorflow'" in done.stderr


def test_installed_but_not_importable_skips_with_the_reason(
    serial_project: Project, tf_assets: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Metadata says installed, the import fails (a broken install): a skip naming the error."""
    manifests = {"tiny_keras.yaml": tf_manifest_text("tiny_keras", "keras", assets=tf_assets)}
    tf_project(serial_project, tf_assets, manifests)
    hide = serial_project.path / "hide"
    hide.mkdir()
    imports_only = _HIDE_TENSORFLOW.split("_version = ")[0]
    (hide / "sitecustomize.py").write_text(imports_only)
    monkeypatch.setenv("PYTHONPATH", str(hide))
    result = serial_project.run("-rs", subprocess=True)
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*tensorflow is installed but cannot be imported*"])


def test_an_int8_tflite_model_against_its_float32_golden_names_the_precision(
    tmp_path: Path, tf_assets: Path
) -> None:
    """Layer fingerprints through the interpreter's preserved tensors. The int8
    model's layers (dequantised with their own scale and zero point, their stored dtype kept)
    against the float32 model's: the precision change is named, and where the outputs differ."""
    from pytest_mlrepro.data import resolve_dataset
    from pytest_mlrepro.diagnosis import _layer_fingerprints as layers

    settings = Settings.for_project(
        tmp_path, cache_dir=tmp_path / "cache", data_mirrors=[tf_assets / "data"]
    )
    float_m = manifest_at(tmp_path, tf_assets, tf_manifest_text("m", "tflite", assets=tf_assets))
    (tmp_path / "manifests" / "tiny.sha256").write_text(checksum_list(tf_assets / "data" / "tiny"))
    samples = resolve_dataset(float_m, settings).samples
    float_runner = load_runner(float_m, "cpu", settings)
    ids = [s.id for s in samples[:2]]
    block = layers.record(float_runner, float_m, samples, ids)
    assert block is not None and block["samples"] == ids
    assert {row[3] for row in block["rows"]} == {"float32"}
    int8_m = manifest_at(
        tmp_path, tf_assets, tf_manifest_text("m", "tflite_int8", assets=tf_assets)
    )
    int8_runner = load_runner(int8_m, "cpu", settings)
    report = layers.compare(block, int8_runner, int8_m, samples)
    assert report is not None
    text = " ".join(layer_section(report)[1])
    assert "layer outputs are int8 where the golden's had 0" in text, text
    assert "precision:" in text
    assert [row[1] for row in block["rows"]] == ["MEAN", "FULLY_CONNECTED"]
    assert report.first is not None and report.first.op == "MEAN", text
    assert "(layer 1 of 2: float32 → int8, max |x|" in text


def test_a_keras_model_records_its_layers(tmp_path: Path, tf_assets: Path) -> None:
    """Keras: every layer's output, in the model's order, through a second model over the
    loaded one; a renamed input is refused at its manifest line."""
    from pytest_mlrepro.data import resolve_dataset
    from pytest_mlrepro.diagnosis import _layer_fingerprints as layers

    settings = Settings.for_project(
        tmp_path, cache_dir=tmp_path / "cache", data_mirrors=[tf_assets / "data"]
    )
    text = tf_manifest_text("m", "keras", assets=tf_assets)
    manifest = manifest_at(tmp_path, tf_assets, text)
    (tmp_path / "manifests" / "tiny.sha256").write_text(checksum_list(tf_assets / "data" / "tiny"))
    samples = resolve_dataset(manifest, settings).samples
    runner = load_runner(manifest, "cpu", settings)
    rows = layers.trace(runner, manifest, samples[:2])
    assert rows is not None
    assert [row[:3] for row in rows] == [
        ["mean", "GlobalAveragePooling2D", [2, 3]], ["logits", "Dense", [2, 3]]
    ]  # fmt: skip
    renamed = manifest_at(tmp_path, tf_assets, text.replace("- name: input", "- name: images"))
    with pytest.raises(SignatureError, match=r"m\.yaml:\d+: inputs\[0\]\.name: the Keras model"):
        load_runner(renamed, "cpu", settings)


def test_a_saved_model_records_the_ops_that_compute_on_its_input(
    tmp_path: Path, tf_assets: Path
) -> None:
    """SavedModel: no Keras layers to name, so every op of the signature's graph downstream of
    the input (its variables frozen), in graph order; the last is the model's output."""
    from pytest_mlrepro.data import resolve_dataset
    from pytest_mlrepro.diagnosis import _layer_fingerprints as layers

    settings = Settings.for_project(
        tmp_path, cache_dir=tmp_path / "cache", data_mirrors=[tf_assets / "data"]
    )
    manifest = manifest_at(
        tmp_path, tf_assets, tf_manifest_text("m", "saved_model", assets=tf_assets)
    )
    (tmp_path / "manifests" / "tiny.sha256").write_text(checksum_list(tf_assets / "data" / "tiny"))
    samples = resolve_dataset(manifest, settings).samples
    runner = load_runner(manifest, "cpu", settings)
    batch = np.stack([manifest.pipeline(s.read(), s.id) for s in samples[:2]])
    outputs = runner.layer_outputs(batch)  # type: ignore[attr-defined]
    ops = [op for _, op, _ in outputs]
    assert "Mean" in ops and "MatMul" in ops, ops
    assert not {"Const", "Placeholder", "Identity", "ReadVariableOp"} & set(ops)
    np.testing.assert_allclose(outputs[-1][2], runner(batch), rtol=1e-6, atol=1e-6)
    block = layers.record(runner, manifest, samples, [s.id for s in samples[:2]])
    assert block is not None and [row[1] for row in block["rows"]] == ops
    same = layers.compare(block, runner, manifest, samples)
    assert same is not None
    assert same.first is None, layer_section(same)


def test_tflite_layer_outputs_keep_litert_s_debugging_warning_out(
    tmp_path: Path, tf_assets: Path
) -> None:
    """Reading every tensor needs LiteRT's experimental_preserve_all_tensors, for which it warns
    that it is for debugging: that is its use here, and the warning stays out of the output."""
    import warnings

    from pytest_mlrepro.data import resolve_dataset

    settings = Settings.for_project(
        tmp_path, cache_dir=tmp_path / "cache", data_mirrors=[tf_assets / "data"]
    )
    manifest = manifest_at(tmp_path, tf_assets, tf_manifest_text("m", "tflite", assets=tf_assets))
    (tmp_path / "manifests" / "tiny.sha256").write_text(checksum_list(tf_assets / "data" / "tiny"))
    samples = resolve_dataset(manifest, settings).samples
    runner = load_runner(manifest, "cpu", settings)
    batch = np.stack([manifest.pipeline(s.read(), s.id) for s in samples[:2]])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outputs = runner.layer_outputs(batch)  # type: ignore[attr-defined]
    assert outputs, "no layer outputs"
    assert not [w for w in caught if "preserve_all_tensors" in str(w.message)], caught
