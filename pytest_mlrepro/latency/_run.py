"""One latency check from start to verdict, as a latency item runs it: baseline golden, attempts
measured, verdict decided and the golden recorded when the decision says so."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from .. import goldens as golden_store
from .._phases import phase
from .._status import Status
from ..data import resolve_dataset
from ..errors import GoldenError, MlreproError, OutputError, Unavailable
from ..fingerprint import HardwareKey, hardware_key
from ..manifest import Manifest
from ..runners import check_framework
from ..settings import Settings
from ._benchjson import stats_entry
from ._decisions import (
    DecisionFacts,
    golden_outpaced,
    latency_decision,
    latency_golden_stale,
    stale_golden,
)
from ._measure import (
    Assessment,
    Attempt,
    assess,
    changed_settings,
    conclude,
    decision_facts,
    entry_for,
    measure_attempt,
    prepare,
    settings_of,
)
from ._profile import (
    NoProfile,
    OperatorFindings,
    OperatorProfile,
    findings_json,
    operator_findings,
    profile_json,
    take_profile,
)
from ._timing import ReferenceWorkload, StopRule, ms, summarize

Reason = Literal[
    "measured",  # passed, or a golden recorded
    "unavailable",  # a framework, data set or device missing (``message``)
    "golden invalid",  # this key's golden cannot be read (``message``)
    "no golden",  # nothing to compare with, and no update asked (``key``, ``golden_file``)
    "error",  # the model or its data could not be prepared, or the golden written (``message``)
    "busy",  # nothing recorded: the machine was busy in every attempt (``least_contention``)
    "regression",  # slower than the golden allows in every attempt (``assessment``...)
    "contended",  # slower, but the machine was busy: not judged (``assessment``...)
    "inconclusive",  # slower absolutely; a slower host cannot be told apart (``assessment``...)
]


@dataclass(frozen=True)
class LatencyRequest:
    """What one latency item asks, and how the item names things."""

    manifest: Manifest
    device: str
    batch: int
    settings: Settings
    update: bool
    threads: tuple[int | None, int | None]
    max_contention: float
    name: str  # the item's name and node id: the benchmark entries' names
    nodeid: str
    update_cmd: str
    shown: Callable[[Path], str]  # a path as the run shows it
    # What decided the verdict, in words (``report.latency_decided_by``; None: no golden yet):
    # the wording is the report's, the facts the check's.
    word_decision: Callable[[DecisionFacts | None], str]
    exclusive: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext
    enrich: bool = False  # --mlrepro-enrich: a golden this run reproduces gains its profile


_SKIPS = ("unavailable", "no golden", "busy", "contended", "inconclusive")
"""The reasons that skip the item (the others fail it)."""
_STATUS: dict[Reason, Status] = {
    "unavailable": "skipped",
    "contended": "skipped",
    "inconclusive": "skipped",
    "no golden": "no golden",
}


@dataclass(frozen=True)
class LatencyFacts:
    """Named field by field as ``results.Row`` names them (an undeclared name is refused)."""

    intra_op_threads: int | str | None = None
    inter_op_threads: int | str | None = None
    framework_version: str | None = None
    hardware_key: dict[str, Any] | None = None
    hardware_slug: str | None = None
    graph_optimization_level: Any = None
    providers: Any = None
    attempts: int | None = None
    latency_tolerance: dict[str, float] | None = None
    window: tuple[float, ...] = ()
    contention: float | None = None
    golden: str | None = None
    changed: dict[str, list[Any]] | None = None
    stale_golden: dict[str, object] | None = None
    operators: dict[str, Any] | None = None
    p50_ms: float | None = None
    golden_p50_ms: float | None = None
    ratio_to_golden: float | None = None
    decided_by: str | None = None
    verdict: str | None = None
    golden_enriched: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    status: Status | None = None


@dataclass(frozen=True)
class LatencyOutcome:
    """How a latency item ends (``end``: pass, skip, fail), why, and its row's ``facts``."""

    end: Literal["pass", "skip", "fail"] = "pass"
    status: Status = "passed"
    reason: Reason = "measured"
    verdict: str = ""
    strict_fails: bool = True  # a skip fails under --mlrepro-strict
    facts: LatencyFacts = LatencyFacts()
    row: dict[str, Any] | None = None
    message: str = ""
    max_contention: float = 0.0
    golden_shown: str = ""
    key: dict[str, Any] | None = None
    golden_file: str = ""
    least_contention: float = 0.0
    assessment: Assessment | None = None
    baseline: golden_store.LatencyBaseline | None = None
    changes: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    assessments: int = 0
    operators: OperatorFindings | None = None  # a slowdown's operator diagnosis


