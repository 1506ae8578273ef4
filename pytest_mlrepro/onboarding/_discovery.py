"""Recipe discovery: which preprocessing convention reproduces a model's accuracy, found on a
labelled subset, coarse to fine.

1. colour order × value transform (the six value conventions of the presets: 0..1, −1..1,
   (x − 127)/128, ImageNet mean/std, Caffe mean subtraction, raw 0..255), with one geometry;
2. the best three of those × geometry (plain resize, crop 0.875 then resize, resize the shorter
   side then centre crop) × resize method (bilinear, bicubic; nearest for the plain resize);
3. the crop fraction around the best (0.8 … 1.0), then the best few on the whole subset.

Every candidate is a manifest pipeline (``_presets.recipe_steps``) applied with the project's own
ops to images decoded once (the geometry of each variant computed once per image, the colour
order and values applied on top: resizing is per channel, so flipping before or after gives the
same pixels). One loaded model runs every candidate.

What it cannot tell apart: conventions that give identical tensors (``(x − 127.5)/127.5`` and
``x/127.5 − 1``; a crop fraction of 1.0 and no crop; RGB and BGR on grey images), and ones whose
top-1 differs by less than the sampling noise of the subset: those are reported as such, with
their intervals, and the choice between them is left to the owner (more ``--samples``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import pipeline
from ..data import Sample
from ._presets import (
    CAFFE,
    IMAGENET,
    LITE,
    MINUS_ONE_ONE,
    RAW,
    ZERO_ONE,
    Geometry,
    StepText,
    Values,
    geometry_steps,
    recipe_steps,
    value_steps,
)

VALUES = (ZERO_ONE, MINUS_ONE_ONE, LITE, IMAGENET, CAFFE, RAW)
Z95 = 1.959964


def wilson(correct: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95 %): well-behaved near 0 and 1."""
    if n == 0:
        return 0.0, 1.0
    p = correct / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Candidate:
    order: str
    geometry: Geometry
    values: Values

    @property
    def label(self) -> str:
        return f"{self.order}, {self.geometry.label}, {self.values.label}"

    def steps(self, height: int, width: int, layout: str, dtype: str) -> list[StepText]:
        return recipe_steps(self.order, self.geometry, self.values, height, width, layout, dtype)


@dataclass
class Scored:
    candidate: Candidate
    correct: np.ndarray  # bool per evaluated sample, in subset order
    predictions: np.ndarray

    @property
    def n(self) -> int:
        return len(self.correct)

    @property
    def top1(self) -> float:
        return float(self.correct.mean()) if self.n else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(int(self.correct.sum()), self.n)


@dataclass
class Discovery:
    ranking: list[Scored]  # the finalists first (on the most samples), best first
    seconds: float
    evaluated: int  # candidates tried
    notes: list[str] = field(default_factory=list)

    @property
    def best(self) -> Scored:
        return self.ranking[0]

    def render(self) -> str:
        best = self.best
        lines = [
            f"recipe discovery: {self.evaluated} candidates, {self.seconds:.1f} s; top-1 on the "
            "subset (95% Wilson interval), each compared with the best on the same samples:",
        ]
        ties = 0
        for rank, scored in enumerate(self.ranking, 1):
            low, high = scored.interval
            mark = " " if rank == 1 else versus(best, scored)
            ties += mark in ("=", "≈") and scored.n == best.n
            lines.append(
                f" {mark}{rank:3d}. {100 * scored.top1:6.2f}%  [{100 * low:5.1f}, "
                f"{100 * high:5.1f}]  n={scored.n:<5d} {scored.candidate.label}"
            )
        lines.append(
            "  (=: the same predictions as the best; ≈: cannot be told apart from it on these "
            "samples (paired McNemar test, 95%); <: worse; n: the samples it was scored on)"
        )
        if ties:
            lines.append(
                f"  {ties} candidate(s) cannot be told apart from the best on {best.n} samples: "
                "take more (--samples N) if their recipes differ in a way that matters"
            )
        lines.extend(self.notes)
        return "\n".join(lines)


def versus(best: Scored, other: Scored) -> str:
    """``=`` same predictions as ``best`` on ``other``'s samples, ``<`` worse by a paired
    (McNemar) test at 95 %, ``≈`` cannot be told apart."""
    n = other.n
    if np.array_equal(best.predictions[:n], other.predictions):
        return "="
    best_right, other_right = best.correct[:n], other.correct
    only_best = int(np.sum(best_right & ~other_right))
    only_other = int(np.sum(other_right & ~best_right))
    if only_best + only_other == 0:
        return "≈"
    z = (only_best - only_other) / math.sqrt(only_best + only_other)
    return "<" if z > Z95 else ("≈" if z > -Z95 else ">")


class _Images:
    """The subset decoded once, and each geometry's S×S uint8 images computed once."""

    def __init__(self, samples: Sequence[Sample], height: int, width: int) -> None:
        self.height, self.width = height, width
        decoder = pipeline.Decode(backend="pil", order="RGB", exif_orientation=False)
        self.decoded = [decoder.decode(s.read(), s.id) for s in samples]
        self.cache: dict[Geometry, list[np.ndarray]] = {}

    def geometry(self, geometry: Geometry, count: int) -> list[np.ndarray]:
        done = self.cache.setdefault(geometry, [])
        steps = [_step(s) for s in geometry_steps(geometry, self.height, self.width)]
        for tensor in self.decoded[len(done) : count]:
            for step in steps:
                tensor = step.apply(tensor)
            done.append(tensor.array)
        return done[:count]


def _step(text: StepText) -> pipeline.Step:
    ((op, params),) = text.items()
    converted = {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()}
    return pipeline.STEPS[op](**converted)


