"""pytest glue for latency: the ``latency[<device>-b<batch>]`` items, their options, the xdist
exclusive section, the terminal table and the pytest-benchmark JSON file.

Registered by ``plugin.py``; importing it imports no ML framework. The measurement, the golden
store and the verdict live in :mod:`pytest_mlrepro.latency._measure` and
:mod:`pytest_mlrepro.latency._timing`.

Under pytest-xdist, a latency item must not be timed while items in other workers load the same
cores. Every worker of a session that has latency items shares one lock file (its path comes from
the controller): each other item holds it shared while it runs, a latency item holds it exclusively
while it measures (writer-preferring: a waiting latency item stops new items from starting, so
it never starves). Latency items also carry ``xdist_group("mlrepro-latency")``, so that
``--dist loadgroup`` sends them all to one worker.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import tempfile
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from .. import latency as lat
from .._files import atomic_write_bytes, fcntl_module
from ..data import resolve_dataset
from ..errors import GoldenError, MlreproError, OutputError, Unavailable
from ..latency import benchmark_entry, summarize
from ..manifest import Manifest
from ..runners import check_framework
from ._items import (
    ManifestFile,
    ManifestItem,
    MlreproFailure,
    display_path,
    is_strict,
    settings_key,
)
from ._session import option_or_ini, report_output_error

XDIST_GROUP = "mlrepro-latency"
DEFAULT_MAX_CONTENTION = 0.25

_lock_key = pytest.StashKey["SessionLock | None"]()
_lock_dir_key = pytest.StashKey[Path]()


# --- options ----------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mlrepro", "ML model reproducibility (pytest-mlrepro)")
    group.addoption(
        "--mlrepro-threads",
        dest="mlrepro_threads",
        metavar="INTRA[,INTER]",
        default=None,
        help="thread counts for latency items, overriding the manifests' runtime "
        "intra_op_threads / inter_op_threads (part of the hardware key)",
    )
    group.addoption(
        "--mlrepro-benchmark-json",
        dest="mlrepro_benchmark_json",
        metavar="PATH",
        default=None,
        help="write latency results in pytest-benchmark's JSON format",
    )
    group.addoption(
        "--mlrepro-latency-max-contention",
        dest="mlrepro_latency_max_contention",
        metavar="SHARE",
        default=None,
        help="overrides the ini key mlrepro_latency_max_contention",
    )
    parser.addini(
        "mlrepro_latency_max_contention",
        default=str(DEFAULT_MAX_CONTENTION),
        help="share of the CPUs (0..1) other processes may use while a latency is measured "
        f"before a slowdown is reported as 'contended' instead of a regression "
        f"(default {DEFAULT_MAX_CONTENTION})",
    )


def parse_threads(value: str | None) -> tuple[int | None, int | None]:
    """``"4"`` → (4, None); ``"4,1"`` → (4, 1); None → (None, None). UsageError otherwise."""
    if not value:
        return None, None
    parts = value.split(",")
    try:
        numbers = [int(p) for p in parts]
    except ValueError:
        numbers = []
    if (
        not 1 <= len(parts) <= 2
        or len(numbers) != len(parts)
        or any(not 1 <= n <= 1024 for n in numbers)
    ):
        raise pytest.UsageError(
            f"--mlrepro-threads {value!r}: expected INTRA or INTRA,INTER, each 1..1024 (e.g. 2,1)"
        )
    return numbers[0], numbers[1] if len(numbers) == 2 else None


def max_contention(config: pytest.Config) -> float:
    raw = str(option_or_ini(config, "mlrepro_latency_max_contention")).strip()
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise pytest.UsageError(
            f"mlrepro_latency_max_contention = {raw!r}: expected a number between 0 and 1"
        )
    return value


def pytest_configure(config: pytest.Config) -> None:
    parse_threads(config.getoption("mlrepro_threads"))  # bad values stop the run at once
    max_contention(config)
    target = config.getoption("mlrepro_benchmark_json")
    if target and not hasattr(config, "workerinput"):  # writable? asked before anything runs
        from .._files import check_writable_folder

        folder = Path(os.path.abspath(target)).parent
        try:
            check_writable_folder(folder, "benchmark file (--mlrepro-benchmark-json)")
        except OutputError as exc:
            raise pytest.UsageError(f"{exc}. Nothing was run.") from None
    config.stash[_lock_key] = None


# --- items ------------------------------------------------------------------------------------


def pytest_mlrepro_make_items(
    parent: ManifestFile, manifest: Manifest, devices: list[str]
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
        intra, inter = parse_threads(config.getoption("mlrepro_threads"))
        m = lat.with_threads(self.manifest, intra, inter)
        update = bool(config.getoption("mlrepro_update"))
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
            baseline = lat.find_baseline(settings, m, key, self.batch)
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
                f"{display_path(config, lat.golden_file(settings, m, key))}; record one with\n"
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
        with lat.ReferenceWorkload() as reference, self._exclusive():
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
        self.add_property("latency_tolerance", dict(block.tolerance))  # the history's band
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
        text = lat.explain(
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
        baseline: lat.Baseline | None,
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
            path = lat.record(settings, m, key, self.batch, entry, settings_now)
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
        baseline: lat.Baseline | None = None,
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

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        lock = self.config.stash.get(_lock_key, None)
        if lock is None:
            yield
            return
        with lock.exclusive():
            yield


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


# --- xdist: one latency measurement at a time, nothing else meanwhile -------------------------


class SessionLock:
    """A writer-preferring readers-writer lock between the processes of one session, on two
    files: ``turnstile`` (held by a waiting or measuring writer, so that no new reader enters)
    and ``main`` (readers share it, a writer holds it alone)."""

    def __init__(self, path: Path) -> None:
        self.main = path
        self.turnstile = path.with_name(path.name + ".turnstile")

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        fcntl = fcntl_module()
        with open(self.turnstile, "a+b") as gate:
            fcntl.flock(gate.fileno(), fcntl.LOCK_EX)
            fcntl.flock(gate.fileno(), fcntl.LOCK_UN)
        with open(self.main, "a+b") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_SH)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        fcntl = fcntl_module()
        with open(self.turnstile, "a+b") as gate, open(self.main, "a+b") as fh:
            fcntl.flock(gate.fileno(), fcntl.LOCK_EX)
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            finally:
                fcntl.flock(gate.fileno(), fcntl.LOCK_UN)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Controller side (xdist): every worker gets the path of the session's lock file."""
    config = node.config
    if _lock_dir_key not in config.stash:
        config.stash[_lock_dir_key] = Path(tempfile.mkdtemp(prefix="mlrepro-xdist-"))
    node.workerinput["mlrepro_latency_lock"] = str(config.stash[_lock_dir_key] / "latency.lock")


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Worker side: lock only in sessions that have latency items (others pay nothing)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or not any(isinstance(i, LatencyItem) for i in items):
        return
    path = workerinput.get("mlrepro_latency_lock")
    if path:
        config.stash[_lock_key] = SessionLock(Path(path))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, object, object]:
    lock = item.config.stash.get(_lock_key, None)
    if lock is None or isinstance(item, LatencyItem):
        return (yield)
    with lock.shared():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if isinstance(item, LatencyItem) and call.when == "call" and item.report_data is not None:
        report.mlrepro_latency = item.report_data  # type: ignore[attr-defined]
    return report


