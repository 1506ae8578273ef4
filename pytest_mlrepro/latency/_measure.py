"""Latency of a manifest's model: what is timed, and the verdict."""

from __future__ import annotations

import dataclasses
import datetime
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..data import ResolvedDataset
from ..errors import SampleError
from ..fingerprint import HardwareKey
from ..goldens import LatencyBaseline as Baseline
from ..goldens import require_finite, softmax, top_k
from ..manifest import Latency, Manifest
from ..runners import Runner, load_runner
from ..settings import Settings
from ._decisions import DecisionFacts
from ._timing import (
    HostFactor,
    Judgement,
    Measurement,
    ReferenceWorkload,
    StopRule,
    cpu_times,
    host_factor,
    judge,
    measure_interleaved,
    ms,
    other_load,
    sketch,
    summarize,
)

Verdict = Literal["pass", "regression", "faster", "contended", "inconclusive"]


# --- what is timed ----------------------------------------------------------------------------


@dataclass
class Prepared:
    """A loaded model and the callables to time, one per declared measurement."""

    calls: dict[str, Callable[[], object]]
    runner: Runner
    model_input: np.ndarray  # the prepared batch (the operator profile's input)


def _request(dataset: ResolvedDataset, batch: int) -> list[tuple[str, bytes]]:
    """The first ``batch`` samples, repeated when there are fewer; read before timing, since
    storage is not the model's latency."""
    if not dataset.samples:
        raise SampleError("-", "the data set has no samples to time a request with")
    picked = [dataset.samples[i % len(dataset.samples)] for i in range(batch)]
    request = []
    for sample in picked:
        try:
            request.append((sample.id, sample.path.read_bytes()))
        except OSError as exc:
            raise SampleError(sample.id, f"cannot read {sample.path}: {exc.strerror}") from None
    return request


def prepare(
    manifest: Manifest,
    device: str,
    batch: int,
    settings: Settings,
    dataset: ResolvedDataset,
    measurements: Sequence[str],
) -> Prepared:
    runner = load_runner(manifest, device, settings)
    request = _request(dataset, batch)
    pipe = manifest.pipeline
    prepared_input = np.stack([pipe(data, sample) for sample, data in request])
    runner.check_batch(prepared_input, manifest.input.layout)
    # Fails early, with the runner's message, on a signature mismatch; and on NaN/Inf outputs,
    # which the end-to-end measurement's top-k would otherwise rank (it refuses them mid-timing).
    require_finite(np.asarray(runner(prepared_input)), [sample for sample, _ in request])
    calls: dict[str, Callable[[], object]] = {}
    if "model" in measurements:
        model_call = getattr(runner, "model_call", None)
        calls["model"] = (
            model_call(prepared_input) if model_call is not None else lambda: runner(prepared_input)
        )
    if "end_to_end" in measurements:
        post = manifest.postprocess

        def end_to_end() -> None:
            batch_input = np.stack([pipe(data, sample) for sample, data in request])
            out = np.asarray(runner(batch_input))
            scores = softmax(out) if post.softmax else out
            top_k(scores, post.top_k)

        calls["end_to_end"] = end_to_end
    return Prepared(calls, runner, prepared_input)


@dataclass(frozen=True)
class Attempt:
    """One pass over the measurements, each timed in slices between reference blocks."""

    measurements: dict[str, Measurement]
    reference_blocks: tuple[np.ndarray, ...]  # seconds per round, in time order
    reference: dict[str, Any]  # ReferenceWorkload.describe()
    contention: float | None  # other processes' share of the usable CPUs, 0..1
    started: float
    finished: float

    @property
    def block_medians(self) -> np.ndarray:
        """One observation of the host's speed per block (seconds)."""
        return np.asarray([float(np.median(b)) for b in self.reference_blocks])

    @property
    def reference_drift(self) -> float:
        """Slowest / fastest block median: far from 1 when the machine changed meanwhile."""
        medians = self.block_medians
        return float(medians.max() / medians.min())


def measure_attempt(
    calls: Mapping[str, Callable[[], object]], rule: StopRule, reference: ReferenceWorkload
) -> Attempt:
    """Each measurement interleaved with reference blocks; CPU usage read around it all."""
    before = cpu_times()
    measured: dict[str, Measurement] = {}
    blocks: list[np.ndarray] = []
    for name, call in calls.items():
        measured[name], some = measure_interleaved(call, rule, reference.round)
        blocks += some
    after = cpu_times()
    return Attempt(
        measurements=measured,
        reference_blocks=tuple(blocks),
        reference=reference.describe(),
        contention=other_load(before, after),
        started=min(m.started for m in measured.values()),
        finished=max(m.finished for m in measured.values()),
    )


# --- the golden store -------------------------------------------------------------------------


def _distribution_json(measurement: Measurement) -> dict[str, Any]:
    stats = dataclasses.asdict(summarize(measurement.seconds))
    return {
        # Times in milliseconds (6 significant digits), counts as they are.
        "stats": {k: v if isinstance(v, int) else ms(v) for k, v in stats.items()},
        "samples_ms": [ms(v) for v in sketch(measurement.seconds)],
        "stopped_by": measurement.stopped_by,
        "warmup_rounds": measurement.warmup_rounds,
    }