class _Ended(Exception):
    """The check ended early (the outcome says how)."""


def run_latency(request: LatencyRequest) -> LatencyOutcome:
    run = _Run(request)
    with contextlib.suppress(_Ended):
        run.run()
    o = run.outcome
    status: Status = (
        _STATUS.get(o.reason, "failed") if o.end != "pass"
        else "recorded" if run.written
        else "passed"
    )  # fmt: skip
    facts = replace(run.facts, status=status)
    row = None
    if run.measured is not None or o.end == "skip":  # the table lists what was skipped too
        row = run.measured or {"measurements": {}, "benchmarks": []}
    return replace(o, status=status, verdict=facts.verdict or "", facts=facts, row=row)


class _Run:
    """One check, its facts gathered as it goes and frozen into the record at its end."""

    def __init__(self, request: LatencyRequest) -> None:
        self.r = request
        self.outcome = LatencyOutcome(max_contention=request.max_contention)
        self.facts = LatencyFacts()
        self.measured: dict[str, Any] | None = None  # the row's measurements, once measured
        self.written = False
        self.profile: OperatorProfile | NoProfile | None = None  # today's, when taken

    def _set(self, **facts: Any) -> None:
        self.facts = replace(self.facts, **facts)

    def _end(self, reason: Reason, verdict: str, **facts: Any) -> _Ended:
        """A skip (:data:`_SKIPS`; a failure under --mlrepro-strict unless the machine was busy)
        or a failure (verdict ``error``: the tool failed, ``message`` says how)."""
        self._set(verdict=verdict)
        end: Literal["skip", "fail"] = "skip" if reason in _SKIPS else "fail"
        busy = reason in ("busy", "contended")  # the machine's doing, not the model's
        self.outcome = replace(self.outcome, end=end, reason=reason, strict_fails=not busy, **facts)
        return _Ended()

    def run(self) -> None:
        r = self.r
        block = r.manifest.latency
        assert block is not None
        # The manifest with the --mlrepro-threads override, where given.
        intra, inter = r.threads
        runtime = r.manifest.runtime
        runtime = replace(
            runtime,
            intra_op_threads=runtime.intra_op_threads if intra is None else intra,
            inter_op_threads=runtime.inter_op_threads if inter is None else inter,
        )
        m = replace(r.manifest, runtime=runtime)
        limit = r.max_contention
        self._set(
            intra_op_threads=runtime.intra_op_threads or "default",
            inter_op_threads=runtime.inter_op_threads or "default",
        )
        try:
            version = check_framework(m)
        except Unavailable as exc:
            raise self._end("unavailable", "skipped", message=str(exc)) from None
        key = hardware_key(
            r.device, m.framework.name, version, runtime.intra_op_threads, runtime.inter_op_threads
        )
        self._set(framework_version=version, hardware_key=key.fields, hardware_slug=key.slug)
        try:
            baseline = golden_store.find_latency_baseline(r.settings, m, key, r.batch)
        except GoldenError as exc:
            if not r.update:
                raise self._end("golden invalid", "error", message=str(exc)) from None
            baseline = None
        if baseline is None and not r.update:
            golden_file = r.shown(golden_store.latency_golden_file(r.settings, m, key))
            self._set(decided_by=r.word_decision(None))
            raise self._end("no golden", "no golden", key=key.fields, golden_file=golden_file)
        try:
            dataset = resolve_dataset(m, r.settings)
            # The batches read and preprocessed (the model's loading: its own phases).
            with phase("preprocessing"):
                prepared = prepare(m, r.device, r.batch, r.settings, dataset, block.measure)
        except Unavailable as exc:
            raise self._end("unavailable", "skipped", message=str(exc)) from None
        except MlreproError as exc:
            raise self._end("error", "error", message=str(exc)) from None
        info = dict(prepared.runner.info)
        settings_now = settings_of(info)
        self._set(
            graph_optimization_level=info.get("graph_optimization_level"),
            providers=info.get("providers"),
        )
        rule = StopRule(**{f.name: getattr(block, f.name) for f in dataclasses.fields(StopRule)})
        attempts: list[Attempt] = []
        assessments: list[Assessment] = []
        with ReferenceWorkload() as reference, r.exclusive(), phase("model"):
            for _ in range(block.attempts):
                attempt = measure_attempt(prepared.calls, rule, reference)
                attempts.append(attempt)
                if baseline is None:
                    if _quiet(attempt, limit):
                        break
                    continue
                assessment = assess(attempt, baseline, block.tolerance, limit)
                assessments.append(assessment)
                if assessment.verdict in ("pass", "faster"):
                    break
            # After the timed rounds, never among them: the profiler's own pass.
            if _profile_wanted(r, baseline, assessments):
                self.profile = take_profile(prepared.runner, prepared.model_input, m.framework.name)
        del prepared  # the model's memory goes before the verdict is written
        self._set(
            attempts=len(attempts),
            latency_tolerance=dict(block.tolerance),  # the history's band
            window=(round(attempts[0].started, 3), round(attempts[-1].finished, 3)),
        )
        least = min(a.contention or 0.0 for a in attempts)
        if baseline is None:  # --mlrepro-update with nothing to compare with: record
            chosen = next((a for a in attempts if _quiet(a, limit)), None)
            self._report(chosen or attempts[-1], None, key, settings_now)
            if chosen is None:
                raise self._end("busy", "not recorded", least_contention=least)
            self._record(m, key, chosen, settings_now, "golden recorded")
            return
        final = conclude(assessments)
        ratio = self._report(final.attempt, final, key, settings_now, baseline)
        changes = changed_settings(baseline, key, settings_now)
        self.outcome = replace(self.outcome, golden_shown=r.shown(baseline.path))
        self._set(
            golden=self.outcome.golden_shown,
            changed={k: [v[0], v[1]] for k, v in changes.items()} or None,
        )
        stale = latency_golden_stale(
            exact=baseline.exact,
            verdict=final.verdict,
            missing=final.missing,
            settings_changed=bool(changes),
            # The block as it reads back from the golden's JSON (tuples become lists).
            block_changed=baseline.entry.get("latency")
            != json.loads(json.dumps(dataclasses.asdict(block))),
            outpaced=golden_outpaced(ratio),
        )
        decision = latency_decision(
            update=r.update,
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
        if decision.action != "record":
            self._set(stale_golden=stale_golden(ratio, r.update_cmd))
        if decision.action == "record":
            self._record(m, key, final.attempt, settings_now, decision.text)
            return
        if decision.action == "not recorded":
            raise self._end("busy", "not recorded", least_contention=least)
        if decision.action == "pass":
            enriched = self._enrich(m, key, baseline, final.verdict, changes) if r.enrich else ""
            self._set(verdict=f"{decision.text} ({enriched})" if enriched else decision.text)
            return
        # A skip when contended or inconclusive, else a regression.
        reason: Reason = (
            decision.action if decision.action in ("contended", "inconclusive") else "regression"
        )
        facts: dict[str, Any] = {"assessment": final, "baseline": baseline, "changes": changes}
        if reason in ("regression", "inconclusive") and self.profile is not None:
            findings = operator_findings(baseline.entry.get("profile"), self.profile)
            self._set(operators=findings_json(findings))
            facts["operators"] = findings
        raise self._end(reason, reason, assessments=len(assessments), **facts)

    def _record(
        self,
        m: Manifest,
        key: HardwareKey,
        attempt: Attempt,
        settings_now: dict[str, Any],
        action: str,
    ) -> None:
        assert m.latency is not None
        r = self.r
        entry = entry_for(attempt, settings_now, m.latency, r.batch)
        if isinstance(self.profile, OperatorProfile):
            entry["profile"] = profile_json(self.profile)
        try:
            path = golden_store.record_latency_golden(
                r.settings, m, key, r.batch, entry, settings_now
            )
        except OutputError as exc:  # disk full, read-only folder...: the old golden is intact
            raise self._end("error", "error", message=str(exc)) from None
        self.written = True
        self._set(golden=r.shown(path), verdict=action)

    def _enrich(
        self,
        m: Manifest,
        key: HardwareKey,
        baseline: golden_store.LatencyBaseline,
        verdict: str,
        changes: dict[str, tuple[Any, Any]],
    ) -> str:
        """--mlrepro-enrich on a run that reproduces this key's golden: add the operator profile
        it lacks, every recorded figure unchanged. Returns the verdict's note."""
        r = self.r
        shown = r.shown(baseline.path)
        if not baseline.exact or changes:
            return self._note(
                "golden not enriched",
                f"golden not enriched ({shown} is left as it was): it was recorded with other "
                f"settings ({', '.join(changes)}), so this run's profile would not describe it",
            )
        if verdict != "pass":
            return self._note(
                "golden not enriched",
                f"golden not enriched ({shown} is left as it was): this run does not reproduce "
                f"it ({verdict}); a profile is added only on a run that passes",
            )
        if "profile" in baseline.entry:
            return self._note("golden complete", f"golden {shown} has an operator profile already")
        if not isinstance(self.profile, OperatorProfile):
            why = "" if self.profile is None else f": {self.profile.why}"
            return self._note(
                "golden not enriched",
                f"golden {shown} not enriched: no operator profile for {m.framework.name}{why}",
            )
        try:
            golden_store.add_latency_profile(
                r.settings, m, key, r.batch, profile_json(self.profile), baseline.entry
            )
        except (GoldenError, OutputError) as exc:
            why = str(exc).replace(str(baseline.path), shown)
            return self._note("golden not enriched", f"golden not enriched: {why}")
        self._set(golden_enriched=("operator profile",))
        return self._note(
            "golden enriched",
            f"golden {shown} enriched with an operator profile ({len(self.profile.operators)} "
            "operators); no figure changed",
        )

    def _note(self, verdict_note: str, text: str) -> str:
        """Add a sentence to the results row's ``notes``; returns ``verdict_note``."""
        self._set(notes=(*self.facts.notes, text))
        return verdict_note

    def _report(
        self,
        attempt: Attempt,
        assessment: Assessment | None,
        key: HardwareKey,
        settings_now: dict[str, Any],
        baseline: golden_store.LatencyBaseline | None = None,
    ) -> float | None:
        """Put the item's properties and table/benchmark data on the report (it crosses xdist);
        returns the ratio to the golden."""
        r = self.r
        block = r.manifest.latency
        assert block is not None
        if attempt.contention is not None:
            self._set(contention=round(attempt.contention, 3))
        measurements: dict[str, Any] = {}
        benchmarks = []
        judged = assessment.judgements if assessment is not None else {}
        for name, measured in attempt.measurements.items():
            stats = summarize(measured.seconds)
            row: dict[str, Any] = {"rounds": stats.rounds}
            for prop in ("min", "p50", "p90", "p99", "mean", "stddev", "iqr"):
                row[f"{prop}_ms"] = ms(getattr(stats, prop))
            for j in judged.get(name, ()):
                row.setdefault("judgements", []).append(
                    {
                        "statistic": j.statistic,
                        "golden_ms": ms(j.golden),
                        "now_ms": ms(j.now),
                        "ratio": round(j.ratio.value, 3),
                        "normalised": None
                        if j.normalised is None
                        else round(j.normalised.value, 3),
                        "outcome": j.outcome,
                    }
                )
            measurements[name] = row
            params = {"device": r.device, "batch": r.batch, "measurement": name}
            benchmarks.append(  # one of pytest-benchmark's ``benchmarks`` (latency/_benchjson.py)
                {
                    "group": f"{r.manifest.name} {r.device} b{r.batch}",
                    # The manifest first: pytest-benchmark's tables show the name alone, and two
                    # manifests have the same items (latency[cpu-b1]).
                    "name": f"{r.manifest.name}::{r.name}::{name}",
                    "fullname": f"{r.nodeid}::{name}",
                    "params": params,
                    "param": "-".join(str(v) for v in params.values()),
                    "extra_info": {
                        "manifest": r.manifest.name,
                        "hardware_key": key.slug,
                        "settings": settings_now,
                        "warmup_rounds": measured.warmup_rounds,
                        "stopped_by": measured.stopped_by,
                        "contention": attempt.contention,
                        "items_per_second": r.batch / stats.p50 if stats.p50 else None,
                        "golden": None if baseline is None else str(baseline.slug),
                    },
                    "options": {
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
                    "stats": stats_entry(stats, measured.seconds.tolist()),
                }
            )
        self.measured = {"measurements": measurements, "benchmarks": benchmarks}
        # The measurement the single p50_ms stands for: ``model`` when it was timed (the model's
        # own latency, which a hardware matrix compares), else the first.
        primary = "model" if "model" in measurements else next(iter(measurements))
        now = summarize(attempt.measurements[primary].seconds).p50
        recorded = None if baseline is None else baseline.measurements.get(primary)
        golden = None if recorded is None else recorded.get("p50")
        ratio = now / golden if golden is not None and golden > 0 else None
        decided = r.word_decision(
            None if assessment is None else decision_facts(assessment, r.max_contention)
        )
        self._set(
            p50_ms=ms(now),
            golden_p50_ms=None if golden is None else ms(golden),
            ratio_to_golden=None if ratio is None else round(ratio, 4),
            decided_by=decided,
        )
        return ratio


def _profile_wanted(
    r: LatencyRequest,
    baseline: golden_store.LatencyBaseline | None,
    assessments: list[Assessment],
) -> bool:
    """For a golden that may be recorded or enriched, and a slowdown to explain."""
    return (
        baseline is None
        or r.update
        or (r.enrich and baseline.exact and "profile" not in baseline.entry)
        or (bool(assessments) and assessments[-1].verdict not in ("pass", "faster"))
    )


def _quiet(attempt: Attempt, limit: float) -> bool:
    return attempt.contention is None or attempt.contention <= limit
