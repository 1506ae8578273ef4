"""The timing core: statistics, the stopping rule, the noise-normalised verdict, contention.

Nothing here asserts on the wall-clock time of real work: the stopping rule runs on a fake clock,
and the verdicts on synthetic distributions.
"""

from __future__ import annotations

import gc
import statistics

import numpy as np
import pytest

from pytest_mlrepro.latency import _timing as timing
from pytest_mlrepro.latency._timing import (
    CpuTimes,
    ReferenceWorkload,
    StopRule,
    host_factor,
    judge,
    measure,
    measure_interleaved,
    other_load,
    parse_own_ticks,
    parse_proc_stat,
    sketch,
    summarize,
)

# --- statistics -------------------------------------------------------------------------------


def test_statistics_match_hand_computed_values() -> None:
    data = [5, 1, 9, 3, 7, 2, 100, 4, 8, 6]  # unsorted on purpose
    s = summarize(data)
    # numpy's linear quantiles over 1..9, 100: position q * 9 between order statistics
    assert s.rounds == 10 and s.min == 1 and s.max == 100 and s.total == 145
    assert s.q1 == pytest.approx(3.25) and s.p50 == pytest.approx(5.5)
    assert s.q3 == pytest.approx(7.75) and s.iqr == pytest.approx(4.5)
    assert s.p90 == pytest.approx(9 + 0.1 * 91) and s.p99 == pytest.approx(9 + 0.91 * 91)
    assert s.mean == pytest.approx(14.5)
    assert s.stddev == pytest.approx(statistics.stdev(data))
    # Tukey fences: 3.25 - 6.75 and 7.75 + 6.75 = 14.5: only 100 is outside
    assert s.iqr_outliers == 1 and s.ld15iqr == 1 and s.hd15iqr == 9
    assert s.stddev_outliers == 1  # |100 - 14.5| > 29.8; all others are within one stddev
    assert s.get("p50") == s.p50 and s.get("min") == 1
    with pytest.raises(ValueError, match="unknown statistic"):
        s.get("p95")


def test_statistics_agree_with_numpy_on_random_data() -> None:
    data = np.random.default_rng(7).lognormal(-5, 0.3, size=1001)
    s = summarize(data)
    assert s.p50 == pytest.approx(np.median(data))
    assert s.p90 == pytest.approx(np.percentile(data, 90))
    assert s.p99 == pytest.approx(np.percentile(data, 99))
    assert s.mean == pytest.approx(data.mean()) and s.stddev == pytest.approx(data.std(ddof=1))
    q1, q3 = np.percentile(data, [25, 75])
    assert s.iqr == pytest.approx(q3 - q1)
    outside = (data < q1 - 1.5 * (q3 - q1)) | (data > q3 + 1.5 * (q3 - q1))
    assert s.iqr_outliers == int(outside.sum())
    assert s.hd15iqr == pytest.approx(data[~outside].max())
    assert s.ld15iqr == pytest.approx(data[~outside].min())


def test_statistics_of_one_sample_and_of_none() -> None:
    s = summarize([0.25])
    assert s.rounds == 1 and s.stddev == 0 and s.min == s.max == s.p50 == s.p99 == 0.25
    assert s.iqr == 0 and s.iqr_outliers == 0
    with pytest.raises(ValueError):
        summarize([])


def test_sketch_keeps_small_samples_and_quantiles_of_large_ones() -> None:
    small = [3.0, 1.0, 2.0]
    assert sketch(small).tolist() == [1.0, 2.0, 3.0]
    data = np.random.default_rng(3).normal(10, 1, size=5000)
    kept = sketch(data, 100)
    assert kept.size == 100
    assert np.allclose(kept, np.quantile(data, (np.arange(100) + 0.5) / 100))
    assert np.median(kept) == pytest.approx(np.median(data), rel=1e-3)


# --- the stopping rule ------------------------------------------------------------------------


