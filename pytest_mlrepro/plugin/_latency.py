"""The latency items, ``latency[<device>-b<batch>]``: the model (and one end-to-end request) timed
at one batch size on one device, the distribution compared with this machine's golden. The
measurement, the golden store and the verdict live in :mod:`pytest_mlrepro.latency`; under
pytest-xdist the item measures alone (:mod:`._xdist_lock`).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, ClassVar

import pytest

from .. import goldens as golden_store
from .. import latency as lat
from ..data import resolve_dataset
from ..errors import GoldenError, MlreproError, OutputError, Unavailable
from ..latency import benchmark_entry, summarize
from ..manifest import Manifest
from ..report import explain_latency
from ..runners import check_framework
from ._base import (
    LATENCY_ATTR,
    MlreproFailure,
    display_path,
    is_strict,
    is_update,
    latency_threads,
    max_contention,
    settings_key,
)
from ._item import ManifestItem
from ._xdist_lock import XDIST_GROUP, exclusive


def latency_items(
    parent: pytest.Collector, manifest: Manifest, devices: list[str]
) -> list[pytest.Item]:
    """One latency item per device and declared batch size, for manifests with ``latency:``."""
    if manifest.latency is None:
        return []
    return [
        LatencyItem.from_parent(
            parent,
            name=f"latency[{device}-b{batch}]",
            manifest=manifest,
            device=device,
            batch=batch,
        )
        for device in devices
        for batch in manifest.latency.batch_sizes
    ]


class LatencyItem(ManifestItem):
    """Times the model (and one end-to-end request) at one batch size on one device, and compares
    the distribution with this machine's golden."""

    kind: ClassVar[str] = "latency"

    def __init__(self, *, manifest: Manifest, device: str, batch: int, **kwargs: Any) -> None:
        super().__init__(manifest=manifest, device=device, **kwargs)
        self.batch = batch
        self.report_data: dict[str, Any] | None = None
        self.add_marker(pytest.mark.xdist_group(XDIST_GROUP))

    def report_attributes(self, when: str) -> dict[str, Any]:
        """The call's report: the latency table's and the benchmark file's data."""
        if when == "call" and self.report_data is not None:
            return {LATENCY_ATTR: self.report_data}
        return {}

    def _update_cmd(self) -> str:
        threads = self.config.getoption("mlrepro_threads")
        extra = f" --mlrepro-threads {threads}" if threads else ""
        target = f"{display_path(self.config, self.path)}::{self.name}"
        return f"pytest '{target}' --mlrepro-update{extra}"

    def _skip_or_fail(
        self, message: str, verdict: str, strict_fails: bool = True, decided_by: str | None = None
    ) -> None:
        self.add_property("verdict", verdict)
        self.report_data = {**(self.report_data or self._row_base()), "verdict": verdict}
        if decided_by is not None:
            self.add_property("decided_by", decided_by)
            self.report_data["decided_by"] = decided_by
        if strict_fails and is_strict(self.config):
            raise MlreproFailure(f"{message}\n(a failure because of --mlrepro-strict)")
        _skip(message)

    def _row_base(self) -> dict[str, Any]:
        return {"manifest": self.manifest.name, "device": self.device, "batch": self.batch}

    def runtest(self) -> None:
        config = self.config
        settings = config.stash[settings_key]
        block = self.manifest.latency
        assert block is not None
        intra, inter = latency_threads(config)
        m = lat.with_threads(self.manifest, intra, inter)
        update = is_update(config)
        limit = max_contention(config)
        self.add_property("kind", "latency")
        self.add_property("manifest", m.name)
        self.add_property("device", self.device)
        self.add_property("batch", self.batch)
        self.add_property("framework", m.framework.name)
        self.add_manifest_identity()
        self.add_property("intra_op_threads", m.runtime.intra_op_threads or "default")
        self.add_property("inter_op_threads", m.runtime.inter_op_threads or "default")
        try:
            version = check_framework(m)
        except Unavailable as exc:
            self._skip_or_fail(str(exc), "skipped")
            return
        self.add_property("framework_version", version)
        key = lat.key_for(m, self.device, version)
        self.add_property("hardware_key", key.fields)
        self.add_property("hardware_slug", key.slug)
        try:
            baseline = golden_store.find_latency_baseline(settings, m, key, self.batch)
        except GoldenError as exc:
            if not update:
                self.add_property("verdict", "error")
                raise MlreproFailure(
                    f"{exc}\n(only --mlrepro-update replaces it: {self._update_cmd()})"
                ) from None
            baseline = None
        if baseline is None and not update:
            f = key.fields
            self._skip_or_fail(
                f"no latency golden for this machine and settings ({f['cpu']}, "
                f"{f['usable_cpus']} CPUs{', ' + str(f['gpu']) if f.get('gpu') else ''}, "
                f"{f['framework']} {f['framework_version']}, threads "
                f"{f['intra_op_threads']}/{f['inter_op_threads']}): no "
                f"{display_path(config, golden_store.latency_golden_file(settings, m, key))}; "
                "record one with\n"
                f"  {self._update_cmd()}",
                "no golden",
                decided_by="not compared: no latency golden for this machine and settings",
            )
            return
        try:
            dataset = resolve_dataset(m, settings)
            prepared = lat.prepare(m, self.device, self.batch, settings, dataset, block.measure)
        except Unavailable as exc:
            self._skip_or_fail(str(exc), "skipped")
            return
        except MlreproError as exc:
            self.add_property("verdict", "error")
            raise MlreproFailure(str(exc)) from exc
        settings_now = lat.settings_of(prepared.runner_info)
        for name in ("graph_optimization_level", "providers"):
            if name in prepared.runner_info:
                self.add_property(name, prepared.runner_info[name])
        rule = lat.stop_rule(block)
        attempts: list[lat.Attempt] = []
        assessments: list[lat.Assessment] = []
        with lat.ReferenceWorkload() as reference, exclusive(config):
            for _ in range(block.attempts):
                attempt = lat.measure_attempt(prepared.calls, rule, reference)
                attempts.append(attempt)
                if baseline is None:
                    if _quiet(attempt, limit):
                        break
                    continue
                assessment = lat.assess(attempt, baseline, block.tolerance, limit)
                assessments.append(assessment)
                if assessment.verdict in ("pass", "faster"):
                    break
        del prepared  # the model's memory goes before the verdict is written
        self.add_property("attempts", len(attempts))
        window = [round(attempts[0].started, 3), round(attempts[-1].finished, 3)]
        self.add_property("window", window)
        if baseline is None:  # --mlrepro-update with nothing to compare with: record
            chosen = next((a for a in attempts if _quiet(a, limit)), None)
            self._report(chosen or attempts[-1], None, key, settings_now)
            self._summary(chosen or attempts[-1], None, None, limit)
            if chosen is None:
                self._skip_or_fail(_busy(attempts, limit, "not recorded"), "not recorded", False)
                return
            self._record(settings, m, key, chosen, settings_now, "golden recorded")
            return
        final = lat.conclude(assessments)
        self._report(final.attempt, final, key, settings_now, baseline)
        ratio = self._summary(final.attempt, final, baseline, limit)
        changes = lat.changed_settings(baseline, key, settings_now)
        golden_shown = display_path(config, baseline.path)
        self.add_property("golden", golden_shown)
        if changes:
            self.add_property("changed", {k: [v[0], v[1]] for k, v in changes.items()})
        stale = lat.latency_golden_stale(
            exact=baseline.exact,
            verdict=final.verdict,
            missing=final.missing,
            settings_changed=bool(changes),
            block_changed=baseline.entry.get("latency") != _plain(dataclasses.asdict(block)),
            outpaced=lat.golden_outpaced(ratio),
        )
        decision = lat.latency_decision(
            update=update,
            stale=stale,
            quiet=_quiet(final.attempt, limit),
            exact=baseline.exact,
            verdict=final.verdict,
            baseline_slug=baseline.slug,
            missing=final.missing,
            assessments=len(assessments),
            attempts=block.attempts,
        )
        # A golden being re-recorded now is stale no more.
        flag = None if decision.action == "record" else lat.stale_golden(ratio, self._update_cmd())
        self.add_property("stale_golden", flag)
        assert self.report_data is not None  # set by _report
        self.report_data["stale_golden"] = flag
        if decision.action == "record":
            self._record(settings, m, key, final.attempt, settings_now, decision.text)
            return
        if decision.action == "not recorded":
            self._skip_or_fail(_busy(attempts, limit, "not recorded"), "not recorded", False)
            return
        if decision.action == "pass":
            self._set_verdict(decision.text)
            return
        text = explain_latency(
            final, baseline, changes, len(assessments), golden_shown, self._update_cmd(), limit
        )
        shown = f"{display_path(config, self.path)} [{self.device}, batch {self.batch}]: "
        if decision.action == "contended":
            self._set_verdict("contended")
            _skip(text)  # reported at the manifest already
        self._set_verdict("regression")
        raise MlreproFailure(shown + text)

    def _summary(
        self,
        attempt: lat.Attempt,
        assessment: lat.Assessment | None,
        baseline: golden_store.LatencyBaseline | None,
        limit: float,
    ) -> float | None:
        """The one-line latency of the result (``p50_ms`` of the primary measurement, its
        golden's and their ratio) and, in words, what decided the verdict: properties (so, the
        results file) and the terminal table's data. Returns the ratio to the golden."""
        name = lat.primary_measurement(list(attempt.measurements))
        now = golden = ratio = None
        if name is not None:
            now = summarize(attempt.measurements[name].seconds).p50
            recorded = None if baseline is None else baseline.measurements.get(name)
            if recorded is not None:
                golden = recorded.get("p50")
                ratio = now / golden if golden > 0 else None
        if assessment is None:
            decided = "not compared: no latency golden for this machine and settings yet"
        else:
            decided = lat.decided_by(assessment, limit)
        fields: dict[str, Any] = {
            "p50_ms": None if now is None else lat.ms(now),
            "golden_p50_ms": None if golden is None else lat.ms(golden),
            "ratio_to_golden": None if ratio is None else round(ratio, 4),
            "decided_by": decided,
        }
        if assessment is None:  # recording: nothing to be stale
            fields["stale_golden"] = None
        for field, value in fields.items():
            self.add_property(field, value)
        assert self.report_data is not None  # set by _report
        self.report_data.update(fields)
        return ratio

    def _set_verdict(self, verdict: str) -> None:
        self.add_property("verdict", verdict)
        if self.report_data is not None:
            self.report_data["verdict"] = verdict

    def _record(
        self,
        settings: Any,
        m: Manifest,
        key: Any,
        attempt: lat.Attempt,
        settings_now: dict[str, Any],
        action: str,
    ) -> None:
        assert m.latency is not None
        entry = lat.entry_for(attempt, settings_now, m.latency, self.batch)
        try:
            path = golden_store.record_latency_golden(
                settings, m, key, self.batch, entry, settings_now
            )
        except OutputError as exc:  # disk full, read-only folder...: the old golden is intact
            self._set_verdict("error")
            raise MlreproFailure(str(exc)) from None
        self.add_property("golden", display_path(self.config, path))
        self._set_verdict(action)

    def _report(
        self,
        attempt: lat.Attempt,
        assessment: lat.Assessment | None,
        key: Any,
        settings_now: dict[str, Any],
        baseline: golden_store.LatencyBaseline | None = None,
    ) -> None:
        """Scalar properties (JUnit, --mlrepro-json) and the data of the terminal table and of
        the pytest-benchmark file (carried on the report, also across xdist)."""
        assert self.manifest.latency is not None
        block = self.manifest.latency
        if attempt.contention is not None:
            self.add_property("contention", round(attempt.contention, 3))
        measurements: dict[str, Any] = {}
        benchmarks = []
        judged = assessment.judgements if assessment is not None else {}
        for name, measured in attempt.measurements.items():
            stats = summarize(measured.seconds)
            row: dict[str, Any] = {"p50_ms": lat.ms(stats.p50), "rounds": stats.rounds}
            for prop in ("min", "p50", "p90", "p99", "mean", "stddev", "iqr"):
                self.add_property(f"{name}.{prop}_ms", lat.ms(getattr(stats, prop)))
            self.add_property(f"{name}.rounds", stats.rounds)
            for j in judged.get(name, ()):
                self.add_property(f"{name}.golden_{j.statistic}_ms", lat.ms(j.golden))
                self.add_property(f"{name}.{j.statistic}_ratio", round(j.ratio.value, 4))
                if j.normalised is not None:
                    normalised = round(j.normalised.value, 4)
                    self.add_property(f"{name}.{j.statistic}_normalised", normalised)
                row.setdefault("judgements", []).append(
                    {
                        "statistic": j.statistic,
                        "golden_ms": lat.ms(j.golden),
                        "now_ms": lat.ms(j.now),
                        "ratio": round(j.ratio.value, 3),
                        "normalised": None
                        if j.normalised is None
                        else round(j.normalised.value, 3),
                        "outcome": j.outcome,
                    }
                )
            measurements[name] = row
            benchmarks.append(
                benchmark_entry(
                    name=f"{self.name}::{name}",
                    fullname=f"{self.nodeid}::{name}",
                    group=f"{self.manifest.name} {self.device} b{self.batch}",
                    params={"device": self.device, "batch": self.batch, "measurement": name},
                    stats=stats,
                    options={
                        "disable_gc": True,
                        "timer": "perf_counter_ns",
                        "min_rounds": block.min_rounds,
                        "max_time": block.max_time,
                        "min_time": block.min_time,
                        "warmup": block.warmup_rounds > 0 or block.warmup_time > 0,
                        # pytest-benchmark 5.3's rounds-until-precise mode; not ours: the
                        # stopping rule is min_rounds + min_time (README, "Latency").
                        "precision": None,
                        "confidence": None,
                    },
                    extra_info={
                        "manifest": self.manifest.name,
                        "hardware_key": key.slug,
                        "settings": settings_now,
                        "warmup_rounds": measured.warmup_rounds,
                        "stopped_by": measured.stopped_by,
                        "contention": attempt.contention,
                        "items_per_second": self.batch / stats.p50 if stats.p50 else None,
                        "golden": None if baseline is None else str(baseline.slug),
                    },
                    data=measured.seconds.tolist(),
                )
            )
        self.report_data = {
            **self._row_base(),
            "measurements": measurements,
            "benchmarks": benchmarks,
            "key": key.fields,
        }


def _plain(data: Any) -> Any:
    """``data`` as it reads back from JSON (tuples become lists)."""
    return json.loads(json.dumps(data))


def _skip(message: str) -> None:
    """Skip (reported at the manifest by the plugin's pytest_runtest_makereport)."""
    pytest.skip(message)


def _quiet(attempt: lat.Attempt, limit: float) -> bool:
    return attempt.contention is None or attempt.contention <= limit


def _busy(attempts: list[lat.Attempt], limit: float, what: str) -> str:
    least = min(a.contention or 0.0 for a in attempts)
    return (
        f"latency {what}: the machine was busy in every attempt (other processes used at least "
        f"{least:.0%} of the CPUs, more than mlrepro_latency_max_contention = {limit:g}); rerun "
        "on a quiet machine"
    )
