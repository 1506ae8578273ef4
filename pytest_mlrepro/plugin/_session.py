"""The plugin's state for one pytest run, and every report it makes.

One :class:`MlreproSession` per pytest process, kept in ``config.stash`` and registered with the
plugin manager (as pytest's own junitxml and terminal reporter are): it gathers the items'
results as their reports arrive, owns the golden store's audit and the terminal's stderr for the
hard time limit, and writes the terminal sections and the output files at the end. The hook
functions of the other plugin modules only read options, make items and delegate here.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ..evaluation import PreprocessingShare

if TYPE_CHECKING:
    from _pytest.capture import CaptureManager
    from _pytest.terminal import TerminalReporter

PROPERTY_PREFIX = "mlrepro."

Row = dict[str, Any]


@dataclass
class GoldenAudit:
    """What this process collected: each manifest's golden, broken manifests, deselection; on
    the controller, the audits of the xdist workers too."""

    claims: dict[Path, tuple[str, Path | None, str]] = field(default_factory=dict)
    """manifest file → (the path shown, its golden or None, the manifest's name)"""
    broken: set[Path] = field(default_factory=set)
    deselected: int = 0
    from_workers: list[dict[str, Any]] = field(default_factory=list)


class MlreproSession:
    """The plugin's state and reports for one pytest process (see the module docstring)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.results: list[Row] = []
        """One row per accuracy, determinism or latency item: its ``mlrepro.*`` properties."""
        self.latency: list[Row] = []
        """One row per latency item: what the latency table and the benchmark file show."""
        self.reference: list[Row] = []
        """One row per item checked against a reference manifest."""
        self.drift: list[Row] = []
        """The preprocessing pictures of each drifted item (only with --mlrepro-html)."""
        self.audit = GoldenAudit()
        self.shards: Any = None
        """The shard items' reports until their whole item's verdict (``_shards.Gathering``),
        on the controller (or the one process) of a run with ``mlrepro_shards``."""
        self.default_timeout = 0.0
        """Seconds an item may run when its manifest sets no limit (0: none)."""
        self._terminal_stderr: int | None = None
        self.preprocessing: PreprocessingShare | None = None
        """The preprocessing shared between the accuracy items of this process, planned once
        they are collected (only when two of them can share)."""

    @property
    def is_worker(self) -> bool:
        """Whether this is an xdist worker (whose reports the controller gathers)."""
        return hasattr(self.config, "workerinput")

    # --- the terminal's stderr, for the hard time limit -----------------------------------------

    def terminal_stderr(self) -> int:
        """A file descriptor of the terminal's stderr, duplicated the first time a time limit is
        armed (not at import: most processes never arm one) and closed at unconfigure. pytest
        captures file descriptor 2 while an item runs; the capture is suspended for the moment of
        the duplication, so that a process ended by the hard limit says why on the terminal, not
        into a capture buffer that dies with it."""
        if self._terminal_stderr is None:
            capture: CaptureManager | None = self.config.pluginmanager.get_plugin("capturemanager")
            if capture is not None and not capture.is_globally_capturing():
                capture = None
            if capture is not None:
                capture.suspend_global_capture(in_=False)
            try:
                self._terminal_stderr = os.dup(2)
            except OSError:  # no stderr at all: the message goes wherever fd 2 goes then
                self._terminal_stderr = 2
            finally:
                if capture is not None:
                    capture.resume_global_capture()
        return self._terminal_stderr

    # --- hooks --------------------------------------------------------------------------------

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep each item's results; under xdist this runs on the controller for worker reports."""
        from ._html import drift_row
        from ._latency import latency_row
        from ._reference import reference_row
        from ._results import results_row

        for rows, row in (
            (self.results, results_row(report)),
            (self.latency, latency_row(report)),
            (self.reference, reference_row(report)),
            (self.drift, drift_row(report)),
        ):
            if row is not None:
                rows.append(row)
        self._gather_shard(report)

    def _gather_shard(self, report: pytest.TestReport) -> None:
        """A shard item's report: kept; once every shard of its whole item is in, the whole
        item's merged report is sent to every reporter (on the controller, or the one process:
        an xdist worker runs only some of the shards)."""
        from ._shards import SPLIT_ATTR, Gathering, emit, merged_report

        if self.is_worker or getattr(report, SPLIT_ATTR, None) is None:
            return
        if self.shards is None:
            self.shards = Gathering()
        complete = self.shards.add(report)
        if complete is not None:
            emit(self.config, merged_report(self.shards, complete))

    def plan_preprocessing(self, items: list[pytest.Item], budget_bytes: int) -> None:
        """Plan the preprocessing shared by the accuracy items that will run (``items``, the
        deselected ones gone): only where two of them can share, and the budget allows any."""
        uses = [use for item in items if (use := getattr(item, "preprocessing_use", None))]
        if len(uses) > 1 and budget_bytes > 0:
            self.preprocessing = PreprocessingShare(budget_bytes)
            self.preprocessing.plan(uses)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """Count each split item's whole item as an item of the run: its merged report is one
        more result (the terminal's progress counts against the collected items, a number
        pytest sets after the collection hooks)."""
        if self.is_worker:
            return
        wholes = {getattr(item, "split_of", None) for item in session.items}
        wholes.discard(None)
        session.testscollected += len(wholes)

    def _finish_shards(self, session: pytest.Session) -> None:
        """Whole items some of whose shard items never reported (deselected, stopped early,
        crashed): each fails, naming the missing shards (no verdict without all of them)."""
        from ._shards import emit, merged_report

        if self.is_worker or self.shards is None:
            return
        pending = self.shards.pending()
        for nodeid in pending:
            emit(self.config, merged_report(self.shards, nodeid))
        if pending and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(
        self, terminalreporter: TerminalReporter, exitstatus: int, config: pytest.Config
    ) -> None:
        """The plugin's terminal sections (on the xdist controller only)."""
        if self.is_worker:
            return
        from ._golden_audit import audit_section
        from ._latency import latency_table
        from ._reference import summary_lines
        from ._results import summary_section
        from ._shards import summary_lines as shard_lines

        sections: list[tuple[str, list[str]]] = [
            ("mlrepro reference agreement", summary_lines(self.reference)),
            ("mlrepro goldens", audit_section(config, self.audit)),
            ("mlrepro latency", latency_table(self.latency) if self.latency else []),
            (
                "mlrepro",
                summary_section(self.results) + (shard_lines(config) if self.results else []),
            ),
        ]
        for title, lines in sections:
            if lines:
                terminalreporter.section(title)
                for line in lines:
                    terminalreporter.write_line(line)

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """The audit's share of this process (to the controller under xdist), then the output
        files: the benchmark file, the results file and the HTML report (on the controller
        only)."""
        from ._golden_audit import share_audit
        from ._html import write_html_report
        from ._latency import write_benchmark_file
        from ._results import write_results_file

        share_audit(session, self.audit)
        if self.is_worker:
            return
        self._finish_shards(session)
        write_benchmark_file(session, self.latency)
        write_results_file(session, self.results)
        write_html_report(session, self)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self._terminal_stderr is not None and self._terminal_stderr != 2:
            with contextlib.suppress(OSError):
                os.close(self._terminal_stderr)
        self._terminal_stderr = None


def option_or_ini(config: pytest.Config, name: str) -> object:
    """A setting from its command-line twin (dest ``name``) when given, else its ini key."""
    given = config.getoption(name, default=None)
    return config.getini(name) if given is None else given


_session_key = pytest.StashKey[MlreproSession]()


def session_of(config: pytest.Config) -> MlreproSession:
    """This process's session object: made and registered on first use (whichever plugin module's
    ``pytest_configure`` runs first)."""
    session = config.stash.get(_session_key, None)
    if session is None:
        session = config.stash[_session_key] = MlreproSession(config)
        config.pluginmanager.register(session, "mlrepro-session")
    return session


def report_output_error(session: pytest.Session, message: str) -> None:
    """An output that could not be written at the end of the run: said in red, and the run's exit
    status is non-zero (a run whose results were lost did not succeed)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"mlrepro: {message}", red=True, bold=True)
    else:
        import sys

        print(f"mlrepro: {message}", file=sys.stderr)
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