class FakeClock:
    """A nanosecond clock that only moves when the timed call runs: each call costs
    ``cost(n)`` ns, ``n`` counting calls from 0."""

    def __init__(self, cost: int | list[int]) -> None:
        self.now = 1_000_000
        self.calls = 0
        self.cost = cost

    def __call__(self) -> int:
        return self.now

    def call(self) -> None:
        cost = (
            self.cost
            if isinstance(self.cost, int)
            else self.cost[min(self.calls, len(self.cost) - 1)]
        )
        self.now += cost
        self.calls += 1


def test_rounds_stop_at_min_rounds_when_min_time_is_already_reached() -> None:
    clock = FakeClock(1000)
    rule = StopRule(min_rounds=10, min_time=0, max_time=1, warmup_rounds=3, warmup_time=0)
    m = measure(clock.call, rule, clock=clock)
    assert m.samples_ns.size == 10 and m.samples_ns.tolist() == [1000] * 10
    assert m.warmup_rounds == 3 and clock.calls == 13
    assert m.stopped_by == "min_rounds_and_time"


def test_rounds_continue_until_min_time_when_min_rounds_come_first() -> None:
    clock = FakeClock(1000)
    rule = StopRule(min_rounds=2, min_time=10e-6, max_time=1, warmup_rounds=0, warmup_time=0)
    m = measure(clock.call, rule, clock=clock)
    assert m.samples_ns.size == 10  # 10 × 1 µs reaches the 10 µs minimum
    assert m.warmup_rounds == 0


def test_max_time_caps_rounds_and_says_so() -> None:
    clock = FakeClock(1000)
    rule = StopRule(min_rounds=1000, min_time=0, max_time=5e-6, warmup_rounds=0, warmup_time=0)
    m = measure(clock.call, rule, clock=clock)
    assert m.samples_ns.size == 5 and m.stopped_by == "max_time"


def test_warmup_is_excluded_and_runs_until_both_its_rounds_and_time() -> None:
    # The first calls are slow (a cold cache, a JIT): none of them may be in the samples.
    clock = FakeClock([50_000] * 4 + [1000])
    rule = StopRule(min_rounds=5, min_time=0, max_time=1, warmup_rounds=2, warmup_time=150e-6)
    m = measure(clock.call, rule, clock=clock)
    # warm-up: 2 rounds reach only 100 µs, a third reaches 150 µs
    assert m.warmup_rounds == 3 and m.warmup_ns == 150_000
    assert m.samples_ns.tolist() == [50_000] + [1000] * 4  # the 4th slow call was not warm-up
    clock = FakeClock([50_000] * 3 + [1000])
    m = measure(clock.call, rule, clock=clock)
    assert m.samples_ns.tolist() == [1000] * 5


def test_garbage_collector_is_paused_while_timing_and_restored() -> None:
    seen: list[bool] = []
    clock = FakeClock(1000)

    def call() -> None:
        seen.append(gc.isenabled())
        clock.call()

    rule = StopRule(min_rounds=4, min_time=0, max_time=1, warmup_rounds=2, warmup_time=0)
    assert gc.isenabled()
    measure(call, rule, clock=clock)
    assert seen == [True, True, False, False, False, False] and gc.isenabled()


def test_stop_rule_rejects_impossible_settings() -> None:
    with pytest.raises(ValueError):
        StopRule(min_rounds=0)
    with pytest.raises(ValueError):
        StopRule(min_time=5, max_time=1)
    with pytest.raises(ValueError):
        StopRule(max_time=0)


# --- the host factor and the verdict ----------------------------------------------------------


def dist(median: float, n: int, seed: int, spread: float = 0.05) -> np.ndarray:
    return np.random.default_rng(seed).lognormal(np.log(median), spread, size=n)


GOLDEN = dist(0.010, 300, 1)
GOLDEN_BLOCKS = dist(0.002, 18, 2, 0.02)  # block medians: the reference at recording


