"""Latency of a manifest's model: what is timed, and the verdict.

No pytest here (the items in ``plugin/_latency.py`` are thin). One measurement *attempt* times, in
this order: the reference workload, each declared measurement, the reference workload again, with
``/proc/stat`` read around it all (how much of the CPUs other processes took meanwhile). An
attempt is judged against a baseline golden (:func:`assess`); a regression must hold in every
attempt (:func:`conclude`).

The goldens it is judged against live in the golden store
(:mod:`pytest_mlrepro.goldens._latency_store`).
"""

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
    Judgement,
    Measurement,
    ReferenceWorkload,
    StopRule,
    cpu_times,
    judge,
    measure,
    other_load,
    sketch,
    summarize,
)

Verdict = Literal["pass", "regression", "faster", "contended"]


# --- what is timed ----------------------------------------------------------------------------


@dataclass
class Prepared:
    """A loaded model and the callables to time, one per declared measurement."""

    calls: dict[str, Callable[[], object]]
    runner_info: dict[str, Any]
    runner: Runner
    model_input: np.ndarray | None = None  # the prepared batch (the operator profile's input)


def _request(dataset: ResolvedDataset, batch: int) -> list[tuple[str, bytes]]:
    """The encoded images of one request: the first ``batch`` samples, repeated when the data
    set has fewer. Read once, before timing: storage is not the model's latency."""
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
    """Load the model and build the timed callables.

    ``model``: the runner's ``model_call`` (the framework call on an input prepared once, on the
    device, synchronised), or a plain runner call for runners without one. ``end_to_end``: one
    request, from the encoded images in memory through decode and preprocessing, the model (with
    its host copies) and softmax/top-k."""
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
    return Prepared(
        calls=calls, runner_info=dict(runner.info), runner=runner, model_input=prepared_input
    )


@dataclass(frozen=True)
class Attempt:
    """One pass over the measurements, between two reference measurements."""

    measurements: dict[str, Measurement]
    reference_before: Measurement
    reference_after: Measurement
    reference: dict[str, Any]  # ReferenceWorkload.describe()
    contention: float | None  # other processes' share of the usable CPUs, 0..1
    started: float
    finished: float

    @property
    def reference_seconds(self) -> np.ndarray:
        return np.concatenate([self.reference_before.seconds, self.reference_after.seconds])

    @property
    def reference_drift(self) -> float:
        """p50 of the reference after / before: far from 1 when the machine changed meanwhile."""
        return float(
            np.median(self.reference_after.seconds) / np.median(self.reference_before.seconds)
        )


def measure_attempt(
    calls: Mapping[str, Callable[[], object]], rule: StopRule, reference: ReferenceWorkload
) -> Attempt:
    """Reference, each measurement, reference; CPU usage read around it all."""
    before = cpu_times()
    ref_before = reference.measure()
    measured = {name: measure(call, rule) for name, call in calls.items()}
    ref_after = reference.measure()
    after = cpu_times()
    return Attempt(
        measurements=measured,
        reference_before=ref_before,
        reference_after=ref_after,
        reference=reference.describe(),
        contention=other_load(before, after),
        started=ref_before.started,
        finished=ref_after.finished,
    )


# --- the golden store -------------------------------------------------------------------------


def ms(seconds: float) -> float:
    """Seconds to milliseconds, 6 significant digits (what goldens and reports keep)."""
    return float(f"{seconds * 1e3:.6g}")


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
    """The golden entry for one batch size from an attempt."""
    reference = {
        **_distribution_json(
            dataclasses.replace(
                attempt.reference_before,
                samples_ns=np.concatenate(
                    [attempt.reference_before.samples_ns, attempt.reference_after.samples_ns]
                ),
            )
        ),
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


IDLE_CONTENTION = 0.05
"""Share of the CPUs other processes may use while the machine still counts as idle."""


def assess(
    attempt: Attempt,
    baseline: Baseline,
    tolerance: Mapping[str, float],
    max_contention: float,
) -> Assessment:
    """Judge each measurement on each tolerated statistic (see :func:`timing.judge`).

    The attempt is a regression when any judgement is. When other processes took more than
    ``max_contention`` of the CPUs meanwhile, neither the absolute nor the normalised ratio can
    be trusted (the reference and the model suffer from a busy machine differently): an attempt
    whose absolute ratio alone exceeds the tolerance is then ``contended``, not judged either
    way. When they took at most ``IDLE_CONTENTION``, the absolute ratio alone decides (the
    reference cannot excuse a slowdown on an idle machine), as it does when the golden's
    reference workload is not today's. ``faster`` when every judgement is."""
    comparable = baseline.reference == attempt.reference
    # On an idle machine the reference's own spread (7.8 to 12.4 ms p50 between two
    # measurements a minute apart, measured here) exceeds what it would correct for: there it
    # may not excuse a slowdown, and the absolute ratio decides.
    idle = attempt.contention is not None and attempt.contention <= IDLE_CONTENTION
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
                now_reference=attempt.reference_seconds if comparable else None,
                golden_reference=baseline.reference_samples if comparable else None,
                now_value=now_stats.get(statistic),
                golden_value=golden.get(statistic),
                reference_may_excuse=not idle,
            )
            for statistic, ratio in tolerance.items()
        )
    every = [j for js in judgements.values() for j in js]
    contended = attempt.contention is not None and attempt.contention > max_contention
    slower = any(j.ratio.low > j.tolerance for j in every)
    verdict: Verdict = "pass"
    if any(j.outcome == "regression" for j in every) or (slower and contended):
        verdict = "contended" if contended else "regression"
    elif every and all(j.outcome == "faster" for j in every):
        verdict = "faster"
    return Assessment(attempt, judgements, verdict, tuple(missing), comparable)


def conclude(assessments: Sequence[Assessment]) -> Assessment:
    """The verdict over attempts: the first that passes (or is faster) wins; else a regression if
    one uncontended attempt showed it (the one with the smallest slowdown is reported: the
    regression held even there); else contended."""
    for a in assessments:
        if a.verdict in ("pass", "faster"):
            return a
    regressions = [a for a in assessments if a.verdict == "regression"]
    pool = regressions or list(assessments)
    return min(pool, key=_worst_ratio)


def decision_facts(assessment: Assessment, max_contention: float) -> DecisionFacts:
    """What decided ``assessment``'s verdict, as facts for the report to word."""
    return DecisionFacts(
        verdict=assessment.verdict,
        judgements=tuple((n, j) for n, js in assessment.judgements.items() for j in js),
        reference_comparable=assessment.normalised,
        contention=assessment.attempt.contention,
        idle_contention=IDLE_CONTENTION,
        max_contention=max_contention,
    )


def _worst_ratio(a: Assessment) -> float:
    values = [
        (j.normalised or j.ratio).value / j.tolerance for js in a.judgements.values() for j in js
    ]
    return max(values, default=0.0)