def entry_for(
    attempt: Attempt, settings_now: dict[str, Any], block: Latency, batch: int
) -> dict[str, Any]:
    first = next(iter(attempt.measurements.values()))
    pooled = dataclasses.replace(
        first, samples_ns=np.round(np.concatenate(attempt.reference_blocks) * 1e9).astype(np.int64)
    )
    reference = {
        **_distribution_json(pooled),
        # The host's speed block by block: the spread that bounds "this host is ×F slower".
        "blocks_ms": [ms(v) for v in attempt.block_medians],
        "workload": attempt.reference,
    }
    return {
        "batch": batch,
        "recorded": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "settings": settings_now,
        "latency": dataclasses.asdict(block),
        "contention": None if attempt.contention is None else round(attempt.contention, 3),
        "reference": reference,
        "measurements": {name: _distribution_json(m) for name, m in attempt.measurements.items()},
    }


# --- verdicts ---------------------------------------------------------------------------------


def settings_of(runner_info: Mapping[str, Any]) -> dict[str, Any]:
    """What a latency depends on beyond the hardware: recorded with a golden, diffed later."""
    keep = (
        "framework_version",
        "intra_op_threads",
        "inter_op_threads",
        "graph_optimization_level",
        "providers",
        "format",
        "deterministic_algorithms",
        "deterministic_compute",
        "cudnn_deterministic",
        "cudnn_allow_tf32",
        "matmul_allow_tf32",
    )
    # The requested thread counts are in the key; these are what the framework reports. Plain
    # JSON values only (torch's version is a str subclass that xdist cannot send).
    kept = {k: runner_info[k] for k in keep if k in runner_info}
    return dict(json.loads(json.dumps(kept, default=str)))


def changed_settings(
    baseline: Baseline, key: HardwareKey, settings_now: Mapping[str, Any]
) -> dict[str, tuple[Any, Any]]:
    """``{name: (golden, now)}`` for the key fields and the settings that differ."""
    changes = dict(key.differences(baseline.key))
    for name in sorted(set(baseline.settings) | set(settings_now)):
        old, new = baseline.settings.get(name), settings_now.get(name)
        if old != new and name not in changes:
            changes[name] = (old, new)
    return changes


@dataclass(frozen=True)
class Assessment:
    """One attempt judged against a baseline."""

    attempt: Attempt
    judgements: dict[str, tuple[Judgement, ...]]
    verdict: Verdict
    missing: tuple[str, ...]  # measurements the baseline does not have
    normalised: bool  # whether the reference made the normalised ratio possible
    host: HostFactor | None = None  # reference now / at recording, with its bounds
    host_may_excuse: bool = True  # False: the golden's reference ran under other software


def reference_comparison(attempt: Attempt, baseline: Baseline) -> tuple[HostFactor | None, bool]:
    """The host factor of ``attempt`` against ``baseline`` and whether it may excuse a slowdown."""
    now, then = attempt.reference, baseline.reference
    same_work = all(now.get(k) == then.get(k) for k in ("workload", "threads", "method"))
    if not same_work or not baseline.reference_blocks.size:
        return None, False
    host = host_factor(attempt.block_medians, baseline.reference_blocks)
    return host, now == then


def assess(
    attempt: Attempt,
    baseline: Baseline,
    tolerance: Mapping[str, float],
    max_contention: float,
) -> Assessment:
    """Judge each measurement on each tolerated statistic, normalised by the host factor."""
    host, may_excuse = reference_comparison(attempt, baseline)
    judgements: dict[str, tuple[Judgement, ...]] = {}
    missing = []
    for name, measured in attempt.measurements.items():
        golden = baseline.measurements.get(name)
        if golden is None:
            missing.append(name)
            continue
        now_stats = summarize(measured.seconds)
        judgements[name] = tuple(
            judge(
                measured.seconds,
                golden.samples,
                statistic,
                ratio,
                host=host,
                host_may_excuse=may_excuse,
                now_value=now_stats.get(statistic),
                golden_value=golden.get(statistic),
            )
            for statistic, ratio in tolerance.items()
        )
    every = [j for js in judgements.values() for j in js]
    contended = attempt.contention is not None and attempt.contention > max_contention
    slower = any(j.ratio.low > j.tolerance for j in every)
    outcomes = {j.outcome for j in every}
    verdict: Verdict = (
        "contended" if slower and contended
        else "regression" if "regression" in outcomes
        else "inconclusive" if "inconclusive" in outcomes
        else "faster" if outcomes == {"faster"}
        else "pass"
    )  # fmt: skip
    return Assessment(
        attempt, judgements, verdict, tuple(missing), host is not None, host, may_excuse
    )


def conclude(assessments: Sequence[Assessment]) -> Assessment:
    """First pass (or faster) wins; else a regression shown uncontended with none inconclusive
    (the smallest slowdown reported); else the inconclusive closest to a pass; else contended."""
    for a in assessments:
        if a.verdict in ("pass", "faster"):
            return a
    for verdict in ("inconclusive", "regression"):
        pool = [a for a in assessments if a.verdict == verdict]
        if pool:
            return min(pool, key=_worst_ratio)
    return min(assessments, key=_worst_ratio)


def decision_facts(assessment: Assessment, max_contention: float) -> DecisionFacts:
    return DecisionFacts(
        verdict=assessment.verdict,
        judgements=tuple((n, j) for n, js in assessment.judgements.items() for j in js),
        reference_comparable=assessment.normalised,
        contention=assessment.attempt.contention,
        max_contention=max_contention,
        host=assessment.host,
        host_may_excuse=assessment.host_may_excuse,
    )


def _worst_ratio(a: Assessment) -> float:
    values = [
        (j.normalised or j.ratio).value / j.tolerance for js in a.judgements.values() for j in js
    ]
    return max(values, default=0.0)