def host(factor: float, seed: int = 12, n: int = 18, spread: float = 0.02) -> timing.HostFactor:
    """The host factor of reference blocks running ``factor`` times slower than GOLDEN_BLOCKS."""
    return host_factor(dist(0.002 * factor, n, seed, spread), GOLDEN_BLOCKS)


def test_host_factor_is_the_ratio_of_block_medians_with_bounds_from_both_sides() -> None:
    h = host(1.2)
    assert h.value == pytest.approx(1.2, rel=0.03) and h.low < h.value < h.high
    assert (h.blocks_now, h.blocks_golden) == (18, 18)
    # The same factor from a recording whose reference swung (a lucky block): wide bounds.
    swung = host_factor(dist(0.0024, 18, 12, 0.02), [0.0124, 0.0078, 0.0024])
    assert swung.high / swung.low > 3 * (h.high / h.low)


def test_host_factor_borrows_a_spread_for_a_single_block_and_refuses_nonsense() -> None:
    one = host_factor([0.002], dist(0.002, 18, 2, 0.02))
    many = host_factor(dist(0.002, 18, 3, 0.02), dist(0.002, 18, 2, 0.02))
    assert one.log_se > many.log_se  # one block on a side is weaker evidence
    prior = host_factor([0.002], [0.002])
    assert prior.log_se == pytest.approx(timing.HOST_SPREAD_PRIOR * np.sqrt(2))
    with pytest.raises(ValueError):
        host_factor([], [0.002])
    with pytest.raises(ValueError):
        host_factor([0.0], [0.002])


def test_unchanged_model_on_an_unchanged_machine_passes() -> None:
    j = judge(dist(0.010, 300, 11), GOLDEN, "p50", 1.25, host=host(1.0))
    assert j.outcome == "pass"
    assert j.ratio.value == pytest.approx(1.0, abs=0.03)
    assert j.normalised is not None and j.normalised.value == pytest.approx(1.0, abs=0.05)
    assert j.ratio.low < j.ratio.value < j.ratio.high


def test_real_slowdown_is_a_regression_both_ways() -> None:
    j = judge(dist(0.018, 300, 11), GOLDEN, "p50", 1.25, host=host(1.0))
    assert j.outcome == "regression"
    assert j.ratio.low > 1.25 and j.normalised is not None and j.normalised.low > 1.25
    assert j.golden == pytest.approx(np.median(GOLDEN), rel=1e-2)
    assert j.now / j.golden == j.ratio.value


def test_a_slower_host_is_not_a_regression() -> None:
    # The case: the host runs everything 1.27 times slower; the model, ×1.33 absolute.
    j = judge(dist(0.0133, 300, 11), GOLDEN, "p50", 1.25, host=host(1.27))
    assert j.ratio.low > 1.25  # the absolute ratio alone would fail
    assert j.outcome == "pass"
    assert j.normalised is not None and j.normalised.high < 1.25
    assert j.ratio.value / j.normalised.value == pytest.approx(1.27, rel=0.03)


def test_a_slowdown_on_a_slower_host_is_still_a_regression() -> None:
    # threads 2 -> 1 (×1.8) on a host 1.2 times slower: ×2.16 absolute, ×1.8 normalised.
    j = judge(dist(0.0216, 300, 11), GOLDEN, "p50", 1.25, host=host(1.2))
    assert j.outcome == "regression" and j.normalised is not None
    assert j.normalised.value == pytest.approx(1.8, rel=0.05)


