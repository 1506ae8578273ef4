"""How close the plugin's ``evaluate()`` comes to the machine's compute bound.

Runs a manifest's model (default: the example's EfficientNet-Lite0 on ONNX Runtime, CPU) over its
data set (the 1000-image sample, batch 32) in one process, in interleaved rounds of four
measurements, so that a machine slowing down or speeding up meanwhile affects all of them alike:

  (a) model alone: the runner over tensors preprocessed beforehand (wall time);
  (b) preprocessing alone, on one thread: read, decode and every pipeline step (CPU time);
  (c) ``evaluate()`` end to end: the plugin's own run over the data set (its ``seconds``: from
      the first image read to the last output, model loading excluded);
  (d) a naive loop: read, preprocess and infer one image at a time (wall time).

The compute bound is (a) + (b) / cores: the model as fast as it runs alone, plus the
preprocessing's CPU time spread over every core. Each round prints (c) / bound and (c) / (d); the
last lines print the medians (``ratio``) and the spread. Then one diagnosis (a drifted manifest:
the resize's ``bilinear`` changed to ``bicubic``, diagnosed against the committed golden) is timed
and printed relative to one evaluation.

    MLREPRO_CACHE=/work/.mlrepro_cache MLREPRO_DATA=../shared/data \\
        python benchmarks/evaluation_throughput.py [--rounds 3] [--manifest PATH]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import conftest  # noqa: E402, F401  (registers the example's model builders)
from pytest_mlrepro import goldens as golden_store  # noqa: E402
from pytest_mlrepro.data import (  # noqa: E402
    ResolvedDataset,
    Sample,
    resolve_dataset,
)
from pytest_mlrepro.diagnosis import diagnose  # noqa: E402
from pytest_mlrepro.evaluation._evaluate import _stack, evaluate  # noqa: E402
from pytest_mlrepro.evaluation._shared_preprocessing import read_sample  # noqa: E402
from pytest_mlrepro.goldens import compare  # noqa: E402
from pytest_mlrepro.manifest import Manifest, load_manifest  # noqa: E402
from pytest_mlrepro.pipeline import Pipeline  # noqa: E402
from pytest_mlrepro.report import DIAGNOSIS_WORDING  # noqa: E402
from pytest_mlrepro.runners import Runner, load_runner  # noqa: E402
from pytest_mlrepro.settings import Settings, mirrors_from_env  # noqa: E402


def prepare_batch(pipe: Pipeline, batch: Sequence[Sample]) -> np.ndarray:
    """One batch read and preprocessed in this thread, as the evaluation stacks it."""
    return _stack(batch, [pipe(read_sample(sample), sample.id) for sample in batch])


def batches_of(manifest: Manifest, dataset: ResolvedDataset) -> list[np.ndarray]:
    size = manifest.runtime.batch_size
    samples = dataset.samples
    return [
        prepare_batch(manifest.pipeline, samples[i : i + size])
        for i in range(0, len(samples), size)
    ]


def model_alone(runner: Runner, batches: list[np.ndarray]) -> float:
    start = time.perf_counter()
    for batch in batches:
        runner(batch)
    return time.perf_counter() - start


def preprocessing_cpu(manifest: Manifest, dataset: ResolvedDataset) -> float:
    """CPU seconds of this thread for preprocessing the whole data set, batch by batch."""
    start = time.thread_time()
    batches_of(manifest, dataset)
    return time.thread_time() - start


def naive_loop(runner: Runner, manifest: Manifest, dataset: ResolvedDataset) -> float:
    """The loop anyone would write by hand: one image at a time, read, preprocess, infer."""
    pipe = manifest.pipeline
    start = time.perf_counter()
    for sample in dataset.samples:
        runner(pipe(sample.path.read_bytes(), sample.id)[None])
    return time.perf_counter() - start


def drifted(manifest_path: Path, folder: Path) -> Manifest:
    """The manifest with its resize changed from bilinear to bicubic: a drift to diagnose."""
    text = manifest_path.read_text()
    if "method: bilinear" not in text:
        raise SystemExit(f"{manifest_path}: no 'method: bilinear' to change for the diagnosis")
    path = folder / manifest_path.name
    path.write_text(text.replace("method: bilinear", "method: bicubic", 1))
    return load_manifest(path, display=str(manifest_path.relative_to(ROOT)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", default=str(ROOT / "manifests/efficientnet_lite0_onnx.yaml"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--no-diagnosis", action="store_true", help="skip the diagnosis timing")
    args = parser.parse_args()

    manifest_path = Path(args.manifest).resolve()
    manifest = load_manifest(manifest_path)
    settings = Settings.for_project(ROOT, data_mirrors=mirrors_from_env())
    dataset = resolve_dataset(manifest, settings)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cores = cores or 1
    print(
        f"model: {manifest.name} ({manifest.framework.name}, {args.device}), data: "
        f"{len(dataset.samples)} images from {dataset.origin}, batch "
        f"{manifest.runtime.batch_size}, {cores} cores"
    )
    runner = load_runner(manifest, args.device, settings)
    tensors = batches_of(manifest, dataset)
    runner(tensors[0])  # warm-up: the first call allocates

    print(
        f"{'round':>5}  {'(a) model':>9}  {'(b) prep CPU':>12}  {'bound':>6}  "
        f"{'(c) e2e':>7}  {'(d) naive':>9}  {'c/bound':>7}  {'c/d':>5}"
    )
    ratios: list[float] = []
    to_naive: list[float] = []
    evaluations: list[float] = []
    for r in range(args.rounds):
        # Interleaved, and the order rotated per round: drift in the machine's load spreads over
        # every measurement instead of landing on one.
        order = ["a", "b", "c", "d"]
        order = order[r % 4 :] + order[: r % 4]
        got: dict[str, float] = {}
        for what in order:
            if what == "a":
                got[what] = model_alone(runner, tensors)
            elif what == "b":
                got[what] = preprocessing_cpu(manifest, dataset)
            elif what == "c":
                got[what] = evaluate(manifest, args.device, settings, dataset).seconds
            else:
                got[what] = naive_loop(runner, manifest, dataset)
        bound = got["a"] + got["b"] / cores
        ratios.append(got["c"] / bound)
        to_naive.append(got["c"] / got["d"])
        evaluations.append(got["c"])
        print(
            f"{r + 1:>5}  {got['a']:>8.2f}s  {got['b']:>11.2f}s  {bound:>5.2f}s  "
            f"{got['c']:>6.2f}s  {got['d']:>8.2f}s  {ratios[-1]:>7.3f}  {to_naive[-1]:>5.3f}"
        )
    print(
        f"ratio {statistics.median(ratios):.3f} (end to end / compute bound, median; rounds "
        f"{min(ratios):.3f} to {max(ratios):.3f})"
    )
    print(
        f"ratio to the naive loop {statistics.median(to_naive):.3f} (median; rounds "
        f"{min(to_naive):.3f} to {max(to_naive):.3f})"
    )

    if not args.no_diagnosis:
        golden = golden_store.read(golden_store.golden_path(manifest, settings))
        if golden is None:
            print("diagnosis: not timed (no committed golden for this manifest)")
            return 0
        with tempfile.TemporaryDirectory() as folder:
            changed = drifted(manifest_path, Path(folder))
            evaluation = evaluate(changed, args.device, settings, dataset)
            comparison = compare(
                golden.results, evaluation.results, evaluation.scores, changed.tolerances
            )
            start = time.perf_counter()
            diagnosis = diagnose(changed, golden, comparison, evaluation, wording=DIAGNOSIS_WORDING)
            seconds = time.perf_counter() - start
        one = statistics.median(evaluations)
        first = diagnosis.render().splitlines()[0] if diagnosis.render() else ""
        print(
            f"diagnosis {seconds:.2f}s = {seconds / one:.2f} x one evaluation ({one:.2f}s)"
            f"{' (the drift was within tolerance)' if comparison.ok else ''}; says: {first}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
