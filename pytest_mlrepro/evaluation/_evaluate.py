"""Run a manifest's model over its data set, preprocessing in threads (see ``preprocessed``), and
judge repeated runs of it (the determinism check's record)."""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections import deque
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from .._phases import phase
from ..data import ResolvedDataset, Sample, resolve_dataset
from ..errors import NonFiniteOutputs, SampleError, SignatureError
from ..fingerprint import usable_cpu_count
from ..goldens import (
    KeptScores,
    Results,
    Scores,
    nonfinite_rows,
    rounded_scores,
    softmax,
    top_k,
)
from ..manifest import Manifest
from ..pipeline import Pipeline
from ..runners import Runner, load_runner
from ..settings import Settings
from ._determinism import RunComparison, RunsComparer, controls_in_force, seed_everything
from ._memory import FreedPages, model_allocation, steady_allocator
from ._shared_preprocessing import SharedLoader, read_sample


@dataclass(frozen=True)
class Evaluation:
    results: Results
    # (N, classes): probabilities when postprocess.softmax, else raw outputs, as float64; or,
    # from a streamed evaluation (``evaluate(keep=...)``), the part of that matrix it kept
    scores: Scores | KeptScores
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


Load = Callable[[Sample], np.ndarray]
"""One sample read, verified and preprocessed (alone, or through a ``SharedLoader``)."""


def _stack(batch: Sequence[Sample], arrays: Sequence[np.ndarray]) -> np.ndarray:
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        raise SampleError(
            batch[0].id,
            f"the pipeline produced different shapes in one batch "
            f"({sorted(shapes)}): add a crop or resize to a fixed size",
        )
    return np.stack(arrays)


def preprocessed(
    pipe: Pipeline,
    samples: Sequence[Sample],
    batch_size: int,
    workers: int | None = None,
    *,
    overlap: bool = True,
    load: Load | None = None,
) -> Generator[np.ndarray, None, None]:
    """Batches in order from a thread pool; ``overlap`` only beside an accelerator: threads beside a
    CPU model's intra-op threads stall them (docs/measurements.md, "Evaluation throughput")."""
    load = load or (lambda sample: pipe(read_sample(sample), sample.id))
    workers = workers or (max(1, min(4, os.cpu_count() or 1)) if overlap else usable_cpu_count())
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mlrepro-prep") as pool:
        if not overlap:
            for batch in _batches(samples, batch_size):
                # Per sample, not per batch: the workers share each batch to its last image.
                yield _stack(batch, list(pool.map(load, batch)))
            return
        pending: deque[Future[np.ndarray]] = deque()
        for batch in _batches(samples, batch_size):
            pending.append(pool.submit(lambda b: _stack(b, [load(s) for s in b]), batch))
            if len(pending) > workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def overlaps(runner: Runner) -> bool:
    """Whether preprocessing runs beside ``runner``'s model: only on an accelerator."""
    return str(runner.info.get("device", "cpu")) != "cpu"


Progress = Callable[[int], None]
"""Told the number of samples done after each batch (a terminal display, see progress.py)."""


# Samples between two checks of whether freed heap pages are to be handed back (``FreedPages``).
TRIM_EVERY = 256


Reduce = Callable[[int, np.ndarray], None]
"""Told each batch's raw outputs (float32, finite) with the index of its first sample, in order."""


def _prepared(batches: Iterator[np.ndarray]) -> Iterator[np.ndarray]:
    """``batches``, the wait for each charged to the ``preprocessing`` phase."""
    while True:
        with phase("preprocessing"):
            batch = next(batches, None)
        if batch is None:
            return
        yield batch


