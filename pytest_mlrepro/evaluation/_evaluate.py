"""Run a manifest's model over its data set, preprocessing in threads (see ``preprocessed``)."""

from __future__ import annotations

import contextlib
import os
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from ..data import ResolvedDataset, Sample, resolve_dataset
from ..errors import NonFiniteOutputs, SampleError, SignatureError
from ..goldens import Results, Scores, nonfinite_rows, rounded_scores, softmax, top_k
from ..manifest import Manifest
from ..pipeline import Pipeline
from ..runners import Runner, load_runner
from ..settings import Settings
from ._determinism import seed_everything


@dataclass(frozen=True)
class Evaluation:
    results: Results
    # (N, classes): probabilities when postprocess.softmax, else raw outputs, as float64
    scores: npt.NDArray[np.float64]
    runner_info: dict[str, Any]
    dataset_origin: str
    seconds: float
    # The loaded model and the samples it ran on, kept so that diagnosis can re-run a probe
    # subset under preprocessing variants without reloading or re-verifying the model.
    runner: Runner | None = field(default=None, repr=False, compare=False)
    samples: tuple[Sample, ...] = field(default=(), repr=False, compare=False)


def _batches(samples: Sequence[Sample], size: int) -> Iterator[Sequence[Sample]]:
    for start in range(0, len(samples), size):
        yield samples[start : start + size]


def _load(pipe: Pipeline, sample: Sample) -> np.ndarray:
    try:
        data = sample.read()
    except OSError as exc:
        raise SampleError(sample.id, f"cannot read {sample.path}: {exc.strerror}") from None
    return pipe(data, sample.id)


def _stack(batch: Sequence[Sample], arrays: Sequence[np.ndarray]) -> np.ndarray:
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        raise SampleError(
            batch[0].id,
            f"the pipeline produced different shapes in one batch "
            f"({sorted(shapes)}): add a crop or resize to a fixed size",
        )
    return np.stack(arrays)


