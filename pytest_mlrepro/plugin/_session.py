"""The engine's top: one session object per pytest process, every engine hook a method of it."""

from __future__ import annotations

import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .._visible import visible_lines
from ..manifest import Manifest
from ..report import (
    audit_lines,
    latency_table,
    note_lines,
    phase_lines,
    reference_lines,
    repeat_lines,
    shard_lines,
    summary_table,
)
from ..results import Row
from . import _changed, _golden_audit, _tracking
from ._accuracy import accuracy_items, plan_preprocessing
from ._base import (
    BENCHMARKS_ATTR,
    SPLIT_ATTR,
    check_outputs,
    close_terminal_stderr,
    is_worker,
    options,
    options_key,
    read_options,
    settings_from,
    settings_key,
    state_of,
)
from ._collect import ManifestErrorItem, ManifestFile, is_mlrepro_item, preload_frameworks
from ._determinism import determinism_items
from ._html import check_html_target, drift_row, write_html_report
from ._item import ManifestItem
from ._latency import LatencyItem, latency_items, session_lock, use_lock
from ._outputs import write_benchmark_file, write_results_file
from ._phases import accounted, limited, one_time
from ._shards import Gathering, emit, merged_report, results_row

if TYPE_CHECKING:
    from _pytest.terminal import TerminalReporter

SESSION_PLUGIN = "mlrepro-session"


def pytest_configure(config: pytest.Config) -> None:
    """The settings read and checked (usage errors before anything runs), the session registered."""
    config.stash[settings_key] = settings_from(config)
    config.stash[options_key] = read_options(config)
    check_outputs(config)
    check_html_target(config)
    _tracking.read_tracking(config)
    _changed.read_changes(config)
    session_of(config)


def session_of(config: pytest.Config) -> MlreproSession:
    """This process's session object: made and registered on first use."""
    session = config.pluginmanager.get_plugin(SESSION_PLUGIN)
    if not isinstance(session, MlreproSession) or session.config is not config:
        session = MlreproSession(config)
        config.pluginmanager.register(session, SESSION_PLUGIN)
    return session