def test_a_lucky_reference_cannot_excuse_a_slowdown() -> None:
    # The recording's reference swung between 12.4 and 7.8 ms; today it runs at the lucky 12.4
    # ms while the model really got 1.8 times slower. Its normalised ratio looks like ×1.4, but
    # the recording's spread bounds the host factor so loosely that nothing is excused: not a
    # pass, and not a regression declared on a coin toss either.
    swung = host_factor(dist(0.0124, 18, 12, 0.02), [0.0124, 0.0078])
    j = judge(dist(0.018, 300, 11), GOLDEN, "p50", 1.25, host=swung)
    assert j.ratio.low > 1.25 and j.normalised is not None
    assert j.normalised.low < 1.25 < j.normalised.high
    assert j.outcome == "inconclusive"
    # The same measurement against a steady recording: the host factor is tight, and the
    # normalised ratio says what it is.
    steady = host_factor(dist(0.0124, 18, 12, 0.02), dist(0.0101, 18, 2, 0.02))
    assert judge(dist(0.018, 300, 11), GOLDEN, "p50", 1.25, host=steady).outcome == "regression"


def test_a_host_factor_that_may_not_excuse_makes_a_slower_host_inconclusive() -> None:
    # The golden's reference ran under another numpy: a slower host and slower software look
    # alike, so the normalised ratio may convict but never acquit.
    j = judge(dist(0.0133, 300, 11), GOLDEN, "p50", 1.25, host=host(1.27), host_may_excuse=False)
    assert j.outcome == "inconclusive"
    j = judge(dist(0.0216, 300, 11), GOLDEN, "p50", 1.25, host=host(1.2), host_may_excuse=False)
    assert j.outcome == "regression"


def test_a_fast_reference_alone_is_not_a_regression() -> None:
    j = judge(dist(0.010, 300, 11), GOLDEN, "p50", 1.25, host=host(0.5))
    assert j.normalised is not None and j.normalised.low > 1.25  # normalised alone would fail
    assert j.outcome == "pass"


def test_faster_is_reported_as_faster() -> None:
    j = judge(dist(0.005, 300, 11), GOLDEN, "p50", 1.25, host=host(1.0))
    assert j.outcome == "faster" and j.ratio.high < 0.8


def test_without_a_host_factor_the_absolute_ratio_decides() -> None:
    j = judge(dist(0.018, 300, 11), GOLDEN, "p50", 1.25)
    assert j.normalised is None and j.outcome == "regression"
    j = judge(dist(0.0133, 300, 11), GOLDEN, "p50", 1.25)
    assert j.outcome == "regression"


def test_a_ratio_beyond_tolerance_from_few_noisy_rounds_is_not_a_regression() -> None:
    golden = np.array([10, 10, 10, 30, 30]) * 1e-3
    noisy = np.array([13, 13, 13, 5, 40]) * 1e-3  # p50 ×1.3, but all over the place
    j = judge(noisy, golden, "p50", 1.25)
    assert j.ratio.value == pytest.approx(1.3) and j.ratio.low < 1.25 and j.outcome == "pass"
    # The same ×1.3 measured tightly over many rounds is one.
    j = judge(dist(0.013, 300, 5, 0.01), dist(0.010, 300, 6, 0.01), "p50", 1.25)
    assert j.ratio.value == pytest.approx(1.3, abs=0.01) and j.outcome == "regression"


def test_tail_statistic_sees_a_tail_regression_the_median_does_not() -> None:
    now = dist(0.010, 400, 21)
    now[np.argsort(now)[-20:]] *= 4  # the slowest 5% got 4× slower
    golden = dist(0.010, 400, 22)
    assert judge(now, golden, "p50", 1.25).outcome == "pass"
    assert judge(now, golden, "p99", 1.25).outcome == "regression"


def test_verdict_is_a_pure_function_of_the_data() -> None:
    now = dist(0.0126, 50, 31, 0.2)
    a = judge(now, GOLDEN, "p90", 1.2, host=host(1.1))
    b = judge(now, GOLDEN, "p90", 1.2, host=host(1.1))
    assert a == b


def test_judge_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="tolerance"):
        judge(GOLDEN, GOLDEN, "p50", 0.9)
    with pytest.raises(ValueError, match="unknown statistic"):
        judge(GOLDEN, GOLDEN, "median", 1.2)
    with pytest.raises(ValueError, match="no samples"):
        judge([], GOLDEN, "p50", 1.2)


