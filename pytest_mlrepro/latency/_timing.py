"""Latency measurement: the timing loop, its statistics, and verdicts that survive a noisy machine.

No pytest and no ML framework here; :mod:`pytest_mlrepro.latency._measure` prepares the
callables timed.

* :func:`measure` runs warm-up rounds (never counted), then timed rounds until both a minimum
  count and a minimum time are reached, or a time cap; the loop is a ``perf_counter_ns`` pair
  around one call, with the garbage collector paused, so that it adds well under a microsecond.
* :func:`summarize` gives min, p50, p90, p99, mean, stddev, quartiles, IQR and outlier counts.
* :func:`judge` compares two distributions on a chosen statistic, absolutely and normalised by a
  reference workload measured alongside each (:class:`ReferenceWorkload`), with bootstrap
  confidence bounds: a regression is declared only when both ratios are confidently beyond the
  tolerance.
* :func:`cpu_times` / :func:`other_load` read ``/proc/stat`` to tell how much of the CPUs other
  processes used while we measured (contention).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..fingerprint import usable_cpus
from ..manifest import STATISTICS

SKETCH_SIZE = 256
"""Samples kept per distribution in a golden and resampled by the bootstrap (:func:`sketch`)."""

Outcome = Literal["pass", "regression", "faster"]


# --- the measurement loop ---------------------------------------------------------------------


@dataclass(frozen=True)
class StopRule:
    """When a measurement stops. Times in seconds.

    Warm-up rounds run until both ``warmup_rounds`` and ``warmup_time`` are reached and are never
    counted. Timed rounds then run until both ``min_rounds`` and ``min_time`` are reached, or until
    ``max_time`` has passed (the cap wins: a model slower than ``max_time / min_rounds`` per call
    gives fewer rounds, and :attr:`Measurement.stopped_by` says so).
    """

    min_rounds: int = 20
    min_time: float = 1.0
    max_time: float = 10.0
    warmup_rounds: int = 5
    warmup_time: float = 0.2

    def __post_init__(self) -> None:
        if self.min_rounds < 1 or self.warmup_rounds < 0:
            raise ValueError("min_rounds must be >= 1 and warmup_rounds >= 0")
        if self.min_time < 0 or self.warmup_time < 0 or self.max_time <= 0:
            raise ValueError("times must be >= 0 and max_time > 0")
        if self.max_time < self.min_time:
            raise ValueError("max_time must be >= min_time")


@dataclass(frozen=True)
class Measurement:
    """Timed rounds of one callable: ``samples_ns`` in call order (warm-up excluded)."""

    samples_ns: np.ndarray
    stopped_by: Literal["min_rounds_and_time", "max_time"]
    warmup_rounds: int
    warmup_ns: int
    started: float  # time.time() at the first timed round: lines a measurement up with others
    finished: float

    @property
    def seconds(self) -> np.ndarray:
        return self.samples_ns.astype(np.float64) * 1e-9


def _rounds(
    call: Callable[[], object],
    min_rounds: int,
    min_ns: int,
    max_ns: int,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> tuple[list[int], bool]:
    """Time ``call`` until ``min_rounds`` and ``min_ns`` are both reached, or ``max_ns`` passed.

    Returns the per-call durations and whether the cap stopped it. Kept minimal on purpose: the
    only work between the two clock reads is the call itself."""
    times: list[int] = []
    append = times.append
    start = clock()
    enough_time = start + min_ns
    cap = start + max_ns
    count = 0
    while True:
        t0 = clock()
        call()
        t1 = clock()
        append(t1 - t0)
        count += 1
        if count >= min_rounds and t1 >= enough_time:
            return times, False
        if t1 >= cap:
            return times, True


def measure(
    call: Callable[[], object], rule: StopRule, *, clock: Callable[[], int] = time.perf_counter_ns
) -> Measurement:
    """Warm ``call`` up, then time it round by round under ``rule``.

    ``call`` must do the whole unit of work, device synchronisation included (a GPU call that
    returns before the kernels finish would be timed as nearly free). The garbage collector is
    paused during the rounds (a collection in the middle of a round is Python's cost, not the
    model's) and runs once between warm-up and timing. ``clock``: nanoseconds, monotonic."""
    was_enabled = gc.isenabled()
    try:
        warm_start = clock()
        warm = 0
        if rule.warmup_rounds or rule.warmup_time:
            warm = len(
                _rounds(
                    call,
                    max(rule.warmup_rounds, 1),
                    int(rule.warmup_time * 1e9),
                    int(rule.max_time * 1e9),
                    clock,
                )[0]
            )
        warmup_ns = clock() - warm_start
        gc.collect()
        gc.disable()
        started = time.time()
        times, capped = _rounds(
            call, rule.min_rounds, int(rule.min_time * 1e9), int(rule.max_time * 1e9), clock
        )
        finished = time.time()
    finally:
        if was_enabled:
            gc.enable()
    return Measurement(
        samples_ns=np.asarray(times, dtype=np.int64),
        stopped_by="max_time" if capped else "min_rounds_and_time",
        warmup_rounds=warm,
        warmup_ns=warmup_ns,
        started=started,
        finished=finished,
    )


# --- statistics -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stats:
    """Summary of a latency distribution, in seconds (``rounds`` and outlier counts: integers).

    Quantiles use numpy's default (linear interpolation between order statistics). Outliers
    follow Tukey (beyond 1.5 IQR from the quartiles) and, as pytest-benchmark reports them, beyond
    one standard deviation from the mean; ``ld15iqr``/``hd15iqr`` are the lowest and highest
    samples inside Tukey's fences."""

    rounds: int
    min: float
    max: float
    mean: float
    stddev: float
    p50: float
    p90: float
    p99: float
    q1: float
    q3: float
    iqr: float
    iqr_outliers: int
    stddev_outliers: int
    ld15iqr: float
    hd15iqr: float
    total: float

    def get(self, statistic: str) -> float:
        """The value of one of :data:`STATISTICS`."""
        if statistic not in STATISTICS:
            raise ValueError(f"unknown statistic {statistic!r}; known: {', '.join(STATISTICS)}")
        return float(getattr(self, statistic))


def summarize(samples: Sequence[float] | np.ndarray) -> Stats:
    """Statistics of ``samples`` (seconds). Raises ValueError on an empty sample."""
    data = np.sort(np.asarray(samples, dtype=np.float64))
    if data.size == 0:
        raise ValueError("no samples")
    q1, p50, q3, p90, p99 = np.quantile(data, [0.25, 0.5, 0.75, 0.9, 0.99])
    iqr = q3 - q1
    low_fence, high_fence = q1 - 1.5 * iqr, q3 + 1.5 * iqr
    inside = data[(data >= low_fence) & (data <= high_fence)]
    mean = float(data.mean())
    stddev = float(data.std(ddof=1)) if data.size > 1 else 0.0
    return Stats(
        rounds=int(data.size),
        min=float(data[0]),
        max=float(data[-1]),
        mean=mean,
        stddev=stddev,
        p50=float(p50),
        p90=float(p90),
        p99=float(p99),
        q1=float(q1),
        q3=float(q3),
        iqr=float(iqr),
        iqr_outliers=int(data.size - inside.size),
        stddev_outliers=int(np.count_nonzero(np.abs(data - mean) > stddev)),
        ld15iqr=float(inside[0]),
        hd15iqr=float(inside[-1]),
        total=float(data.sum()),
    )


def sketch(samples: Sequence[float] | np.ndarray, size: int = SKETCH_SIZE) -> np.ndarray:
    """At most ``size`` values standing for the distribution: the samples themselves (sorted) when
    there are few, else the quantiles at ``(i + 0.5) / size``.

    A golden keeps this instead of every round (a fast model gives tens of thousands), and the
    bootstrap resamples it: its confidence bounds then are those of a ``size``-round sample, wider
    than the real ones when there were more rounds, never narrower."""
    data = np.sort(np.asarray(samples, dtype=np.float64))
    if data.size <= size:
        return data
    return np.quantile(data, (np.arange(size) + 0.5) / size)


def _statistic(values: np.ndarray, statistic: str, axis: int | None = None) -> Any:
    if statistic == "min":
        return values.min(axis=axis)
    if statistic == "mean":
        return values.mean(axis=axis)
    return np.quantile(values, {"p50": 0.5, "p90": 0.9, "p99": 0.99}[statistic], axis=axis)


# --- verdicts ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ratio:
    """now / golden, with a one-sided bootstrap bound on each side at the given confidence."""

    value: float
    low: float
    high: float


@dataclass(frozen=True)
class Judgement:
    """One statistic of one measurement compared with its golden."""

    statistic: str
    tolerance: float
    golden: float  # seconds
    now: float  # seconds
    ratio: Ratio  # absolute: now / golden
    normalised: Ratio | None  # (now / golden) / (reference now / reference golden)
    outcome: Outcome


def _bootstrap(
    values: np.ndarray, statistic: str, resamples: int, rng: np.random.Generator
) -> np.ndarray:
    picks = rng.integers(0, values.size, size=(resamples, values.size))
    return np.asarray(_statistic(values[picks], statistic, axis=1), dtype=np.float64)


def judge(
    now: Sequence[float] | np.ndarray,
    golden: Sequence[float] | np.ndarray,
    statistic: str,
    tolerance: float,
    *,
    now_reference: Sequence[float] | np.ndarray | None = None,
    golden_reference: Sequence[float] | np.ndarray | None = None,
    now_value: float | None = None,
    golden_value: float | None = None,
    reference_may_excuse: bool = True,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Judgement:
    """Compare latency samples ``now`` with ``golden`` (seconds) on ``statistic``.

    The absolute ratio is ``stat(now) / stat(golden)``. With both reference samples given, the
    normalised ratio divides it by ``p50(now_reference) / p50(golden_reference)``: how much slower
    the machine itself runs a fixed workload now. Each ratio gets one-sided bootstrap bounds at
    ``confidence`` (resampling all the samples involved; a fixed seed makes the verdict a pure
    function of the data).

    * ``regression``: the absolute *and* the normalised ratio are confidently above
      ``tolerance`` (their lower bounds exceed it). A slower machine raises the absolute ratio
      only; a lucky reference round raises the normalised one only; neither alone fails.
    * ``faster``: both confidently below ``1 / tolerance``.
    * ``pass`` otherwise.

    With ``reference_may_excuse=False`` the normalised ratio is still computed and reported, but
    the outcome follows the absolute ratio alone (the caller knows the machine was idle, so a
    slower reference is the reference's own noise, not a busier machine).

    ``now_value`` / ``golden_value`` give the statistic of the full samples when ``now`` /
    ``golden`` are sketches (the bounds come from the sketches).
    """
    if statistic not in STATISTICS:
        raise ValueError(f"unknown statistic {statistic!r}; known: {', '.join(STATISTICS)}")
    if tolerance < 1.0:
        raise ValueError("tolerance is a ratio >= 1 (e.g. 1.25: 25% slower is a regression)")
    now_s, golden_s = sketch(now), sketch(golden)
    if now_s.size == 0 or golden_s.size == 0:
        raise ValueError("no samples")
    rng = np.random.default_rng(seed)
    tail = (1.0 - confidence) * 100
    now_v = float(now_value if now_value is not None else _statistic(now_s, statistic))
    golden_v = float(golden_value if golden_value is not None else _statistic(golden_s, statistic))
    boot = _bootstrap(now_s, statistic, resamples, rng) / _bootstrap(
        golden_s, statistic, resamples, rng
    )
    ratio = Ratio(now_v / golden_v, *map(float, np.percentile(boot, [tail, 100 - tail])))
    normalised = None
    if now_reference is not None and golden_reference is not None:
        ref_now, ref_golden = sketch(now_reference), sketch(golden_reference)
        if ref_now.size and ref_golden.size:
            factor = float(np.median(ref_now) / np.median(ref_golden))
            boot_factor = _bootstrap(ref_now, "p50", resamples, rng) / _bootstrap(
                ref_golden, "p50", resamples, rng
            )
            norm = boot / boot_factor
            normalised = Ratio(
                ratio.value / factor, *map(float, np.percentile(norm, [tail, 100 - tail]))
            )
    views = [ratio] if normalised is None or not reference_may_excuse else [ratio, normalised]
    outcome: Outcome = "pass"
    if all(v.low > tolerance for v in views):
        outcome = "regression"
    elif all(v.high < 1.0 / tolerance for v in views):
        outcome = "faster"
    return Judgement(statistic, tolerance, golden_v, now_v, ratio, normalised, outcome)


# --- contention -------------------------------------------------------------------------------


@dataclass(frozen=True)
class CpuTimes:
    """Cumulative CPU time (clock ticks) of the usable CPUs, all processes, and of this process."""

    busy: int
    total: int
    own: int


def parse_proc_stat(text: str, cpus: Sequence[int]) -> tuple[int, int]:
    """(busy, total) ticks summed over ``cpus`` from the text of ``/proc/stat``. Steal time (a
    hypervisor running someone else on our core) counts as busy: it is capacity we did not get."""
    wanted = {f"cpu{i}" for i in cpus}
    busy = total = 0
    for line in text.splitlines():
        fields = line.split()
        if not fields or fields[0] not in wanted:
            continue
        # user nice system idle iowait irq softirq steal (guest time is already within user)
        values = [int(v) for v in fields[1:9]]
        values += [0] * (8 - len(values))
        total += sum(values)
        busy += sum(values) - values[3] - values[4]
    return busy, total


def parse_own_ticks(text: str) -> int:
    """utime + stime (ticks, every thread) from the text of ``/proc/<pid>/stat``."""
    after_name = text[text.rindex(")") + 2 :].split()
    return int(after_name[11]) + int(after_name[12])  # fields 14 and 15 of proc(5)


def cpu_times(cpus: Sequence[int] | None = None) -> CpuTimes | None:
    """A snapshot for :func:`other_load`; None where ``/proc`` is not available (not Linux)."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            stat = fh.read()
        with open("/proc/self/stat", encoding="ascii", errors="replace") as fh:
            own = parse_own_ticks(fh.read())
    except (OSError, ValueError, IndexError):
        return None
    busy, total = parse_proc_stat(stat, cpus if cpus is not None else usable_cpus())
    return CpuTimes(busy, total, own) if total else None


def other_load(before: CpuTimes | None, after: CpuTimes | None) -> float | None:
    """The fraction of the usable CPUs' capacity that other processes (and the hypervisor) took
    between two snapshots: 0 on an otherwise idle machine, 0.5 when one of two cores was busy
    elsewhere. None when unknown."""
    if before is None or after is None:
        return None
    total = after.total - before.total
    if total <= 0:
        return None
    others = (after.busy - before.busy) - (after.own - before.own)
    return min(1.0, max(0.0, others / total))


# --- the reference workload -------------------------------------------------------------------


class ReferenceWorkload:
    """A fixed compute kernel, run on every usable core at once, that says how fast the machine
    is right now.

    Each round, every thread multiplies a stack of small float32 matrices 128 times (48 × 48, cache
    resident, below the size where OpenBLAS starts threads of its own, and numpy releases the GIL
    while it runs), and the round ends when the slowest thread is done, like the parallel section
    of a model's operator. Its thread count follows the machine (the usable CPUs), never the
    manifest: a manifest that drops from two threads to one must show up as a regression, not be
    normalised away. Used as a context manager (it owns a thread pool).
    """

    SIZE = 48
    STACK = 16
    # About 6 ms per round on an idle core: long enough to average over scheduler time slices
    # like a model call does (1.6 ms rounds swung ×1.4 between measurements on a loaded 2-core
    # machine, 10 ms rounds ×1.1).
    REPEAT = 128
    RULE = StopRule(min_rounds=15, min_time=0.2, max_time=2.0, warmup_rounds=2, warmup_time=0.02)

    def __init__(self, threads: int | None = None) -> None:
        self.threads = threads or len(usable_cpus())
        rng = np.random.default_rng(20240601)
        shape = (self.STACK, self.SIZE, self.SIZE)
        self._inputs = [
            (rng.standard_normal(shape).astype(np.float32) * 0.1,) * 2 for _ in range(self.threads)
        ]
        self._outputs = [np.empty(shape, np.float32) for _ in range(self.threads)]
        self._pool: ThreadPoolExecutor | None = None

    def describe(self) -> dict[str, Any]:
        """What makes two reference measurements comparable (recorded with a golden)."""
        return {
            "workload": f"matmul {self.STACK}x{self.SIZE}x{self.SIZE} float32 x{self.REPEAT}",
            "threads": self.threads,
            "numpy": np.__version__,
        }

    def _work(self, index: int) -> None:
        a, b = self._inputs[index]
        out = self._outputs[index]
        for _ in range(self.REPEAT):
            np.matmul(a, b, out=out)

    def round(self) -> None:
        """One round: all threads run their share; returns when the last is done."""
        if self._pool is None:
            self._work(0)
            return
        futures = [self._pool.submit(self._work, i) for i in range(1, self.threads)]
        self._work(0)  # the calling thread takes a share: one wake-up fewer per round
        for future in futures:
            future.result()

    def __enter__(self) -> ReferenceWorkload:
        if self.threads > 1:
            self._pool = ThreadPoolExecutor(self.threads - 1, thread_name_prefix="mlrepro-ref")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def measure(self) -> Measurement:
        """Time rounds of the workload with :attr:`RULE`."""
        return measure(self.round, self.RULE)