def stream_model(
    runner: Runner,
    manifest: Manifest,
    dataset: ResolvedDataset,
    reduce: Reduce,
    progress: Progress | None = None,
    load: Load | None = None,
) -> None:
    """Run the model over the data set and hand each batch's outputs to ``reduce``, keeping
    nothing of the data set's size; NaN or Inf fail after the last batch, naming every sample."""
    pipe = manifest.pipeline
    overlap = overlaps(runner)
    if isinstance(load, SharedLoader) and not overlap and load.unfilled(dataset.samples):
        # The session's shared pass first, on every core (``SharedLoader.fill``). Beside a
        # model on an accelerator it stays in the batches, where it overlaps the model.
        with phase("shared preprocessing"):
            load.fill(dataset.samples, usable_cpu_count())
    batches = preprocessed(
        pipe, dataset.samples, manifest.runtime.batch_size, overlap=overlap, load=load
    )
    bad: list[int] = []
    done = 0
    freed = FreedPages()
    # The model's blocks from the heap while it runs, when the preprocessing does not run
    # beside it (``model_allocation``).
    allocation = contextlib.nullcontext if overlap else model_allocation
    # Closed here when the model raises (a time limit's interruption included), so that the
    # thread pool shuts down in this thread, not whenever the garbage collector finalises the
    # generator: finalised inside another thread's start-up, it joined threads there and hung.
    with contextlib.closing(batches):
        for i, batch in enumerate(_prepared(batches)):
            if i == 0:  # the first batch against the model's input, at the manifest's line
                try:
                    runner.check_batch(batch, manifest.input.layout)
                except SignatureError as exc:
                    where = ("inputs", 0, "preprocess")
                    raise SignatureError(manifest.error(where, str(exc)).format()) from None
            with phase("model"), allocation():
                out = np.asarray(runner(batch))
            if out.ndim != 2 or out.shape[0] != batch.shape[0]:
                raise SignatureError(f"expected outputs of shape (batch, classes), got {out.shape}")
            if out.shape[1] != manifest.dataset.classes:
                raise manifest.error(
                    ("dataset", "classes"),
                    f"the model outputs {out.shape[1]} classes, the manifest declares "
                    f"{manifest.dataset.classes}",
                )
            out = out.astype(np.float32, copy=False)
            bad.extend(done + int(r) for r in nonfinite_rows(out))
            if not bad:
                with phase("comparison"):  # the scores kept for the comparison (``_Reduced``)
                    reduce(done, out)
            if (done + batch.shape[0]) // TRIM_EVERY > done // TRIM_EVERY:
                freed.check()
            done += batch.shape[0]
            if progress is not None:
                progress(done)
    # The one place outputs come out of the model: NaN/Inf stop here, before any ranking,
    # comparison or golden is made of them (every caller gets this error).
    if bad:
        raise NonFiniteOutputs([dataset.samples[i].id for i in bad], done, where=manifest.source)


def run_model(
    runner: Runner,
    manifest: Manifest,
    dataset: ResolvedDataset,
    progress: Progress | None = None,
    load: Load | None = None,
) -> np.ndarray:
    """Raw model outputs (N, classes) over the whole data set, in sample order."""
    outputs: list[np.ndarray] = []
    stream_model(runner, manifest, dataset, lambda _, out: outputs.append(out), progress, load)
    if not outputs:
        return np.zeros((0, manifest.dataset.classes))
    return np.concatenate(outputs)


class _Reduced:
    """Each batch's top-k and scores at the goldens' top-k, written into arrays made once: small
    per-batch objects pin the allocator's pools (docs/measurements.md, "Scale")."""

    def __init__(self, manifest: Manifest, samples: Sequence[Sample], keep: Sequence[Results]):
        self.manifest = manifest
        self.ids = [s.id for s in samples]
        # Results with a class the model does not have are not compared sample by sample (the
        # class indices mean other classes): nothing to keep for them.
        classes = manifest.dataset.classes
        usable = [r for r in keep if not r.topk.size or int(r.topk.max()) < classes]
        # Each sample's row in each golden (-1: the golden lacks it), found once, not per batch.
        self.keep = []
        for r in usable:
            row_of = {sample: i for i, sample in enumerate(r.ids)}
            self.keep.append((r, np.array([row_of.get(i, -1) for i in self.ids], np.intp)))
        self.k = min(manifest.postprocess.top_k, classes)
        width = self.k + sum(r.topk.shape[1] for r, _ in self.keep)
        n = len(samples)
        self.topk = np.zeros((n, self.k), np.intp)
        self.topk_scores = np.zeros((n, self.k))
        self.classes = np.zeros((n, width), np.int32)
        self.values = np.zeros((n, width))

    def __call__(self, start: int, raw: np.ndarray) -> None:
        rows = slice(start, start + len(raw))
        scores = postprocessed(self.manifest, raw)
        topk, self.topk_scores[rows] = _top(self.manifest, scores)
        self.topk[rows] = topk
        columns = [topk]
        for results, index in self.keep:
            # A sample the golden lacks keeps its own top-1 in that golden's place: a column
            # per golden class keeps every row the same width.
            wanted = np.repeat(topk[:, :1], results.topk.shape[1], axis=1)
            golden_rows = index[rows]
            found = golden_rows >= 0
            wanted[found] = results.topk[golden_rows[found]]
            columns.append(wanted)
        cols = np.concatenate(columns, axis=1)
        self.classes[rows] = cols
        self.values[rows] = np.take_along_axis(scores, cols, axis=1)

    def done(self, samples: Sequence[Sample]) -> tuple[Results, KeptScores]:
        results = _results(samples, self.topk, self.topk_scores)
        return results, KeptScores(self.classes, self.values, self.manifest.dataset.classes)


