"""The second example, the grey-digit classifier: its committed files are the ones its manifests
pin, it passes on ONNX Runtime, PyTorch and TFLite in a project that holds only what a clean
clone has, and its training script, rerun, makes files with the committed files' predictions.

Skipped when ../shared/data/digits-test (or digits-train, for the retraining) is absent."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import DATA, REPO

from pytest_mlrepro.manifest._spec import load_manifest

pytestmark = pytest.mark.skipif(
    not (DATA / "digits-test" / "labels.csv").is_file()
    or not (DATA / "digits-train" / "labels.csv").is_file(),
    reason=f"the digits data sets are not at {DATA}/digits-train, digits-test (set MLREPRO_DATA)",
)

MODELS = REPO / "examples" / "digits"
MANIFESTS = ("digits_onnx", "digits_torch", "digits_tflite")
FILES = ("digits_cnn.onnx", "digits_cnn.pt", "digits_cnn.tflite")


def test_the_manifests_pin_the_committed_files_and_their_sums() -> None:
    pairs = (line.split("  ", 1) for line in (MODELS / "SHA256SUMS").read_text().splitlines())
    listed = {name: digest for digest, name in pairs}
    assert sorted(listed) == sorted(FILES)
    for name, digest in listed.items():
        assert hashlib.sha256((MODELS / name).read_bytes()).hexdigest() == digest, name
    pinned = set()
    for name in MANIFESTS:
        model = load_manifest(REPO / "manifests" / f"{name}.yaml").model
        reference = model.file or model.weights
        assert reference is not None and reference.path is not None
        path = (REPO / "manifests" / reference.path).resolve()
        assert path.parent == MODELS and reference.sha256 == listed[path.name], name
        pinned.add(path.name)
    assert pinned == set(FILES)


@pytest.mark.slow
def test_the_digits_example_passes_on_three_runtimes_from_a_clean_project(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("torch")
    pytest.importorskip("ai_edge_litert")
    (pytester.path / "manifests" / "datasets").mkdir(parents=True)
    (pytester.path / "golden").mkdir()
    for name in MANIFESTS:
        shutil.copy(REPO / "manifests" / f"{name}.yaml", pytester.path / "manifests")
        shutil.copy(REPO / "golden" / f"{name}.json", pytester.path / "golden")
    shutil.copy(REPO / "manifests" / "datasets" / "digits-test.sha256",
                pytester.path / "manifests" / "datasets")  # fmt: skip
    (pytester.path / "examples").mkdir()
    for name in ("__init__.py", "digits_cnn.py"):
        shutil.copy(REPO / "examples" / name, pytester.path / "examples")
    shutil.copytree(MODELS, pytester.path / "examples" / "digits")
    pytester.makeconftest("from examples import digits_cnn  # noqa: F401  (registers)\n")
    pytester.makeini("[pytest]\n")
    monkeypatch.setenv("MLREPRO_DATA", str(DATA))
    monkeypatch.setenv("MLREPRO_CACHE", str(pytester.path / "cache"))
    result = pytester.runpytest_subprocess(
        "manifests/", "-p", "no:cacheprovider", "-p", "no:randomly", "--mlrepro-device=cpu"
    )
    result.assert_outcomes(passed=3)
    result.stdout.re_match_lines(
        [
            rf"{name}\s+cpu\s+\S+\s+899\s+95\.11\s+\S+\s+1\.0000\s+pass"
            for name in sorted(MANIFESTS)
        ],
        consecutive=False,
    )


def _predictions(folder: Path, images: np.ndarray) -> dict[str, np.ndarray]:
    """Each of the three files' top-1 over ``images`` (N×1×8×8), each in its own runtime."""
    import onnxruntime as ort
    import torch
    from ai_edge_litert.interpreter import Interpreter

    sys.path.insert(0, str(REPO))
    try:
        from examples.digits_cnn import build_model
    finally:
        sys.path.remove(str(REPO))
    session = ort.InferenceSession(str(folder / FILES[0]), providers=["CPUExecutionProvider"])
    onnx = session.run(None, {"input": images})[0]
    module = build_model()
    module.load_state_dict(torch.load(str(folder / FILES[1]), weights_only=True))
    module.eval()
    with torch.no_grad():
        torch_out = module(torch.from_numpy(images)).numpy()
    interpreter = Interpreter(model_path=str(folder / FILES[2]))
    entry = interpreter.get_input_details()[0]
    interpreter.resize_tensor_input(entry["index"], [len(images), 8, 8, 1])
    interpreter.allocate_tensors()
    interpreter.set_tensor(entry["index"], np.ascontiguousarray(images.transpose(0, 2, 3, 1)))
    interpreter.invoke()
    tflite = interpreter.get_tensor(interpreter.get_output_details()[0]["index"])
    return {"onnx": onnx.argmax(1), "torch": torch_out.argmax(1), "tflite": tflite.argmax(1)}


@pytest.mark.slow
def test_the_training_script_reproduces_the_committed_predictions(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("torch")
    pytest.importorskip("tensorflow")
    pytest.importorskip("ai_edge_litert")
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "train_digits.py"),
         "--data", str(DATA / "digits-train"), "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    for name in FILES:  # it prints each file's sha256, as SHA256SUMS lists them
        digest = hashlib.sha256((tmp_path / name).read_bytes()).hexdigest()
        assert f"{digest}  {name}" in done.stdout
    sys.path.insert(0, str(REPO))
    try:
        from examples.train_digits import read_digits
    finally:
        sys.path.remove(str(REPO))
    images, labels = read_digits(DATA / "digits-test")
    committed, retrained = _predictions(MODELS, images), _predictions(tmp_path, images)
    for runtime in committed:
        agreement = float(np.mean(committed[runtime] == retrained[runtime]))
        assert agreement == 1.0, f"{runtime}: agreement {agreement:.4f} on the test half"
    assert float(np.mean(committed["onnx"] == labels)) > 0.9  # a classifier, not a constant