class Search:
    """Scores candidates on growing prefixes of the subset; results are cached and extended."""

    def __init__(
        self,
        run: Callable[[np.ndarray], np.ndarray],
        samples: Sequence[Sample],
        height: int,
        width: int,
        layout: str,
        dtype: str,
        batch_size: int = 32,
    ) -> None:
        self.run = run
        self.labels = np.asarray([s.label for s in samples], np.int64)
        self.images = _Images(samples, height, width)
        self.layout, self.dtype, self.batch_size = layout, dtype, batch_size
        self.scored: dict[Candidate, Scored] = {}

    def score(self, candidate: Candidate, count: int) -> Scored:
        count = min(count, len(self.labels))
        have = self.scored.get(candidate)
        start = have.n if have is not None else 0
        if have is not None and have.n >= count:
            return have
        images = self.images.geometry(candidate.geometry, count)[start:count]
        values = [_step(s) for s in value_steps(candidate.values, self.dtype)]
        values.append(pipeline.Layout(order=self.layout))  # type: ignore[arg-type]
        predictions: list[np.ndarray] = []
        for first in range(0, len(images), self.batch_size):
            batch = []
            for array in images[first : first + self.batch_size]:
                tensor = pipeline.Tensor(array, "RGB")
                if candidate.order == "BGR":
                    tensor = pipeline.Color(order="BGR").apply(tensor)
                for step in values:
                    tensor = step.apply(tensor)
                batch.append(tensor.array)
            out = np.asarray(self.run(np.stack(batch)))
            predictions.append(np.argmax(out.reshape(out.shape[0], -1), axis=1))
        new = np.concatenate(predictions) if predictions else np.zeros(0, np.int64)
        if have is not None:
            new = np.concatenate([have.predictions, new])
        scored = Scored(candidate, new == self.labels[: len(new)], new)
        self.scored[candidate] = scored
        return scored

    def best(self, candidates: Sequence[Candidate], count: int, keep: int) -> list[Scored]:
        scored = [self.score(c, count) for c in dict.fromkeys(candidates)]
        return sorted(scored, key=lambda s: -s.top1)[:keep]


def discover(
    run: Callable[[np.ndarray], np.ndarray],
    samples: Sequence[Sample],
    height: int,
    width: int,
    layout: str,
    dtype: str,
    batch_size: int = 32,
) -> Discovery:
    """Search the known conventions on ``samples`` (spread over the data set) with ``run`` (a
    loaded model: batch → outputs)."""
    start = time.perf_counter()
    search = Search(run, samples, height, width, layout, dtype, batch_size)
    total = len(samples)
    coarse, middle = min(total, 50), min(total, 150)
    base = Geometry("crop_then_resize", 0.875, "bilinear", "google")
    # 1. colour order × values, one geometry: the conventions differ by many points here.
    first = search.best(
        [Candidate(order, base, values) for order in ("RGB", "BGR") for values in VALUES],
        coarse,
        keep=2,
    )
    runner_up = first[1].candidate if len(first) > 1 else None
    top = first[0].candidate
    # 2-4, repeated (at most twice) when the finalists show that step 1, on few images, picked
    # the wrong colour order or values: the geometry is then searched again for the winner.
    for _ in range(2):
        final = _refine(search, top, runner_up, middle, total)
        winner = final[0].candidate
        if (winner.order, winner.values) == (top.order, top.values):
            break
        runner_up = top
        top = winner
    # Every candidate scored on the whole subset first (the best of all rounds), then the rest.
    ranking = sorted(search.scored.values(), key=lambda s: (s.n < total, -s.top1, -s.n))
    return Discovery(
        ranking=ranking,
        seconds=time.perf_counter() - start,
        evaluated=len(search.scored),
    )


GEOMETRIES = (
    Geometry("resize", method="bilinear"),
    Geometry("resize", method="bicubic"),
    Geometry("crop_then_resize", 0.875, "bilinear"),
    Geometry("crop_then_resize", 0.875, "bicubic"),
    Geometry("resize_then_crop", 0.875, "bilinear"),
    Geometry("resize_then_crop", 0.875, "bicubic"),
)


def _refine(
    search: Search, top: Candidate, runner_up: Candidate | None, middle: int, total: int
) -> list[Scored]:
    """Steps 2-4 for ``top``'s colour order and values: the geometry and resize method, the
    crop fraction, then the finalists (with ``runner_up``'s values in the best geometry) on the
    whole subset, best first."""
    second = search.best([Candidate(top.order, g, top.values) for g in GEOMETRIES], middle, 2)
    best = second[0].candidate
    if best.geometry.kind != "resize":
        fractions = [0.8, 0.9, 0.95]
        if best.geometry.kind == "crop_then_resize":
            fractions.append(1.0)
        tried = [
            Candidate(
                best.order,
                Geometry(best.geometry.kind, f, best.geometry.method, best.geometry.rounding),
                best.values,
            )
            for f in fractions
        ]
        second = search.best([*(s.candidate for s in second), *tried], middle, keep=2)
    finalists = [s.candidate for s in second]
    if runner_up is not None:
        finalists.append(Candidate(runner_up.order, second[0].candidate.geometry, runner_up.values))
    return search.best(list(dict.fromkeys(finalists)), total, keep=len(finalists))


def spread(samples: Sequence[Sample], count: int) -> list[Sample]:
    """``count`` samples evenly spread over ``samples`` (sorted by id, so often by class)."""
    if count >= len(samples):
        return list(samples)
    index = np.linspace(0, len(samples) - 1, count).round().astype(int)
    return [samples[i] for i in dict.fromkeys(index.tolist())]


__all__ = ["Candidate", "Discovery", "Scored", "discover", "spread", "wilson"]