class MlreproSession:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.state = state_of(config)
        self.is_worker = is_worker(config)

    # --- collection ---------------------------------------------------------------------------

    def collect_file(self, file_path: Path, parent: pytest.Collector) -> pytest.Collector:
        """For the entry point's ``pytest_collect_file``, which recognised the manifest."""
        return ManifestFile.from_parent(parent, path=file_path)

    def pytest_mlrepro_make_items(
        self, parent: pytest.File, manifest: Manifest, devices: list[str]
    ) -> list[pytest.Item]:
        return [
            *accuracy_items(parent, manifest, devices),
            *latency_items(parent, manifest, devices),
            *determinism_items(parent, manifest, devices),
        ]

    def pytest_itemcollected(self, item: pytest.Item) -> None:
        if isinstance(item, ManifestErrorItem):  # for the golden audit
            self.state.audit.broken.add(item.path)

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.state.audit.deselected += len(items)

    def pytest_collection_modifyitems(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        _changed.select_changed(config, items)
        _golden_audit.mark_shared_goldens(config, items)
        use_lock(config, any(isinstance(i, LatencyItem) for i in items))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        plan_preprocessing(session.config, session.items)
        if not session.items or session.config.option.collectonly:
            return  # nothing imported (an xdist controller: its workers import, each its own)
        with one_time(session.config, "framework import"):
            preload_frameworks(session)

    def pytest_report_collectionfinish(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> str | list[str] | None:
        """Where goldens, data and cache are, after "collected N items", when manifests were
        collected (not on an xdist controller, which collects nothing)."""
        changed = _changed.changed_lines(config)
        if not any(is_mlrepro_item(item) for item in items):
            return changed or None
        s = config.stash[settings_key]
        mirrors = ", ".join(str(p) for p in s.data_mirrors) or "none"
        where = f"mlrepro: goldens {s.golden_dir}, data mirrors {mirrors}, cache {s.cache_dir}"
        return [where, *changed]

    # --- running --------------------------------------------------------------------------------

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """Each split item's whole item counts as an item of the run: its merged report is one
        more result (the terminal's progress counts against the collected items)."""
        if self.is_worker:
            return
        wholes = {getattr(item, "split_of", None) for item in session.items}
        wholes.discard(None)
        session.testscollected += len(wholes)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(
        self, item: pytest.Item, nextitem: pytest.Item | None
    ) -> Generator[None, object, object]:
        """Under xdist, in a session with latency items: every other item holds the session's
        lock shared while it runs (a latency item takes it alone while it measures)."""
        lock = session_lock(item.config)
        if lock is None or isinstance(item, LatencyItem):
            return (yield)
        with lock.shared():
            return (yield)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if isinstance(item, ManifestItem):
            item.begin_attempt()

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, None, None]:
        """An evaluating item runs under its time limit. The outermost wrapper: the phases cover
        what pytest times as the call."""
        with accounted(item), limited(item):
            return (yield)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        """The one report wrapper: a skip points at the manifest, not at the plugin line that
        raised it; the report gets the item's attributes (plain data, which xdist carries)."""
        report = yield
        if is_mlrepro_item(item) and report.skipped and isinstance(report.longrepr, tuple):
            report.longrepr = (str(item.path), 1, visible_lines(report.longrepr[2]))
        elif is_mlrepro_item(item) and isinstance(report.longrepr, str):
            # A failure's text carries data (class names, sample ids, exception texts from
            # frameworks, names read from a shared cache): its control characters are shown.
            report.longrepr = visible_lines(report.longrepr)
        if isinstance(item, (ManifestItem, ManifestErrorItem)):
            for name, value in item.report_attributes(call.when).items():
                setattr(report, name, value)
        if isinstance(item, ManifestItem):
            item.locate_failure(report)
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep each item's results (under xdist, on the controller). An attempt that
        pytest-rerunfailures runs again is no result: the last attempt's report stands."""
        if str(report.outcome) == "rerun":  # not among pytest's own outcomes (its type says)
            return
        state = self.state
        row, drift = results_row(report), drift_row(report)
        benchmarks = getattr(report, BENCHMARKS_ATTR, None)
        if row is not None:
            state.results.append(row)
            if row.kind == "latency" and isinstance(benchmarks, list):
                state.latency.append((row, benchmarks))
        if drift is not None:
            state.drift.append(drift)
        # A shard item's report: once every shard of its whole item is in, the whole item's
        # merged report goes to every reporter (not on a worker: it runs only some shards).
        if self.is_worker or getattr(report, SPLIT_ATTR, None) is None:
            return
        if state.shards is None:
            state.shards = Gathering()
        complete = state.shards.add(report)
        if complete is not None:
            emit(self.config, merged_report(state.shards, complete))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        _golden_audit.gather_worker_audit(node)
        _changed.gather_changed(node)

    # --- the end ---------------------------------------------------------------------------------

    def pytest_terminal_summary(
        self, terminalreporter: TerminalReporter, exitstatus: int, config: pytest.Config
    ) -> None:
        if self.is_worker:
            return
        state = self.state
        accuracy = sorted(
            (r for r in state.results if r.kind != "latency"),
            key=lambda r: (str(r.manifest), str(r.device)),
        )
        referenced = [r for r in state.results if r.reference_verdict is not None]
        findings = _golden_audit.audit_findings(config, state.audit)
        sections: list[tuple[str, list[str]]] = [
            ("mlrepro reference agreement", reference_lines(referenced)),
            ("mlrepro goldens", audit_lines(*findings)),
            ("mlrepro notes", note_lines(state.results)),  # latency rows' too (enrichment)
            (
                "mlrepro latency",
                latency_table([r for r, _ in state.latency]) if state.latency else [],
            ),
            (
                "mlrepro",
                (summary_table(accuracy) if accuracy else [])
                + (
                    shard_lines(options(config).shard, config.getoption("mlrepro_json"))
                    if state.results
                    else []
                ),
            ),
            # pytest-repeat's option (absent without it): said once, where manifest items ran.
            ("mlrepro and pytest-repeat", repeat_lines(_repeat_count(config, state.results))),
            # What was logged to the tracking store, or could not be (--mlrepro-track).
            ("mlrepro tracking", _tracking.tracking_lines(config)),
            # Where each item's time went: under -v (the results file and the page keep it).
            (
                "mlrepro phases",
                phase_lines(state.results, state.one_time) if config.option.verbose > 0 else [],
            ),
        ]
        for title, lines in sections:
            if lines:
                terminalreporter.section(title)
                for line in lines:
                    terminalreporter.write_line(visible_lines(line))

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """The audit's share of this process (to the controller under xdist), then the output
        files, and both logged to the tracking store when one is asked for (controller only)."""
        state = self.state
        _golden_audit.share_audit(session, state.audit)
        _changed.share_changed(session)
        if self.is_worker:
            return
        _changed.nothing_changed_is_ok(session)
        # Whole items some of whose shard items never reported (deselected, stopped early,
        # crashed): each fails, naming the missing shards (no verdict without all of them).
        pending = [] if state.shards is None else state.shards.pending()
        for nodeid in pending:
            emit(self.config, merged_report(state.shards, nodeid))
        if pending and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        # The results file first: whatever fails after it (the benchmark file, the page, the
        # tracking store) is said in one line and costs nothing written before.
        tracking = _tracking.live_tracking(session.config)
        results = write_results_file(session, state.results, state.one_time, tracking is not None)
        write_benchmark_file(session, state.latency)
        if tracking is None or results is None or not state.results:
            # Tracked only where manifest items ran (not a --collect-only, nor a run of others).
            write_html_report(session, state)
            return
        with tempfile.TemporaryDirectory(prefix="mlrepro-page-") as folder:
            page = write_html_report(session, state, fallback=Path(folder) / "report.html")
            tracking.track_session(session, results, page)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        close_terminal_stderr(config)


def _repeat_count(config: pytest.Config, rows: list[Row]) -> int:
    """pytest-repeat's ``--count`` in a run that had manifest items (1 otherwise)."""
    if not rows or not config.pluginmanager.hasplugin("repeat"):  # its pytest11 entry point
        return 1
    count = getattr(config.option, "count", 1)
    return count if isinstance(count, int) else 1
