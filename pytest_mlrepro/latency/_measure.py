"""Latency of a manifest's model: what is timed, the per-hardware golden store, and the verdict.

No pytest here (the items in ``plugin/_latency.py`` are thin). One measurement *attempt* times, in
this order: the reference workload, each declared measurement, the reference workload again, with
``/proc/stat`` read around it all (how much of the CPUs other processes took meanwhile). An
attempt is judged against a baseline golden (:func:`assess`); a regression must hold in every
attempt (:func:`conclude`).

Goldens live in ``<golden dir>/latency/<manifest name>/<hardware slug>.json``, one file per
hardware key (machine, device, framework and version, thread settings), each holding one entry
per batch size. A key without a golden is compared with the golden of the same machine and
device with the fewest differing settings, if there is one: a thread count or a framework
upgrade that slows the model down is a regression, reported with what changed.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from .._files import atomic_write_bytes, file_lock
from ..data import ResolvedDataset
from ..errors import GoldenError, SampleError
from ..fingerprint import HardwareKey, environment, hardware_key
from ..goldens import read_json, require_finite, softmax, top_k
from ..manifest import Latency, Manifest
from ..runners import Runner, load_runner
from ..settings import Settings
from ._decisions import RatioFacts, latency_decided_by
from ._timing import (
    Judgement,
    Measurement,
    Stats,
    StopRule,
    cpu_times,
    judge,
    measure,
    other_load,
    sketch,
    summarize,
)

# Re-exported, explicitly (mypy --strict): the latency item runs one around its measurements.
from ._timing import ReferenceWorkload as ReferenceWorkload

FORMAT = 1
MEASUREMENTS = ("model", "end_to_end")
Verdict = Literal["pass", "regression", "faster", "contended"]


def with_threads(manifest: Manifest, intra: int | None, inter: int | None) -> Manifest:
    """``manifest`` with its thread counts replaced where ``intra`` / ``inter`` are given (the
    ``--mlrepro-threads`` override)."""
    runtime = manifest.runtime
    changed = dataclasses.replace(
        runtime,
        intra_op_threads=intra if intra is not None else runtime.intra_op_threads,
        inter_op_threads=inter if inter is not None else runtime.inter_op_threads,
    )
    return dataclasses.replace(manifest, runtime=changed)


def key_for(manifest: Manifest, device: str, framework_version: str) -> HardwareKey:
    """The hardware key of ``manifest`` (with its thread settings) on ``device`` here."""
    runtime = manifest.runtime
    return hardware_key(
        device,
        manifest.framework.name,
        framework_version,
        runtime.intra_op_threads,
        runtime.inter_op_threads,
    )


def stop_rule(block: Latency) -> StopRule:
    return StopRule(
        min_rounds=block.min_rounds,
        min_time=block.min_time,
        max_time=block.max_time,
        warmup_rounds=block.warmup_rounds,
        warmup_time=block.warmup_time,
    )


# --- what is timed ----------------------------------------------------------------------------


@dataclass
class Prepared:
    """A loaded model and the callables to time, one per declared measurement."""

    calls: dict[str, Callable[[], object]]
    runner_info: dict[str, Any]
    runner: Runner


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
    check = getattr(runner, "check_batch", None)
    if check is not None:
        check(prepared_input, manifest.input.layout)
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
    return Prepared(calls=calls, runner_info=dict(runner.info), runner=runner)


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


def latency_dir(settings: Settings, manifest: Manifest) -> Path:
    return settings.golden_dir / "latency" / manifest.name


def golden_file(settings: Settings, manifest: Manifest, key: HardwareKey) -> Path:
    """Where the latency golden of ``manifest`` for hardware ``key`` lives."""
    return latency_dir(settings, manifest) / f"{key.slug}.json"


def ms(seconds: float) -> float:
    """Seconds to milliseconds, 6 significant digits (what goldens and reports keep)."""
    return float(f"{seconds * 1e3:.6g}")


def stats_ms(stats: Stats) -> dict[str, float | int]:
    """Stats with times in milliseconds (6 significant digits), counts as they are."""
    return {
        name: value if isinstance(value, int) else ms(value)
        for name, value in stats.as_dict().items()
    }


@dataclass(frozen=True)
class Distribution:
    """A recorded distribution: full-sample statistics and a sketch of the samples (seconds)."""

    stats: dict[str, float]  # seconds (rounds as a float)
    samples: np.ndarray

    def get(self, statistic: str) -> float:
        return float(self.stats[statistic])


@dataclass(frozen=True)
class Baseline:
    """A golden entry to compare with: one batch size of one hardware key's file."""

    path: Path
    slug: str
    key: dict[str, Any]
    exact: bool  # recorded for this very key (else: the same machine, other settings)
    recorded: str
    settings: dict[str, Any]
    contention: float | None
    reference: dict[str, Any]
    reference_samples: np.ndarray
    measurements: dict[str, Distribution]
    entry: dict[str, Any]