# --- results out ------------------------------------------------------------------------------


def latency_row(report: pytest.TestReport) -> dict[str, Any] | None:
    """A latency item's results from its report (sent by an xdist worker with it); None for
    other reports."""
    data = getattr(report, "mlrepro_latency", None)
    if report.when == "call" and isinstance(data, dict):
        return {**data, "nodeid": report.nodeid, "outcome": report.outcome}
    return None


def latency_table(rows: list[dict[str, Any]]) -> list[str]:
    """The terminal table: one line per item and measurement, the item's verdict and, in words,
    which ratio decided it (on the item's first line); then the stale goldens with the command
    that re-records each."""
    header = (
        "manifest",
        "device",
        "batch",
        "measure",
        "golden",
        "now",
        "×golden",
        "×norm",
        "rounds",
        "verdict",
        "decided by",
    )
    table = [header]
    stale: list[str] = []
    for r in sorted(rows, key=lambda r: (str(r["manifest"]), str(r["device"]), int(r["batch"]))):
        measured = r.get("measurements") or {"-": {}}
        flag = r.get("stale_golden")
        verdict = str(r.get("verdict", ""))
        if isinstance(flag, dict):
            verdict += " (stale golden)"
            stale += [
                f"stale latency golden: {r['manifest']} [{r['device']}, batch {r['batch']}] runs "
                f"at ×{flag['ratio']:.2f} of its golden's p50 (below ×{lat.STALE_RATIO:g}: "
                "recorded on a busy machine? against it a real slowdown would pass); re-record:",
                f"  {flag['command']}",
            ]
        for index, (name, m) in enumerate(measured.items()):
            j = (m.get("judgements") or [{}])[0]
            table.append(
                (
                    str(r["manifest"]),
                    str(r["device"]),
                    str(r["batch"]),
                    name,
                    _ms(j.get("golden_ms")) + (f" {j['statistic']}" if j else ""),
                    _ms(j.get("now_ms", m.get("p50_ms"))),
                    _x(j.get("ratio")),
                    _x(j.get("normalised")),
                    str(m.get("rounds", "-")),
                    verdict if index == 0 else "",
                    str(r.get("decided_by") or "") if index == 0 else "",
                )
            )
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table]
    return lines + (["", *stale] if stale else [])


def _ms(value: Any) -> str:
    return lat.fmt_ms(value / 1e3) if isinstance(value, (int, float)) else "-"


def _x(value: Any) -> str:
    return f"×{value:.2f}" if isinstance(value, (int, float)) else "-"


def write_benchmark_file(session: pytest.Session, rows: list[dict[str, Any]]) -> None:
    """The latency results in pytest-benchmark's format, when --mlrepro-benchmark-json asks."""
    config = session.config
    target = config.getoption("mlrepro_benchmark_json")
    if not target:
        return
    from ..latency import document

    rows = sorted(rows, key=lambda r: str(r["nodeid"]))
    benchmarks = [b for r in rows for b in r.get("benchmarks", [])]
    keys: list[dict[str, Any]] = []
    for r in rows:
        if r.get("key") and r["key"] not in keys:
            keys.append(r["key"])
    payload = document(benchmarks, root=config.rootpath, hardware_keys=keys)
    path = Path(target)
    if not path.is_absolute():
        path = Path(os.getcwd()) / path
    text = json.dumps(payload, indent=2, sort_keys=True) + "\n"
    try:
        atomic_write_bytes(path, text.encode(), what="benchmark file (--mlrepro-benchmark-json)")
    except OutputError as exc:
        report_output_error(session, str(exc))


def pytest_unconfigure(config: pytest.Config) -> None:
    lock_dir = config.stash.get(_lock_dir_key, None)
    if lock_dir is not None:
        shutil.rmtree(lock_dir, ignore_errors=True)
