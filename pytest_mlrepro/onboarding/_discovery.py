"""Recipe discovery (``mlrepro init --discover``): known preprocessing conventions raced coarse to
fine on a labelled subset with paired tests; steps and tests: docs/onboarding.md."""

from __future__ import annotations

import dataclasses
import math
import operator
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal

import numpy as np

from .. import pipeline
from ..data import Sample
from ._data_probe import DataFacts
from ._presets import (
    CAFFE,
    GOOGLE_CROP_PADDING,
    GREY_CONVERT,
    IMAGENET,
    LITE,
    MINUS_ONE_ONE,
    MNIST,
    RAW,
    ZERO_ONE,
    Candidate,
    Geometry,
    StepText,
    Values,
    decode_steps,
    geometry_steps,
    value_steps,
)

VALUES = (ZERO_ONE, MINUS_ONE_ONE, LITE, IMAGENET, CAFFE, RAW)
Z95 = 1.959964


def wilson(correct: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion: well-behaved near 0 and 1."""
    if n == 0:
        return 0.0, 1.0
    p = correct / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


# What a candidate's decode makes, by its ``order`` (BGR: the file decoded as RGB, flipped after
# the geometry, which acts per channel).
DECODED = {"BGR": "RGB", "BGRA": "RGBA"} | {
    o: o for o in ("RGB", "RGBA", "L16", "bands", *GREY_CONVERT)
}


@dataclass
class Scored:
    candidate: Candidate
    correct: np.ndarray  # bool per evaluated sample, in subset order
    predictions: np.ndarray
    likelihood: np.ndarray  # float64 per evaluated sample: log P(true label), see log_likelihood

    @property
    def n(self) -> int:
        return len(self.correct)

    @property
    def top1(self) -> float:
        return float(self.correct.mean()) if self.n else 0.0

    def mean_likelihood(self, n: int | None = None) -> float:
        """The ranking's statistic: the mean log-likelihood of the true label on ``n`` samples."""
        n = self.n if n is None else n
        return float(self.likelihood[:n].mean()) if n else -math.inf

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(int(self.correct.sum()), self.n)


@dataclass
class Discovery:
    ranking: list[Scored]  # the finalists first (on the most samples), best first
    seconds: float
    evaluated: int  # candidates tried
    notes: list[str] = field(default_factory=list)
    inputs: int = 0  # model inputs run, over every candidate

    @property
    def best(self) -> Scored:
        return self.ranking[0]

    def render(self) -> str:
        best = self.best
        lines = [
            f"recipe discovery: {self.evaluated} candidates, {self.inputs} model inputs, "
            f"{self.seconds:.1f} s; top-1 on the subset (95% Wilson interval), the mean "
            "log-likelihood of the true label (ranked by it), each compared with the best on "
            "the same samples:",
        ]
        ties = 0
        for rank, scored in enumerate(self.ranking, 1):
            low, high = scored.interval
            mark = " " if rank == 1 else versus(best, scored)
            ties += mark in ("=", "≈") and scored.n == best.n
            lines.append(
                f" {mark}{rank:3d}. {100 * scored.top1:6.2f}%  [{100 * low:5.1f}, "
                f"{100 * high:5.1f}]  log-lik {scored.mean_likelihood():8.4f}  "
                f"n={scored.n:<5d} {scored.candidate.label}"
            )
        lines.append(
            "  (=: the same outputs as the best; ≈: cannot be told apart from it on these "
            "samples; <: worse (a paired t-test on the per-sample log-likelihood of the true "
            "label, or exact McNemar on top-1, 95%); n: the samples it was scored on)"
        )
        if ties:
            lines.append(
                f"  {ties} candidate(s) cannot be told apart from the best on {best.n} samples: "
                "take more (--samples N) if their recipes differ in a way that matters"
            )
        lines.extend(self.notes)
        return "\n".join(lines)


def versus(best: Scored, other: Scored) -> str:
    """``=`` the same outputs as ``best``, ``<`` worse, ``>`` better by a paired test (two-sided,
    95 %), ``≈`` cannot be told apart."""
    n = min(best.n, other.n)
    if np.array_equal(best.predictions[:n], other.predictions[:n]) and np.allclose(
        best.likelihood[:n], other.likelihood[:n], rtol=0.0, atol=1e-6
    ):
        return "="
    if clearly_worse(best, other, n, 0.05):
        return "<"
    return ">" if clearly_worse(other, best, n, 0.05) else "≈"


class _Images:
    """The subset's files read once, decoded once per decoding, each geometry computed once."""

    def __init__(
        self, samples: Sequence[Sample], height: int, width: int, facts: DataFacts | None
    ) -> None:
        self.height, self.width = height, width
        self.bands = facts.decode if facts is not None else None
        # Colour files without alpha for a model of colour and alpha: alpha added, declared.
        self.opaque = facts is None or facts.family != "rgba"
        self.ids = [s.id for s in samples]
        self.files = [s.read() for s in samples]
        self.decoded: dict[tuple[str, bool], list[pipeline.Tensor]] = {}
        self.cache: dict[tuple[str, bool, Geometry], list[np.ndarray]] = {}

    def _decoded(self, key: tuple[str, bool]) -> list[pipeline.Tensor]:
        if key not in self.decoded:
            # A file that fails to decode is a SampleError naming it, as in a test run.
            steps = decode_steps(*key, self.bands, self.opaque)
            pipe = pipeline.Pipeline([_step(s) for s in steps])
            self.decoded[key] = [
                pipe.run(pipe.decode(data, sample), 1, len(pipe.steps), sample)
                for data, sample in zip(self.files, self.ids, strict=True)
            ]
        return self.decoded[key]

    def geometry(self, candidate: Candidate, count: int) -> list[np.ndarray]:
        key = (DECODED[candidate.order], candidate.inverted)
        done = self.cache.setdefault((*key, candidate.geometry), [])
        steps = [_step(s) for s in geometry_steps(candidate.geometry, self.height, self.width)]
        for tensor in self._decoded(key)[len(done) : count]:
            for step in steps:
                tensor = step.apply(tensor)
            done.append(tensor.array)
        return done[:count]

    def grey_statistics(self, count: int) -> tuple[float, float]:
        """The data set's own grey mean and std in 0..1: a candidate for grey models."""
        grey = self._decoded(("L", False))[:count]
        values = np.concatenate([t.array.astype(np.float64).ravel() / 255.0 for t in grey])
        return float(values.mean()), float(values.std()) or 1.0

    def statistics(self, decoded: str, count: int) -> tuple[np.ndarray, np.ndarray]:
        """The data set's own per-channel mean and std, in the decoded values: a candidate."""
        arrays = self._decoded((decoded, False))[:count]
        channels = arrays[0].array.shape[2]
        total, squares, pixels = np.zeros(channels), np.zeros(channels), 0
        for tensor in arrays:  # image by image: no copy of the whole subset as float64
            flat = tensor.array.reshape(-1, channels).astype(np.float64)
            total += flat.sum(axis=0)
            squares += np.square(flat).sum(axis=0)
            pixels += len(flat)
        mean = total / pixels
        std = np.sqrt(np.maximum(squares / pixels - mean**2, 0.0))
        return mean, np.where(std > 0, std, 1.0)


def _step(text: StepText) -> pipeline.Step:
    ((op, params),) = text.items()
    converted = {k: tuple(v) if isinstance(v, list) else v for k, v in params.items()}
    return pipeline.STEPS[op](**converted)


class Progress:
    """Progress on stderr: rewritten in place on a terminal, a line every 15 s in a CI log."""

    def __init__(self, write: Callable[[str], None] | None, interval: float) -> None:
        self.write, self.interval = write, interval
        self.last = -math.inf

    @classmethod
    def to_terminal(cls) -> Progress:
        tty = sys.stderr.isatty()

        def write(text: str) -> None:
            print(("\r" + text + "\033[K") if tty else text, end="" if tty else "\n",
                  file=sys.stderr, flush=True)  # fmt: skip

        return cls(write, 1.0 if tty else 15.0)

    def show(self, text: str, last: bool) -> None:
        now = time.monotonic()
        if self.write is None or not (last or now - self.last >= self.interval):
            return
        self.last = now
        self.write(text)
        if last and sys.stderr.isatty():
            print(file=sys.stderr)

    def __call__(self, stage: str, done: int, left: int, elapsed: float, last: bool) -> None:
        # The estimate is an upper bound: every candidate still in the race run to the end of
        # its stage's budget, at the rate measured so far; eliminations only shorten it.
        rate = elapsed / done if done else 0.0
        estimate = f", at most {_duration(rate * left)} left" if done else ""
        self.show(f"  discovery: {stage}; {done} model inputs run in {_duration(elapsed)}"
                  f"{estimate}", last)  # fmt: skip


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


# The race's significance level: a candidate is dropped when a one-sided paired test (on top-1
# or on the log-likelihood of the true label) says it is worse than the leader at this level,
# Bonferroni-divided by every comparison the stage can make (candidates × looks), so that
# looking after every chunk does not inflate the chance of dropping a candidate that is in truth
# as good as the leader above ALPHA.
ALPHA = 0.05


def mcnemar_tail(b: int, c: int) -> Fraction:
    """P(B ≥ b) for B ~ Binomial(b + c, 1/2), exactly: ``2.0**m`` overflows past m = 1023."""
    m = b + c
    return Fraction(sum(math.comb(m, k) for k in range(b, m + 1)), 2**m)


def worse_than(leader: np.ndarray, other: np.ndarray, alpha: float) -> bool:
    """Worse than ``leader`` by exact McNemar: only the samples where the two disagree count."""
    b = int(np.sum(leader & ~other))
    c = int(np.sum(other & ~leader))
    return b > c and mcnemar_tail(b, c) < Fraction(alpha)


def student_t_tail(t: float, df: int) -> float:
    """P(T > t), Student's t, integer ``df`` ≥ 1, closed form (A&S 26.7.3-4): no scipy."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, not {df}")
    if t < 0:
        return 1.0 - student_t_tail(-t, df)
    if math.isinf(t):
        return 0.0
    theta = math.atan(t / math.sqrt(df))
    sin, cos = math.sin(theta), math.cos(theta)
    c2, odd = cos * cos, df % 2
    # Odd df: A = 2/π (θ + sin θ Σ_k a_k cos^(2k+1) θ), a_0 = 1, a_k = a_(k-1) 2k/(2k+1); even:
    # A = sin θ Σ_k b_k cos^(2k) θ, b_0 = 1, b_k = b_(k-1) (2k-1)/(2k). df // 2 terms either way.
    total, term = 0.0, cos if odd else 1.0
    for k in range(1, df // 2 + 1):
        total += term
        term *= c2 * (2 * k - 1 + odd) / (2 * k + odd)
        if term < 1e-18 * total:
            break
    inside = (2.0 / math.pi) * (theta + sin * total) if odd else sin * total
    return max(0.0, (1.0 - inside) / 2.0)


def worse_by_likelihood(leader: np.ndarray, other: np.ndarray, alpha: float) -> bool:
    """A one-sided paired t-test on the per-sample log-likelihood of the true label: every
    sample counts, which tells apart recipes a few tenths of top-1 apart (bilinear, bicubic)."""
    n = min(len(leader), len(other))
    if n < 2:
        return False
    differences = np.asarray(leader[:n], np.float64) - np.asarray(other[:n], np.float64)
    mean = float(differences.mean())
    if not mean > 0.0:
        return False
    spread = float(differences.std(ddof=1))
    if spread == 0.0:
        return True  # every sample favours the leader by the same amount
    return student_t_tail(mean / (spread / math.sqrt(n)), n - 1) < alpha


def best_first(scored: Sequence[Scored], n: int, alpha: float) -> list[Scored]:
    """By likelihood those not clearly worse on top-1 than the best, then the rest by top-1 (``n``:
    0 all): a wrong range's near-uniform outputs can beat a right recipe on likelihood."""
    if not scored:
        return []

    def cut(item: Scored) -> int:
        return n or item.n

    top = max(scored, key=lambda s: s.correct[: cut(s)].mean())

    def paired(item: Scored) -> int:  # the samples both were scored on
        return n or min(top.n, item.n)

    close = [s for s in scored if not worse_than(
        top.correct[: paired(s)], s.correct[: paired(s)], alpha)]  # fmt: skip
    far = [s for s in scored if s not in close]
    return sorted(close, key=lambda s: -s.mean_likelihood(cut(s))) + sorted(
        far, key=lambda s: -s.correct[: cut(s)].mean()
    )


def clearly_worse(leader: Scored, other: Scored, n: int, alpha: float) -> bool:
    """Worse by either paired test at ``alpha`` / 2: McNemar drops a recipe wrong by tens of
    points whatever the scores' scale, the likelihood sees small consistent differences."""
    return worse_than(leader.correct[:n], other.correct[:n], alpha / 2) or worse_by_likelihood(
        leader.likelihood[:n], other.likelihood[:n], alpha / 2
    )


# The floor of a log-likelihood (nats): a non-finite output, or a probability of 0, counts as
# this, so that one broken sample weighs heavily but does not make every mean -inf or NaN.
LIKELIHOOD_FLOOR = -1e4


def log_likelihood(outputs: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """log P(true label): log p of outputs that are probabilities, else the log-softmax."""
    scores = np.asarray(outputs, np.float64).reshape(len(labels), -1)
    classes = scores.shape[1]
    finite = np.isfinite(scores).all()
    sums = scores.sum(axis=1)
    if finite and (scores >= 0).all() and np.allclose(sums, 1.0, atol=1e-3):
        with np.errstate(divide="ignore"):
            logs = np.log(scores)
    else:
        safe = np.nan_to_num(scores, nan=-np.inf, posinf=np.finfo(np.float64).max / 4)
        top = np.max(safe, axis=1, keepdims=True)
        top = np.where(np.isfinite(top), top, 0.0)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            logs = safe - top - np.log(np.sum(np.exp(safe - top), axis=1, keepdims=True))
    inside = (labels >= 0) & (labels < classes)
    picked = np.full(len(labels), LIKELIHOOD_FLOOR)
    rows = np.flatnonzero(inside)
    picked[rows] = logs[rows, labels[rows]]
    picked = np.nan_to_num(picked, nan=LIKELIHOOD_FLOOR, neginf=LIKELIHOOD_FLOOR)
    floored: np.ndarray = np.maximum(picked, LIKELIHOOD_FLOOR)
    return floored


class Search:
    """Scores candidates on growing prefixes of the subset, one order for all: any two pair up."""

    def __init__(
        self,
        run: Callable[[np.ndarray], np.ndarray],
        samples: Sequence[Sample],
        height: int,
        width: int,
        layout: str,
        dtype: str,
        batch_size: int = 32,
        progress: Progress | None = None,
        facts: DataFacts | None = None,
    ) -> None:
        self.run = run
        self.labels = np.asarray([s.label for s in samples], np.int64)
        self.facts = facts  # what the files are (init read them): the candidates follow
        self.images = _Images(samples, height, width, facts)
        self.layout, self.dtype, self.batch_size = layout, dtype, batch_size
        self.scored: dict[Candidate, Scored] = {}
        self.progress = progress or Progress(None, math.inf)  # silent
        self.inputs = 0  # model inputs run
        self.start = time.perf_counter()
        # The work left, for the estimate: (candidates, samples) per stage still to come.
        self.stages: list[tuple[int, int]] = []
        self.stopped_early: list[str] = []
        self.survivors = 0  # how many the last race left in it

    def score(self, candidate: Candidate, count: int) -> Scored:
        count = min(count, len(self.labels))
        have = self.scored.get(candidate)
        start = have.n if have is not None else 0
        if have is not None and have.n >= count:
            return have
        images = self.images.geometry(candidate, count)[start:count]
        decoded = DECODED[candidate.order]
        names = "L" if decoded in GREY_CONVERT or decoded == "L16" else decoded
        flip = [pipeline.Color(order="BGR")] if candidate.order in ("BGR", "BGRA") else []
        values = [*flip, *(_step(s) for s in value_steps(candidate.values, self.dtype))]
        values.append(pipeline.Layout(order=self.layout))  # type: ignore[arg-type]
        # Extended from what the candidate was scored on before (its first ``start`` samples).
        predictions = [have.predictions if have else np.zeros(0, np.int64)]
        likelihoods = [have.likelihood if have else np.zeros(0, np.float64)]
        for first in range(0, len(images), self.batch_size):
            batch = []
            for array in images[first : first + self.batch_size]:
                tensor = pipeline.Tensor(array, names)
                for step in values:
                    tensor = step.apply(tensor)
                batch.append(tensor.array)
            out = np.asarray(self.run(np.stack(batch)))
            predictions.append(np.argmax(out.reshape(out.shape[0], -1), axis=1))
            labels = self.labels[start + first : start + first + len(batch)]
            likelihoods.append(log_likelihood(out, labels))
            self.inputs += len(batch)
        new, likelihood = np.concatenate(predictions), np.concatenate(likelihoods)
        scored = Scored(candidate, new == self.labels[: len(new)], new, likelihood)
        self.scored[candidate] = scored
        return scored

    def race(
        self, name: str, candidates: Sequence[Candidate], budget: int, chunk: int = 16
    ) -> list[Scored]:
        """Drop those clearly worse than the leader after each ``chunk`` of images, until one
        is left or at ``budget``; the survivors best first, then the rest."""
        budget = min(budget, len(self.labels))
        alive = list(dict.fromkeys(candidates))
        looks = max(1, math.ceil(budget / chunk))
        alpha = ALPHA / (len(alive) * looks)
        dropped: list[Scored] = []
        n = min(chunk, budget)
        if self.stages:
            self.stages.pop(0)  # this stage: counted from here on by what is alive
        while True:
            scored = [self.score(c, n) for c in alive]
            leader = best_first(scored, n, alpha / 2)[0]
            top = max(scored, key=lambda s: s.correct[:n].mean())
            keep = []
            for item in scored:
                if item is not leader and (
                    clearly_worse(leader, item, n, alpha)
                    or worse_than(top.correct[:n], item.correct[:n], alpha / 2)
                ):
                    dropped.append(item)
                else:
                    keep.append(item)
            alive = [s.candidate for s in keep]
            last = len(alive) == 1 or n >= budget
            left = len(alive) * (budget - n) + sum(c * k for c, k in self.stages)
            self.progress(
                f"{name}, {len(alive)} candidate(s) left on {n}/{budget} images",
                self.inputs, 0 if last and not self.stages else left,
                time.perf_counter() - self.start, last and not self.stages,
            )  # fmt: skip
            if last:
                break
            n = min(n + chunk, budget)
        self.survivors = len(alive)
        if len(alive) == 1 and n < budget:
            self.stopped_early.append(
                f"  {name}: the best was clear after {n} of {budget} images "
                f"({len(dropped)} candidate(s) dropped as worse: exact McNemar test on top-1, "
                "or paired t-test on the log-likelihood of the true label)"
            )
        return best_first(keep, n, alpha / 2) + best_first(dropped, 0, alpha / 2)

    def discover(self, channels: int = 3) -> Discovery:
        """Race the known conventions for a model of ``channels`` (1, 3, 4, or the bands)."""
        bands = self.facts is not None and self.facts.family == "bands"
        if channels not in (1, 3, 4) and not bands:
            raise ValueError(f"discovery searches 1-, 3- or 4-channel conventions, not {channels}")
        total = len(self.labels)
        coarse, middle = min(total, 48), min(total, 64)
        geometries = _geometries(self.images.height)
        base = Geometry("crop_then_resize", 0.875, "bilinear", "google")
        starts = _first_candidates(self, channels, base, coarse)
        self.stages = [(len(starts), coarse), (len(geometries), middle), (5, middle), (3, total)]
        # 1. colour order (or grey decoding) × values, one geometry: the conventions differ by many
        # points here.
        first = self.race("1 colour order × values", starts, coarse)
        if channels == 1 and first[0].candidate.order == "L":
            # 1b. the grey from one channel of a colour file instead of luma (the same tensors on
            # grey files: tied, the luma candidate stays first).
            lead = first[0].candidate
            singles = [dataclasses.replace(lead, order=o) for o in ("L-red", "L-green", "L-blue")]
            first = [*self.race("1b grey conversion", [lead, *singles], coarse), *first[1:]]
        runner_up = first[1].candidate if len(first) > 1 else None
        top = first[0].candidate
        # 2-4. When the finalists show clearly that step 1, on few images, picked the wrong
        # values (the runner-up's, in the best geometry, beat them), the geometry found stands
        # (resizing and cropping act on the pixels before the values are set, so the values
        # rarely change which is best): the new values are raced in the other finalist
        # geometries on the whole subset. A wrong colour order is another matter (the model sees
        # another picture): the geometry is searched again for it, once.
        for _ in range(2):
            final, geometries_found = _refine(self, top, runner_up, middle, total, geometries)
            winner = final[0]
            if not _overturned(winner, final, top):
                break
            if (winner.candidate.order, winner.candidate.inverted) == (top.order, top.inverted):
                others = [
                    dataclasses.replace(winner.candidate, geometry=g) for g in geometries_found
                ]
                self.race("4 finalists, the new values", [winner.candidate, *others], total, 32)
                break
            runner_up = top
            top = winner.candidate
            self.stages = [(len(geometries), middle), (5, middle), (4, total)]
        # The finalists on the most samples first (the best of all rounds), then the rest.
        most = max(s.n for s in self.scored.values())
        finalists = [s for s in self.scored.values() if s.n == most]
        rest = [s for s in self.scored.values() if s.n < most]
        ranking = best_first(finalists, most, ALPHA) + sorted(
            rest, key=lambda s: (-s.mean_likelihood(), -s.n)
        )
        return Discovery(
            ranking=ranking,
            seconds=time.perf_counter() - self.start,
            evaluated=len(self.scored),
            notes=self.stopped_early,
            inputs=self.inputs,
        )


def for_channels(values: Values, channels: int) -> Values:
    """``values`` written for 3 channels, for grey (one value) or alpha (left as scaled)."""
    if values.mean is None or values.std is None or channels == 3:
        return values
    if channels == 4:
        return dataclasses.replace(values, mean=(*values.mean, 0.0), std=(*values.std, 1.0))
    if len(set(values.mean)) == 1 and len(set(values.std)) == 1:
        return dataclasses.replace(values, mean=values.mean[:1], std=values.std[:1])
    raise ValueError(f"{values.label}: no grey form")


def _own(label: str, divisor: float | None, mean: np.ndarray, std: np.ndarray) -> Values:
    scale = divisor or 1.0  # a measured statistic, as a manifest shows it: 6 digits
    return Values(label, divisor, tuple(float(f"{m / scale:.6g}") for m in mean),
                  tuple(float(f"{s / scale:.6g}") for s in std))  # fmt: skip


def _wide_values(search: Search, facts: DataFacts) -> list[Values]:
    """Value conventions for 16-bit grey or multi-band data: ranges, raw, own statistics."""
    channels, word = facts.bands, "band" if facts.family == "bands" else "channel"
    found = [Values(f"/{d:g} ({why})", d, None, None) for d, why in facts.range_divisors()]
    if facts.dtype in ("uint8", "uint16"):
        half = 127.5 if facts.dtype == "uint8" else 32767.5
        found.append(Values(f"(x - {half:g}) / {half:g}", None, (half,) * channels,
                            (half,) * channels))  # fmt: skip
    found.append(Values(f"raw {facts.dtype} values as float", None, None, None))
    decoded = "bands" if facts.family == "bands" else "L16"
    # Measured on the whole subset (decoded once, as every later step needs it anyway): the
    # closer to the data set's own statistics, the closer to what the model was trained with.
    mean, std = search.images.statistics(decoded, len(search.labels))
    found.append(_own(f"the data set's own per-{word} mean/std", None, mean, std))
    if channels > 1:
        flat_mean = float(np.mean(mean))
        flat_std = float(np.sqrt(np.mean(std**2 + (mean - flat_mean) ** 2)))
        found.append(_own(f"the data set's mean/std, the same on every {word}", None,
                          np.full(channels, flat_mean), np.full(channels, flat_std)))  # fmt: skip
    return found


def _first_candidates(
    search: Search, channels: int, base: Geometry, coarse: int
) -> list[Candidate]:
    """Step 1's candidates, from what the files are (``search.facts``) and the channels."""
    facts = search.facts
    if facts is not None and facts.family == "bands":
        return [Candidate("bands", base, v, bands=facts.decode)
                for v in _wide_values(search, facts)]  # fmt: skip
    if facts is not None and facts.family == "grey16" and channels == 1:
        return [Candidate("L16", base, v) for v in _wide_values(search, facts)]
    if facts is not None and facts.family == "rgba" and channels == 4:
        measured = search.images.statistics("RGBA", len(search.labels))
        shared = [for_channels(v, 4) for v in VALUES]
        for same in (MINUS_ONE_ONE, LITE):
            assert same.mean is not None and same.std is not None
            shared.append(dataclasses.replace(
                same, label=f"{same.label}, alpha too", mean=same.mean + same.mean[:1],
                std=same.std + same.std[:1]))  # fmt: skip
        label = "/255, the data set's own per-channel mean/std"
        return [
            Candidate(order, base, values)
            for order, index in (("RGBA", [0, 1, 2, 3]), ("BGRA", [2, 1, 0, 3]))
            for values in (*shared, _own(label, 255.0, measured[0][index], measured[1][index]))
        ]
    if channels == 3:
        # No measured mean/std here: on photographs it is ImageNet's, within the noise, and
        # would be written in place of the named convention the model was trained with.
        return [Candidate(order, base, values) for order in ("RGB", "BGR") for values in VALUES]
    if channels == 4:
        return [
            Candidate(order, base, for_channels(values, 4), opaque=search.images.opaque)
            for order in ("RGBA", "BGRA")
            for values in VALUES
        ]
    mean, std = search.images.grey_statistics(coarse)
    own = Values(f"/255, the data set's mean/std ({mean:.4f}, {std:.4f})", 255.0,
                 (round(mean, 4),), (round(std, 4),))  # fmt: skip
    grey = [for_channels(v, 1) for v in (ZERO_ONE, MINUS_ONE_ONE, LITE, RAW)]
    return [
        Candidate("L", base, values, inverted)
        for inverted in (False, True)
        for values in (*grey, MNIST, own)
    ]


def _overturned(winner: Scored, final: Sequence[Scored], top: Candidate) -> bool:
    """Whether step 1's colour order or values are clearly worse than the winner's: a winner
    that cannot be told apart from them is no reason to search the geometry again."""
    key = operator.attrgetter("order", "inverted", "values")
    if key(winner.candidate) == key(top):
        return False
    same = [s for s in final if key(s.candidate) == key(top)]
    return not same or clearly_worse(winner, same[0], min(winner.n, same[0].n), ALPHA)


GEOMETRIES = tuple(
    Geometry(kind, 0.875, method)
    for kind in ("resize", "crop_then_resize", "resize_then_crop")
    for method in ("bilinear", "bicubic")
)


def _geometries(size: int) -> tuple[Geometry, ...]:
    """The common geometries and Google's EfficientNet crop, 0.875 only at 224."""
    google = Geometry("crop_then_resize", size / (size + GOOGLE_CROP_PADDING), "bicubic")
    return tuple(dict.fromkeys((*GEOMETRIES, google)))


def _refine(
    search: Search,
    top: Candidate,
    runner_up: Candidate | None,
    middle: int,
    total: int,
    geometries: Sequence[Geometry],
) -> tuple[list[Scored], list[Geometry]]:
    """Steps 2-4 for ``top``'s colour order and values: the ranking and finalists' geometries."""
    second = search.race(
        "2 geometry", [dataclasses.replace(top, geometry=g) for g in geometries], middle
    )
    best = second[0].candidate
    contenders = [s.candidate for s in second[:2]]
    if best.geometry.kind != "resize":
        fractions = [0.8, 0.9, 0.95]
        if best.geometry.kind == "crop_then_resize":
            fractions.append(1.0)
        tried = [
            dataclasses.replace(best, geometry=dataclasses.replace(best.geometry, fraction=f))
            for f in fractions
        ]
        third = search.race("3 crop fraction", [*contenders, *tried], middle)
        # Every crop the race could not tell apart from the best goes on to the whole subset
        # (up to four): on 64 images 0.8 and 0.875 are often within each other's noise, and
        # keeping only the first two dropped the true crop before it was seen on the rest.
        contenders = [s.candidate for s in third[: max(2, min(4, search.survivors))]]
    elif search.stages:
        search.stages.pop(0)  # no crop to tune
    finalists = list(contenders)
    # The resize method is decided on the whole subset, where the likelihood test has the power
    # to tell bilinear from bicubic (on step 2's 64 images it rarely can): the best geometry
    # with the other method is always a finalist.
    lead = contenders[0]
    other: Literal["bilinear", "bicubic"] = (
        "bicubic" if lead.geometry.method == "bilinear" else "bilinear"
    )
    finalists.append(
        dataclasses.replace(lead, geometry=dataclasses.replace(lead.geometry, method=other))
    )
    if runner_up is not None:
        finalists.append(dataclasses.replace(runner_up, geometry=contenders[0].geometry))
    ranking = search.race("4 finalists", list(dict.fromkeys(finalists)), total, chunk=32)
    return ranking, [c.geometry for c in contenders]