def _prepare(pipe: Pipeline, batch: Sequence[Sample]) -> np.ndarray:
    return _stack(batch, [_load(pipe, sample) for sample in batch])


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity, e.g. under taskset or a container)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def preprocessed(
    pipe: Pipeline,
    samples: Sequence[Sample],
    batch_size: int,
    workers: int | None = None,
    *,
    overlap: bool = True,
) -> Generator[np.ndarray, None, None]:
    """Batches in order, prepared by a thread pool (decoders and numpy release the GIL).

    ``overlap``: prepared ahead while the consumer (the model) runs, for a model on an
    accelerator, which leaves the CPUs to preprocessing. Without it, for a model on the CPU:
    each batch is prepared by every worker at once while the consumer waits, and then the
    consumer has the CPUs to itself. A CPU runtime's intra-op threads (ONNX Runtime, torch,
    TensorFlow, TFLite) use every core and spin-wait between parallel sections; preprocessing
    threads running beside them oversubscribe the cores, and a descheduled intra-op thread stalls
    its whole parallel section. Measured on 2 cores (docs/measurements.md,
    benchmarks/evaluation_throughput.py): the overlap took longer than the two stages one after
    the other."""
    if not overlap:
        workers = workers or usable_cores()
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mlrepro-prep") as pool:
            for batch in _batches(samples, batch_size):
                # Per sample, not per batch: the workers share each batch to its last image.
                yield _stack(batch, list(pool.map(lambda s: _load(pipe, s), batch)))
        return
    workers = workers or max(1, min(4, os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mlrepro-prep") as pool:
        pending: deque[Future[np.ndarray]] = deque()
        batches = _batches(samples, batch_size)
        for batch in batches:
            pending.append(pool.submit(_prepare, pipe, batch))
            if len(pending) > workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def overlaps(runner: Runner) -> bool:
    """Whether preprocessing runs beside ``runner``'s model (see :func:`preprocessed`): only
    when the model computes on an accelerator, not on the CPU cores preprocessing needs."""
    return str(runner.info.get("device", "cpu")) != "cpu"


Progress = Callable[[int], None]
"""Told the number of samples done after each batch (a terminal display, see progress.py)."""


def _run_batches(
    runner: Runner, manifest: Manifest, batches: Iterator[np.ndarray], progress: Progress | None
) -> list[np.ndarray]:
    """The model's raw outputs, batch by batch."""
    outputs: list[np.ndarray] = []
    done = 0
    check = getattr(runner, "check_batch", None)
    for i, batch in enumerate(batches):
        if i == 0 and check is not None:
            try:
                check(batch, manifest.input.layout)
            except SignatureError as exc:  # name the manifest line the mismatch comes from
                where = ("inputs", 0, "preprocess")
                raise SignatureError(manifest.error(where, str(exc)).format()) from None
        out = np.asarray(runner(batch))
        if out.ndim != 2 or out.shape[0] != batch.shape[0]:
            raise SignatureError(f"expected outputs of shape (batch, classes), got {out.shape}")
        outputs.append(out.astype(np.float32, copy=False))
        done += batch.shape[0]
        if progress is not None:
            progress(done)
    return outputs


def run_model(
    runner: Runner, manifest: Manifest, dataset: ResolvedDataset, progress: Progress | None = None
) -> np.ndarray:
    """Raw model outputs (N, classes) over the whole data set, in sample order."""
    pipe = manifest.pipeline
    batches = preprocessed(
        pipe, dataset.samples, manifest.runtime.batch_size, overlap=overlaps(runner)
    )
    # Closed here when the model raises (a time limit's interruption included), so that the
    # thread pool shuts down in this thread, not whenever the garbage collector finalises the
    # generator: finalised inside another thread's start-up, it joined threads there and hung.
    with contextlib.closing(batches):
        outputs = _run_batches(runner, manifest, batches, progress)
    result = np.concatenate(outputs) if outputs else np.zeros((0, manifest.dataset.classes))
    if result.shape[1] != manifest.dataset.classes:
        raise manifest.error(
            ("dataset", "classes"),
            f"the model outputs {result.shape[1]} classes, the manifest declares "
            f"{manifest.dataset.classes}",
        )
    # The one place outputs come out of the model: NaN/Inf stop here, before any ranking,
    # comparison or golden is made of them (every caller of run_model gets this error).
    bad = nonfinite_rows(result)
    if len(bad):
        raise NonFiniteOutputs(
            [dataset.samples[i].id for i in bad], len(result), where=manifest.source
        )
    return result


def evaluate(
    manifest: Manifest,
    device: str,
    settings: Settings,
    dataset: ResolvedDataset | None = None,
    progress: Progress | None = None,
) -> Evaluation:
    """Resolve the data, verify and load the model, run it, and turn outputs into results;
    ``progress`` is told the samples done after each batch."""
    dataset = dataset or resolve_dataset(manifest, settings)
    seed_everything(manifest.runtime.seed)
    # On the CPU the model and preprocessing take turns on the same cores (run_model).
    runner = load_runner(manifest, device, settings, shares_cpu=device == "cpu")
    start = time.perf_counter()
    raw = run_model(runner, manifest, dataset, progress)
    seconds = time.perf_counter() - start
    scores = softmax(raw) if manifest.postprocess.softmax else raw.astype(np.float64)
    topk = top_k(scores, manifest.postprocess.top_k)
    results = Results(
        ids=tuple(s.id for s in dataset.samples),
        labels=np.asarray([s.label for s in dataset.samples], np.int64),
        topk=topk,
        topk_scores=rounded_scores(np.take_along_axis(scores, topk, axis=1)),
    )
    return Evaluation(
        results=results,
        scores=scores,
        runner_info=runner.info,
        dataset_origin=dataset.origin,
        seconds=seconds,
        runner=runner,
        samples=dataset.samples,
    )


def postprocessed(manifest: Manifest, raw: Scores) -> npt.NDArray[np.float64]:
    """The scores a manifest's results are made of: probabilities when ``postprocess.softmax``,
    else the raw outputs (float64)."""
    return softmax(raw) if manifest.postprocess.softmax else raw.astype(np.float64)


def results_of(manifest: Manifest, samples: Sequence[Sample], scores: Scores) -> Results:
    """Per-sample results (top-k classes and their rounded scores) as goldens keep them."""
    topk = top_k(scores, manifest.postprocess.top_k)
    return Results(
        ids=tuple(s.id for s in samples),
        labels=np.asarray([s.label for s in samples], np.int64),
        topk=topk,
        topk_scores=rounded_scores(np.take_along_axis(scores, topk, axis=1)),
    )


def evaluate_subset(
    runner: Runner, manifest: Manifest, dataset: ResolvedDataset, samples: Sequence[Sample]
) -> tuple[Results, npt.NDArray[np.float64]]:
    """Run ``manifest``'s pipeline (e.g. a pitfall variant's, see ``pitfalls.py``) over
    ``samples`` of ``dataset`` on an already-loaded ``runner``: no reload, no re-verification.
    Returns the results and the score matrix, as :func:`evaluate` computes them."""
    raw = run_model(runner, manifest, replace(dataset, samples=tuple(samples)))
    scores = postprocessed(manifest, raw)
    return results_of(manifest, samples, scores), scores