def _distribution(raw: Mapping[str, Any], where: str) -> Distribution:
    stats = raw["stats"]
    samples = raw["samples_ms"]
    if not isinstance(stats, dict) or not isinstance(samples, list) or not samples:
        raise ValueError(f"{where}: expected 'stats' and a non-empty 'samples_ms'")
    seconds = {
        k: float(v) * (1 if k in ("rounds", "iqr_outliers", "stddev_outliers") else 1e-3)
        for k, v in stats.items()
    }
    values = np.asarray([float(v) for v in samples]) * 1e-3
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError(f"{where}: samples must be finite and non-negative")
    return Distribution(stats=seconds, samples=values)


def read_golden(path: Path) -> dict[str, Any] | None:
    """The latency golden at ``path`` (validated), None if there is none, GoldenError if the file
    is not a latency golden."""
    data = read_json(path, "latency golden")
    if data is None:
        return None
    try:
        if (
            not isinstance(data, dict)
            or data.get("format") != FORMAT
            or data.get("kind") != ("latency")
        ):
            raise ValueError(f'expected a mapping with "format": {FORMAT}, "kind": "latency"')
        if not isinstance(data["key"], dict) or not isinstance(data["batches"], dict):
            raise ValueError("'key' and 'batches' must be mappings")
        for batch, entry in data["batches"].items():
            int(batch)
            for name, raw in entry["measurements"].items():
                _distribution(raw, f"batch {batch} {name}")
            _distribution(entry["reference"], f"batch {batch} reference")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise GoldenError(
            f"{path}: not a valid latency golden ({type(exc).__name__}: {exc}); fix it or "
            "record it again with --mlrepro-update"
        ) from None
    return data


def _baseline(path: Path, data: dict[str, Any], batch: int, exact: bool) -> Baseline:
    entry = data["batches"][str(batch)]
    workload = entry["reference"].get("workload", {})
    # Every batch size's reference in the file: they were measured on the same machine in the
    # same recording session, and one short measurement alone can be a lucky one (seen here: 7.8
    # against 12.4 ms p50 between two batch sizes recorded a minute apart on an idle machine),
    # which would then excuse a real slowdown as "the machine is slower now".
    pooled = [
        _distribution(other["reference"], "reference").samples
        for other in data["batches"].values()
        if other["reference"].get("workload", {}) == workload
    ]
    return Baseline(
        path=path,
        slug=str(data.get("slug", path.stem)),
        key=data["key"],
        exact=exact,
        recorded=str(entry.get("recorded", "")),
        settings=dict(entry.get("settings", {})),
        contention=entry.get("contention"),
        reference=dict(workload),
        reference_samples=np.concatenate(pooled),
        measurements={
            name: _distribution(raw, name) for name, raw in entry["measurements"].items()
        },
        entry=entry,
    )


def find_baseline(
    settings: Settings, manifest: Manifest, key: HardwareKey, batch: int
) -> Baseline | None:
    """The golden to compare with: this key's entry for ``batch``; else, among the goldens of the
    same machine and device, the one with the fewest differing key fields (the latest recorded on
    a tie). GoldenError if this key's own file is invalid; invalid files of other keys are left
    to their own machines."""
    own = golden_file(settings, manifest, key)
    data = read_golden(own)
    if data is not None and str(batch) in data["batches"]:
        return _baseline(own, data, batch, exact=True)
    candidates: list[tuple[int, str, Path, dict[str, Any]]] = []
    folder = latency_dir(settings, manifest)
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if path == own:
            continue
        try:
            other = read_golden(path)
        except GoldenError:
            continue
        if other is None or str(batch) not in other["batches"]:
            continue
        if not key.same_hardware(other["key"]):
            continue
        recorded = str(other["batches"][str(batch)].get("recorded", ""))
        candidates.append((len(key.differences(other["key"])), recorded, path, other))
    if not candidates:
        return None
    candidates.sort(key=lambda c: (c[0], _reverse(c[1]), str(c[2])))
    _, _, path, other = candidates[0]
    return _baseline(path, other, batch, exact=False)


