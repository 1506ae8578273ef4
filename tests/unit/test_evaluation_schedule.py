"""When preprocessing runs relative to the model (evaluation.preprocessed).

On the CPU the model's runtime uses every core: preprocessing beside it oversubscribes them, so
each batch is prepared first, by every worker, and the model then runs alone. On an accelerator
the two overlap. Real images, a real ONNX model on ONNX Runtime; the clock records who ran when.
"""

from __future__ import annotations

import csv
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import make_images, make_onnx

from pytest_mlrepro.data import Sample
from pytest_mlrepro.evaluation._evaluate import overlaps, preprocessed
from pytest_mlrepro.runners.onnx import OnnxRunner

Interval = tuple[float, float]


class Recorded:
    """A preprocessing step (decode, centre 32 × 32, NCHW float) that records when it ran and
    on how many threads at once."""

    def __init__(self) -> None:
        self.intervals: list[Interval] = []
        self.lock = threading.Lock()
        self.running = 0
        self.most_at_once = 0

    def __call__(self, data: bytes, sample_id: str) -> np.ndarray:
        import io

        from PIL import Image

        start = time.perf_counter()
        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        image = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), np.float32)
        time.sleep(0.004)  # long enough for another thread to start meanwhile
        with self.lock:
            self.running -= 1
            self.intervals.append((start, time.perf_counter()))
        return image[4:36, 8:40].transpose(2, 0, 1) / 255.0


def samples_in(folder: Path) -> list[Sample]:
    make_images(folder)
    with (folder / "labels.csv").open() as fh:
        return [
            Sample(row["file"], folder / row["file"], int(row["class_index"]))
            for row in csv.DictReader(fh)
        ]


def cpu_runner(path: Path) -> OnnxRunner:
    import onnxruntime as ort

    make_onnx(path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    shape = session.get_inputs()[0].shape
    runner = OnnxRunner(session, "input", shape, "logits", path.read_bytes(), None)
    runner.info = {"device": "cpu"}
    return runner


def run(runner: OnnxRunner, samples: list[Sample], overlap: bool) -> tuple[Recorded, list]:
    pipe = Recorded()
    model: list[Interval] = []
    for batch in preprocessed(pipe, samples, 4, workers=2, overlap=overlap):  # type: ignore[arg-type]
        start = time.perf_counter()
        out = runner(batch)
        time.sleep(0.03)  # a slower model: room for preprocessing to run beside it
        model.append((start, time.perf_counter()))
        assert out.shape == (len(batch), 3)
    return pipe, model


def intersecting(a: list[Interval], b: list[Interval]) -> int:
    return sum(1 for s, e in a for s2, e2 in b if s < e2 and s2 < e)


def test_on_the_cpu_no_image_is_preprocessed_while_the_model_runs(tmp_path: Path) -> None:
    samples = samples_in(tmp_path / "data")
    runner = cpu_runner(tmp_path / "tiny.onnx")
    assert not overlaps(runner)
    pipe, model = run(runner, samples, overlap=overlaps(runner))
    assert len(pipe.intervals) == len(samples) and len(model) == len(samples) // 4
    assert intersecting(pipe.intervals, model) == 0
    assert pipe.most_at_once == 2  # each batch is shared by every worker


def test_on_an_accelerator_preprocessing_runs_beside_the_model(tmp_path: Path) -> None:
    samples = samples_in(tmp_path / "data")
    runner = cpu_runner(tmp_path / "tiny.onnx")
    runner.info["device"] = "cuda"  # what overlaps() reads: where the model computes
    assert overlaps(runner)
    pipe, model = run(runner, samples, overlap=overlaps(runner))
    assert intersecting(pipe.intervals, model) > 0


def test_the_evaluations_onnx_runner_sleeps_between_runs_and_a_plain_load_keeps_the_default(
    tmp_path: Path, mlrepro_assets: Path
) -> None:
    """On the CPU the model takes turns with preprocessing: ORT's pool threads must not spin
    through the preprocessing phases (measured: +1.3 s CPU of 7.7 s on the example). A runner
    loaded for anything else (latency) keeps ORT's default."""
    from helpers import make_project, manifest_text

    from pytest_mlrepro.evaluation import evaluate
    from pytest_mlrepro.manifest import load_manifest
    from pytest_mlrepro.runners import load_runner
    from pytest_mlrepro.settings import Settings

    assets = mlrepro_assets
    project = make_project(
        tmp_path, assets, manifests={"m.yaml": manifest_text("m", assets=assets)}
    )
    manifest = load_manifest(project / "manifests" / "m.yaml")
    settings = Settings.for_project(
        project, data_mirrors=[project / "data"], cache_dir=tmp_path / "cache"
    )
    key = "session.intra_op.allow_spinning"

    evaluation = evaluate(manifest, "cpu", settings)
    assert isinstance(evaluation.runner, OnnxRunner)
    options = evaluation.runner.session.get_session_options()
    assert options.get_session_config_entry(key) == "0"
    assert options.get_session_config_entry("session.inter_op.allow_spinning") == "0"

    plain = load_runner(manifest, "cpu", settings)
    assert isinstance(plain, OnnxRunner)
    with pytest.raises(RuntimeError, match="does not have configuration"):  # never set
        plain.session.get_session_options().get_session_config_entry(key)