def evaluate(
    manifest: Manifest,
    device: str,
    settings: Settings,
    dataset: ResolvedDataset | None = None,
    progress: Progress | None = None,
    *,
    keep: Sequence[Results] | None = None,
    shared: SharedLoader | None = None,
    observe: Reduce | None = None,
) -> Evaluation:
    """``keep``: stream, reducing each batch to what these goldens compare; ``shared``: the
    session's shared preprocessing; ``observe``: told each batch's raw outputs (streamed only)."""
    dataset = dataset or resolve_dataset(manifest, settings)
    steady_allocator()
    seed_everything(manifest.runtime.seed)
    # On the CPU the model and preprocessing take turns on the same cores (run_model).
    runner = load_runner(manifest, device, settings, shares_cpu=device == "cpu")
    start = time.perf_counter()
    scores: Scores | KeptScores
    if keep is None:
        raw = run_model(runner, manifest, dataset, progress, shared)
        seconds = time.perf_counter() - start
        scores = postprocessed(manifest, raw)
        results = results_of(manifest, dataset.samples, scores)
    else:
        reduced = _Reduced(manifest, dataset.samples, keep)

        def reduce(start: int, raw: np.ndarray) -> None:
            reduced(start, raw)
            if observe is not None:
                observe(start, raw)

        stream_model(runner, manifest, dataset, reduce, progress, shared)
        seconds = time.perf_counter() - start
        results, scores = reduced.done(dataset.samples)
    return Evaluation(
        results=results,
        scores=scores,
        runner_info=runner.info,
        dataset_origin=dataset.origin,
        seconds=seconds,
        runner=runner,
        samples=dataset.samples,
    )


def evaluate_runs(
    manifest: Manifest,
    device: str,
    settings: Settings,
    dataset: ResolvedDataset,
    runs: int,
    tolerance: float,
    progress: Progress | None = None,
) -> tuple[list[Evaluation], RunComparison]:
    """``runs`` fresh evaluations, each compared sample by sample with the first as it streams:
    the first run's outputs wait in a temporary file, not in memory."""
    comparer = RunsComparer([s.id for s in dataset.samples], runs, tolerance)
    done: list[Evaluation] = []
    with tempfile.TemporaryFile(prefix="mlrepro-first-run-") as first:

        def keep_first(start: int, raw: np.ndarray) -> None:
            first.write(np.ascontiguousarray(raw, np.float32).tobytes())

        def compare(start: int, raw: np.ndarray) -> None:
            first.seek(start * raw.shape[1] * 4)
            prior = np.frombuffer(first.read(raw.size * 4), np.float32).reshape(raw.shape)
            comparer.update(start, postprocessed(manifest, prior), postprocessed(manifest, raw))

        for run in range(runs):
            observe = keep_first if run == 0 else compare
            done.append(
                evaluate(manifest, device, settings, dataset, progress, keep=(), observe=observe)
            )
    return done, comparer.comparison()


@dataclass(frozen=True)
class DeterminismOutcome:
    """The determinism check's record: status, verdict and the facts of a failure's text."""

    status: Literal["passed", "failed"]
    verdict: Literal["identical runs", "within tolerance", "nondeterministic"]
    comparison: RunComparison
    controls: dict[str, Any]


def judge_runs(
    manifest: Manifest, runs: Sequence[Evaluation], comparison: RunComparison
) -> DeterminismOutcome:
    """The determinism check's record of ``runs``, the same evaluation repeated."""
    first = runs[0]
    controls = controls_in_force(manifest, first.runner_info)
    verdict: Literal["identical runs", "within tolerance", "nondeterministic"] = (
        "nondeterministic" if not comparison.ok
        else "identical runs" if comparison.identical
        else "within tolerance"
    )  # fmt: skip
    return DeterminismOutcome(comparison.status, verdict, comparison, controls)


def postprocessed(manifest: Manifest, raw: Scores) -> npt.NDArray[np.float64]:
    """Probabilities when ``postprocess.softmax``, else the raw outputs, as float64."""
    return softmax(raw) if manifest.postprocess.softmax else raw.astype(np.float64)


def results_of(manifest: Manifest, samples: Sequence[Sample], scores: Scores) -> Results:
    """Per-sample results (top-k classes and their rounded scores) as goldens keep them."""
    return _results(samples, *_top(manifest, scores))


def _top(manifest: Manifest, scores: Scores) -> tuple[np.ndarray, np.ndarray]:
    topk = top_k(scores, manifest.postprocess.top_k)
    return topk, rounded_scores(np.take_along_axis(scores, topk, axis=1))


def _results(samples: Sequence[Sample], topk: np.ndarray, topk_scores: np.ndarray) -> Results:
    labels = np.asarray([s.label for s in samples], np.int64)
    return Results(tuple(s.id for s in samples), labels, topk, topk_scores)