def _reverse(text: str) -> tuple[int, ...]:
    """Sort key putting later ISO timestamps first."""
    return tuple(-ord(c) for c in text)


def _distribution_json(measurement: Measurement) -> dict[str, Any]:
    stats = summarize(measurement.seconds)
    return {
        "stats": stats_ms(stats),
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
            Measurement(
                samples_ns=np.concatenate(
                    [attempt.reference_before.samples_ns, attempt.reference_after.samples_ns]
                ),
                stopped_by=attempt.reference_before.stopped_by,
                warmup_rounds=attempt.reference_before.warmup_rounds,
                warmup_ns=attempt.reference_before.warmup_ns,
                started=attempt.started,
                finished=attempt.finished,
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


def dumps(data: dict[str, Any]) -> str:
    """Reviewable JSON: sorted keys, two-space indent, each sample list on one line."""
    lists: dict[str, list[float]] = {}

    def hide(obj: Any) -> Any:
        if isinstance(obj, dict):
            out = {}
            for k, v in obj.items():
                if k == "samples_ms" and isinstance(v, list):
                    token = f"@samples{len(lists)}@"
                    lists[token] = v
                    out[k] = token
                else:
                    out[k] = hide(v)
            return out
        if isinstance(obj, list):
            return [hide(v) for v in obj]
        return obj

    text = json.dumps(hide(data), indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    for token, values in lists.items():
        text = text.replace(f'"{token}"', json.dumps(values, allow_nan=False), 1)
    return text + "\n"


def _lock_path(settings: Settings, path: Path) -> Path:
    # Next to the cache, not in golden/: a lock file must never end up committed.
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:16]
    return settings.cache_dir / "locks" / f"latency-{digest}.lock"


def record(
    settings: Settings,
    manifest: Manifest,
    key: HardwareKey,
    batch: int,
    entry: dict[str, Any],
    runner_info: dict[str, Any],
) -> Path:
    """Write (or replace) ``batch``'s entry in this key's golden; the other entries, and every
    other key's file, stay as they are. Read-modify-write under a lock between processes, the
    file replaced atomically."""
    path = golden_file(settings, manifest, key)
    with file_lock(_lock_path(settings, path)):
        try:
            data = read_golden(path)
        except GoldenError:
            data = None  # only --mlrepro-update gets here: it replaces a broken file
        if data is None:
            data = {"format": FORMAT, "kind": "latency", "batches": {}}
        data.update(
            name=manifest.name,
            key=key.fields,
            slug=key.slug,
            environment=environment({k: v for k, v in runner_info.items() if k != "device"}),
        )
        data["batches"][str(batch)] = entry
        atomic_write_bytes(
            path, dumps(data).encode("utf-8"), what="latency golden", inside=settings.golden_dir
        )
    return path


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
    changes = {k: v for k, v in key.differences(baseline.key).items()}
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
    reference cannot excuse a slowdown on an idle machine). ``faster`` when every judgement is."""
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


def ratio_facts(assessment: Assessment) -> list[RatioFacts]:
    """The judgements of ``assessment`` as the plain facts :func:`latency_decided_by` reads."""
    return [
        RatioFacts(
            measurement=name,
            statistic=j.statistic,
            tolerance=j.tolerance,
            ratio=j.ratio.value,
            ratio_low=j.ratio.low,
            ratio_high=j.ratio.high,
            normalised=None if j.normalised is None else j.normalised.value,
            normalised_low=None if j.normalised is None else j.normalised.low,
            normalised_high=None if j.normalised is None else j.normalised.high,
            outcome=j.outcome,
        )
        for name, js in assessment.judgements.items()
        for j in js
    ]


def decided_by(assessment: Assessment, max_contention: float) -> str:
    """Which ratio decided ``assessment``'s verdict, in words (:func:`latency_decided_by`)."""
    return latency_decided_by(
        verdict=assessment.verdict,
        facts=ratio_facts(assessment),
        reference_comparable=assessment.normalised,
        contention=assessment.attempt.contention,
        idle_contention=IDLE_CONTENTION,
        max_contention=max_contention,
    )


def primary_measurement(names: Sequence[str]) -> str | None:
    """The measurement a result's single ``p50_ms`` stands for: ``model`` when it was timed
    (the model's own latency, which a hardware matrix compares), else the first."""
    if "model" in names:
        return "model"
    return next(iter(names), None)


def _worst_ratio(a: Assessment) -> float:
    values = [
        (j.normalised or j.ratio).value / j.tolerance for js in a.judgements.values() for j in js
    ]
    return max(values, default=0.0)


# --- text -------------------------------------------------------------------------------------


def fmt_ms(seconds: float) -> str:
    """``0.0203 ms``, ``7.21 ms``, ``10.0 ms``, ``151 ms``: three significant digits."""
    value = seconds * 1e3
    return f"{value:.0f} ms" if value >= 100 else f"{value:#.3g} ms"


def _fmt_ratio(r: Any) -> str:
    return f"×{r.value:.2f} [{r.low:.2f}–{r.high:.2f}]"


def _plain(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


def judgement_rows(assessment: Assessment) -> list[str]:
    """Golden vs now, one line per measurement and statistic, as a table."""
    rows = [("measurement", "stat", "golden", "now", "now/golden", "normalised", "tolerance", "")]
    for name, js in assessment.judgements.items():
        for j in js:
            rows.append(
                (
                    name,
                    j.statistic,
                    fmt_ms(j.golden),
                    fmt_ms(j.now),
                    _fmt_ratio(j.ratio),
                    _fmt_ratio(j.normalised) if j.normalised else "-",
                    f"≤×{j.tolerance:g}",
                    {"regression": "✗", "faster": "faster"}.get(j.outcome, ""),
                )
            )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def explain(
    assessment: Assessment,
    baseline: Baseline,
    changes: Mapping[str, tuple[Any, Any]],
    attempts: int,
    golden_shown: str,
    update_cmd: str,
    max_contention: float,
) -> str:
    """Why the item failed (or was not judged), with every number needed to believe it."""
    a = assessment
    stats = ", ".join(sorted({j.statistic for js in a.judgements.values() for j in js}))
    if a.verdict == "contended":
        lead = (
            f"latency not judged: the machine was busy (other processes used "
            f"{a.attempt.contention:.0%} of the CPUs, more than {max_contention:.0%}) in every "
            f"one of {attempts} attempts, and the model measured slower than the golden allows"
        )
    else:
        lead = (
            f"latency regression: {stats} beyond the tolerance in every one of {attempts} "
            "attempts, both absolutely and relative to the reference workload"
        )
    lines = [lead, ""]
    lines += judgement_rows(a)
    ref_now = float(np.median(a.attempt.reference_seconds))
    ref_golden = float(np.median(baseline.reference_samples))
    lines.append("")
    if a.normalised:
        lines.append(
            f"  reference workload p50: {fmt_ms(ref_golden)} at recording, {fmt_ms(ref_now)} "
            f"now (machine ×{ref_now / ref_golden:.2f}; after/before the model "
            f"×{a.attempt.reference_drift:.2f})"
        )
    else:
        lines.append(
            "  reference workload differs from the golden's "
            f"({baseline.reference} → {a.attempt.reference}): judged on absolute ratios only"
        )
    if a.attempt.contention is not None:
        lines.append(
            f"  other processes used {a.attempt.contention:.0%} of the CPUs meanwhile "
            f"(at recording: {_pct(baseline.contention)})"
        )
    lines.append("  [low–high]: one-sided 95% bootstrap bounds of the ratio")
    if changes:
        lines.append("")
        lines.append("  changed since the golden:")
        for name, (old, new) in changes.items():
            lines.append(f"    {name}: {_plain(old)} → {_plain(new)}")
    lines.append("")
    exact = "" if baseline.exact else " (recorded with other settings on this machine)"
    lines.append(f"  golden: {golden_shown}{exact}, recorded {baseline.recorded}")
    if a.verdict == "contended":
        lines.append("  rerun on a quiet machine (or raise mlrepro_latency_max_contention)")
    else:
        lines += ["  if the change is intended, record a new golden:", f"    {update_cmd}"]
    return "\n".join(lines)


def _pct(value: float | None) -> str:
    return "unknown" if value is None or not math.isfinite(value) else f"{value:.0%}"
