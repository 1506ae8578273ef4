"""Latency measurement: the timing loop, its statistics, and verdicts that survive a noisy
machine."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Literal

import numpy as np

from ..fingerprint import usable_cpus
from ..manifest import STATISTICS

SKETCH_SIZE = 256
"""Samples kept per distribution in a golden and resampled by the bootstrap (:func:`sketch`)."""

Outcome = Literal["pass", "regression", "faster", "inconclusive"]


# --- the measurement loop ---------------------------------------------------------------------


@dataclass(frozen=True)
class StopRule:
    """When a measurement stops. Times in seconds."""

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
    """Time ``call`` until ``min_rounds`` and ``min_ns`` are both reached, or ``max_ns`` passed."""
    times: list[int] = []
    start = clock()
    enough_time, cap = start + min_ns, start + max_ns
    while True:
        t0 = clock()
        call()
        t1 = clock()
        times.append(t1 - t0)
        if len(times) >= min_rounds and t1 >= enough_time:
            return times, False
        if t1 >= cap:
            return times, True


def measure(
    call: Callable[[], object], rule: StopRule, *, clock: Callable[[], int] = time.perf_counter_ns
) -> Measurement:
    """Warm ``call`` up, then time it round by round under ``rule`` (no reference blocks)."""
    return measure_interleaved(call, rule, None, slices=1, clock=clock)[0]


INTERLEAVE_SLICES = 8
"""Slices a measurement's timed rounds are cut into, with a reference block before each and one
after the last: the reference then samples the machine over the whole measurement, not only
before and after it (a minute-long measurement outlasts a noisy neighbour's burst)."""

REFERENCE_BLOCK_ROUNDS = 4
"""Reference rounds per block; a block's median is one observation of the host's speed."""


def measure_interleaved(
    call: Callable[[], object],
    rule: StopRule,
    reference_round: Callable[[], object] | None,
    *,
    slices: int = INTERLEAVE_SLICES,
    block_rounds: int = REFERENCE_BLOCK_ROUNDS,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> tuple[Measurement, list[np.ndarray]]:
    """Time ``call`` in ``slices`` slices, a block of reference rounds before each and after the
    last, so that a host slowing down mid-run shows in the reference."""
    was_enabled = gc.isenabled()
    per_rounds = -(-rule.min_rounds // slices)  # ceil: min_rounds holds over the slices
    per_min, per_max = int(rule.min_time * 1e9 / slices), int(rule.max_time * 1e9 / slices)
    blocks: list[np.ndarray] = []
    samples: list[int] = []
    capped = False

    def block() -> None:
        if reference_round is not None:
            times, _ = _rounds(reference_round, block_rounds, 0, per_max, clock)
            blocks.append(np.asarray(times, dtype=np.float64) * 1e-9)

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
        if reference_round is not None:  # its first round pays for thread starts: not counted
            reference_round()
        warmup_ns = clock() - warm_start
        gc.collect()
        gc.disable()
        started = time.time()
        for _ in range(slices):
            block()
            times, cut = _rounds(call, per_rounds, per_min, per_max, clock)
            samples.extend(times)
            capped = capped or cut
        block()
        finished = time.time()
    finally:
        if was_enabled:
            gc.enable()
    measurement = Measurement(
        samples_ns=np.asarray(samples, dtype=np.int64),
        stopped_by="max_time" if capped else "min_rounds_and_time",
        warmup_rounds=warm,
        warmup_ns=warmup_ns,
        started=started,
        finished=finished,
    )
    return measurement, blocks


# --- statistics -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stats:
    """Summary of a latency distribution, in seconds (``rounds`` and outlier counts: integers)."""

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


def ms(seconds: float) -> float:
    """Seconds to milliseconds, 6 significant digits (what goldens and reports keep)."""
    return float(f"{seconds * 1e3:.6g}")


def sketch(samples: Sequence[float] | np.ndarray, size: int = SKETCH_SIZE) -> np.ndarray:
    """At most ``size`` values: the sorted samples, or quantiles at ``(i + 0.5) / size``."""
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
    """now / golden, with a one-sided bound on each side at the given confidence."""

    value: float
    low: float
    high: float


HOST_SPREAD_PRIOR = 0.10
"""The spread (standard deviation of the log) assumed for reference blocks when neither side has
two blocks to measure it with: the swing of the reference's p50 between two measurements a minute
apart on an idle 2-core VM here (docs/latency.md)."""

HOST_SPREAD_FLOOR = 0.01
"""The least spread a side's blocks are credited with: eight blocks that agree to 0.1% say little
about the next minute."""


@dataclass(frozen=True)
class HostFactor:
    """Reference now / reference at recording (> 1: slower now), with one-sided bounds."""

    value: float
    low: float
    high: float
    log_se: float  # standard error of log(value)
    blocks_now: int
    blocks_golden: int


def host_factor(
    now_blocks: Sequence[float] | np.ndarray,
    golden_blocks: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
) -> HostFactor:
    """The host factor from block medians (seconds) of now and of the recording."""
    now_raw = np.asarray(now_blocks, dtype=np.float64)
    golden_raw = np.asarray(golden_blocks, dtype=np.float64)
    sides = (now_raw, golden_raw)
    if any(v.size == 0 or not np.all(np.isfinite(v)) or np.any(v <= 0) for v in sides):
        raise ValueError("host_factor needs finite, positive blocks on both sides")
    now_log, golden_log = logs = np.log(now_raw), np.log(golden_raw)
    # A side with one block takes the other side's spread; with none on either, the prior.
    spreads = [float(np.std(v, ddof=1)) if v.size >= 2 else None for v in logs]
    known = next((s for s in spreads if s is not None), HOST_SPREAD_PRIOR)
    floored = [max(HOST_SPREAD_FLOOR, known if s is None else s) for s in spreads]
    variance = sum(
        s * s * (np.pi / 2 if v.size >= 3 else 1.0) / v.size
        for s, v in zip(floored, logs, strict=True)
    )
    log_f = float(np.median(now_log) - np.median(golden_log))
    se = float(np.sqrt(variance))
    z = NormalDist().inv_cdf(confidence)  # one-sided: 0.95 gives 1.645
    return HostFactor(
        float(np.exp(log_f)),
        float(np.exp(log_f - z * se)),
        float(np.exp(log_f + z * se)),
        se,
        int(now_log.size),
        int(golden_log.size),
    )


@dataclass(frozen=True)
class Judgement:
    """One statistic of one measurement compared with its golden."""

    statistic: str
    tolerance: float
    golden: float  # seconds
    now: float  # seconds
    ratio: Ratio  # absolute: now / golden
    normalised: Ratio | None  # (now / golden) / host factor
    outcome: Outcome
    host: HostFactor | None = None


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
    host: HostFactor | None = None,
    host_may_excuse: bool = True,
    now_value: float | None = None,
    golden_value: float | None = None,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Judgement:
    """Compare latency samples ``now`` with ``golden`` (seconds) on ``statistic``."""
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
    if host is not None:
        factors = np.exp(np.log(host.value) + host.log_se * rng.standard_normal(resamples))
        normalised = Ratio(
            ratio.value / host.value,
            *map(float, np.percentile(boot / factors, [tail, 100 - tail])),
        )
    outcome: Outcome = "pass"
    if ratio.low > tolerance:
        if normalised is None or normalised.low > tolerance:
            outcome = "regression"
        elif normalised.high > tolerance or not host_may_excuse:
            outcome = "inconclusive"
    elif ratio.high < 1.0 / tolerance and (normalised is None or normalised.high < 1.0 / tolerance):
        outcome = "faster"
    return Judgement(statistic, tolerance, golden_v, now_v, ratio, normalised, outcome, host)


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
    """The fraction (0-1) of the usable CPUs' capacity others took between two snapshots; None
    when unknown."""
    if before is None or after is None:
        return None
    total = after.total - before.total
    if total <= 0:
        return None
    others = (after.busy - before.busy) - (after.own - before.own)
    return min(1.0, max(0.0, others / total))


# --- the reference workload -------------------------------------------------------------------


class ReferenceWorkload:
    """A fixed kernel on every usable core at once: how fast the machine is right now."""

    SIZE = 48
    STACK = 16
    # About 6 ms per round on an idle core: long enough to average over scheduler time slices
    # like a model call does (1.6 ms rounds swung ×1.4 between measurements on a loaded 2-core
    # machine, 10 ms rounds ×1.1).
    REPEAT = 128

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
            # How it was timed: blocks between a model's rounds run beside the runtime's
            # spinning worker threads (ONNX Runtime's: about ×2 on 2 cores, measured), so only
            # references timed the same way compare.
            "method": f"interleaved {INTERLEAVE_SLICES}x{REFERENCE_BLOCK_ROUNDS}",
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