# --- contention -------------------------------------------------------------------------------

PROC_STAT = """\
cpu  300 0 150 1200 20 0 0 10 0 0
cpu0 100 0 50 400 10 0 0 10 0 0
cpu1 150 5 50 300 5 1 1 0 7 0
cpu2 50 0 50 500 5 0 0 0 0 0
intr 12345 0 0
ctxt 999
"""


def test_proc_stat_sums_the_usable_cpus_and_counts_steal_as_busy() -> None:
    busy, total = parse_proc_stat(PROC_STAT, [0, 1])
    # cpu0: total 570, idle+iowait 410; cpu1: total 512 (guest 7 is inside user), idle 305
    assert total == 570 + 512
    assert busy == (570 - 410) + (512 - 305)
    assert parse_proc_stat(PROC_STAT, [2]) == (100, 605)
    assert parse_proc_stat(PROC_STAT, [7]) == (0, 0)


def test_own_ticks_survive_a_process_name_with_spaces_and_parentheses() -> None:
    fields = " ".join(str(i) for i in range(3, 30))  # field n holds the value n
    assert parse_own_ticks(f"4242 (py (x) thon) S {fields[2:]}") == 14 + 15


def test_other_load_is_what_others_used_of_the_cpus() -> None:
    before = CpuTimes(busy=1000, total=4000, own=300)
    # 200 ticks of capacity passed (2 CPUs × 100); 150 were busy, 50 of them ours.
    assert other_load(before, CpuTimes(busy=1150, total=4200, own=350)) == pytest.approx(0.5)
    assert other_load(before, CpuTimes(busy=1050, total=4200, own=360)) == 0.0  # clipped
    assert other_load(before, CpuTimes(busy=1000, total=4000, own=300)) is None
    assert other_load(None, before) is None


def test_real_cpu_times_count_this_process() -> None:
    if timing.cpu_times() is None:
        pytest.skip("no /proc here")
    before = timing.cpu_times()
    x = 0
    while timing.cpu_times().own - before.own < 5:  # type: ignore[union-attr]
        x += 1
    after = timing.cpu_times()
    assert after is not None and before is not None and after.own >= before.own + 5
    load = other_load(before, after)
    assert load is not None and 0.0 <= load <= 1.0


# --- the reference workload -------------------------------------------------------------------


def test_reference_workload_runs_on_every_usable_cpu_and_computes_its_product() -> None:
    with ReferenceWorkload() as ref:
        assert ref.threads == len(timing.usable_cpus())
        ref.round()
        for (a, b), out in zip(ref._inputs, ref._outputs):
            np.testing.assert_allclose(out, np.matmul(a, b), rtol=1e-5)
        described = ref.describe()
        assert described["threads"] == ref.threads and "matmul" in described["workload"]
    with ReferenceWorkload(threads=1) as single:
        assert single.describe()["threads"] == 1
        single.round()


def test_interleaving_puts_a_reference_block_before_each_slice_and_after_the_last() -> None:
    clock = FakeClock(1000)
    order: list[str] = []

    def model() -> None:
        order.append("m")
        clock.call()

    def reference() -> None:
        order.append("r")
        clock.call()

    rule = StopRule(min_rounds=10, min_time=0, max_time=1, warmup_rounds=2, warmup_time=0)
    m, blocks = measure_interleaved(model, rule, reference, slices=4, block_rounds=3, clock=clock)
    # warm-up (2 model rounds, 1 reference round), then 4 × (3 reference, 3 model), 3 reference
    timed = "".join(order[3:])
    assert "".join(order[:3]) == "mmr"
    assert timed == "rrrmmm" * 4 + "rrr"
    assert m.samples_ns.size == 12  # ceil(10 / 4) per slice: min_rounds holds over the slices
    assert len(blocks) == 5 and all(b.size == 3 for b in blocks)
    assert m.warmup_rounds == 2
