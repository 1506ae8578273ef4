"""What every item of a manifest shares, and what the items that evaluate the data set share."""

from __future__ import annotations

import contextlib
import importlib
import re
import sysconfig
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, TextIO

import pytest

from .. import goldens as golden_store
from .._status import End
from ..data import Shard
from ..errors import BuildMismatch, GoldenError
from ..manifest import Manifest
from ..report import explain_build_mismatch
from ..results import Row, manifest_digest, row_json
from ._base import ROW_ATTR, MlreproFailure, display_path, options, settings_key
from ._junit import junit_view

ALLURE_LISTENER = "allure_listener"  # allure-pytest's listener (only with --alluredir)


def item_nodeid(parent: pytest.Collector, name: str, xdist_group: str | None) -> str:
    """The node id as text: pytest 9.2 parses a bracketed id back differently (--lf never matched:
    pytest-dev/pytest#15045), and reads no ``xdist_group`` marker; an ``@group`` suffix holds."""
    nodeid = f"{parent.nodeid}::{name}"
    return f"{nodeid}@{xdist_group}" if xdist_group else nodeid


def loadgroup(config: pytest.Config, group: str) -> str | None:
    """``group`` where this run is ``--dist loadgroup`` (pytest-xdist), else None."""
    return group if getattr(config.option, "loadgroup", False) else None


class LocatedFailure(str):
    """A failure's text whose ``reprcrash`` is what ``--tb=line`` prints (``x.yaml:20: <line>``)."""

    reprcrash: FailurePlace

    def toterminal(self, tw: Any) -> None:
        tw.line(str(self))


@dataclass(frozen=True)
class FailurePlace:
    """Where a failure is, as pytest's crash location reads."""

    path: str
    lineno: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.lineno}: {self.message}"


_LEADING_PLACE = re.compile(r"(?P<file>[^\n:]+):(?P<line>\d+):")
_KEY = re.compile(r"(\w+)|\[(\d+)\]")
# A verdict without a blamed field is located at the block it is about.
_VERDICT_BLOCKS = {"data changed": "dataset"}


class ManifestItem(pytest.Item):
    """What every item of a manifest shares: its manifest and device, its properties, and a
    failure shown as its message alone (an :class:`MlreproFailure` is the whole story)."""

    kind: ClassVar[str] = ""
    blamed: str | None = None
    """The manifest field this run's diagnosis points at (``scale.divisor``'s full path)."""
    row: Row | None = None
    """This attempt's typed row, once its check made one (the report carries it as JSON)."""

    def __init__(
        self, *, manifest: Manifest, device: str, xdist_group: str | None = None, **kwargs: Any
    ) -> None:
        kwargs.setdefault("nodeid", item_nodeid(kwargs["parent"], kwargs["name"], xdist_group))
        super().__init__(**kwargs)
        self.manifest = manifest
        self.device = device

    def begin_attempt(self) -> None:
        """A run of the item starts afresh (pytest-rerunfailures reruns the same item object);
        Allure, when it reports this run, gets the item's parameters (allure imported only then)."""
        self.row = self.blamed = None
        if self.config.pluginmanager.get_plugin(ALLURE_LISTENER) is not None:
            allure: Any = importlib.import_module("allure")
            for name, value in self.parameters().items():
                allure.dynamic.parameter(name, value)

    def parameters(self) -> dict[str, str]:
        """What tells this item from its siblings (its name's brackets), for reporters that
        identify a test by its bare name and its parameters (Allure's historyId)."""
        return {"device": self.device}

    def row_head(self) -> Row:
        """The fields that open every row of the item (the manifest's normalised content and its
        sha256 too: two results files can then say what differs)."""
        m, content = self.manifest, self.manifest.normalized()
        return Row(
            nodeid=self.nodeid,
            outcome="passed",  # pytest's, set from the report
            kind=self.kind,
            manifest=m.name,
            device=self.device,
            framework=m.framework.name,
            manifest_file=display_path(self.config, self.path),
            manifest_digest=manifest_digest(content),
            manifest_content=dict(content),
        )

    def report_attributes(self, when: str) -> dict[str, Any]:
        """Attributes of the ``when`` report (plain data: xdist carries them): the call's row."""
        if when != "call" or self.row is None:
            return {}
        # The JUnit view of the row (pytest copies an item's user properties into its teardown
        # report, the one its JUnit writer reads).
        value = row_json(self.row)
        self.user_properties[:] = [
            *((k, v) for k, v in self.user_properties if not str(k).startswith("mlrepro.")),
            *junit_view(value),
        ]
        return {ROW_ATTR: value}

    def conclude(self, end: End, text: str, strict_fails: bool = True) -> None:
        """The one place a check's end becomes pytest's outcome (a skip fails under
        --mlrepro-strict when ``strict_fails``)."""
        if end == "pass":
            return
        if end == "skip" and strict_fails and options(self.config).strict:
            raise MlreproFailure(f"{text}\n(a failure because of --mlrepro-strict)")
        if end == "skip":
            pytest.skip(text)
        raise MlreproFailure(text)

    def set_verdict(self, verdict: str) -> None:
        """A verdict for an item whose check gave none (a time limit ended it)."""
        row = self.row or self.row_head()
        self.row = row if row.verdict is not None else replace(row, verdict=verdict)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, MlreproFailure):
            return str(excinfo.value)
        if isinstance(excinfo.value, pytest.fail.Exception) and "from pytest-timeout" in str(
            excinfo.value
        ):  # pytest-timeout's signal-mode failure
            return self._timed_out(excinfo)
        try:
            return super().repr_failure(excinfo, style=style)
        except TypeError:
            # A signal handler's exception (pytest-timeout's, say) raised at an instruction that
            # has no line number leaves a traceback entry whose tb_lineno is None; pytest's
            # formatter subtracts from it and the session ends in an INTERNALERROR. Python's own
            # format prints such an entry: the failure is reported, the session goes on.
            return "".join(traceback.format_exception(excinfo.value)).rstrip()

    def failure_line(self, text: str) -> int | None:
        """The manifest line of a failure: the one its text names (``<manifest>:<line>: ...``), else
        the blamed field's, else the verdict's block's (``model``: the results drifted)."""
        leading = _LEADING_PLACE.match(text)
        if leading and leading["file"] == display_path(self.config, self.path):
            return int(leading["line"])
        verdict = "" if self.row is None else self.row.verdict
        block = _VERDICT_BLOCKS.get(str(verdict), self.kind if self.kind != "accuracy" else "")
        blamed = self.blamed or block or "model"
        lines = self.manifest.lines
        # inputs[0].preprocess[2].scale.divisor as the manifest's key path
        path = tuple(name or int(index) for name, index in _KEY.findall(blamed))
        for cut in range(len(path), 0, -1):  # the field, else the closest key above it
            if path[:cut] in lines:
                return lines[path[:cut]]
        return lines.get(("model",))

    def locate_failure(self, report: pytest.TestReport) -> None:
        """A failed call's ``location`` (what GitHub annotations and IDEs use) and crash line
        (``--tb=line``) set to its manifest line."""
        if not (report.failed and report.when == "call" and isinstance(report.longrepr, str)):
            return
        line = self.failure_line(report.longrepr)
        if line is None:
            return
        path, _, domain = report.location
        report.location = (path, line - 1, domain)  # pytest's locations count from 0
        located = LocatedFailure(report.longrepr)
        first = report.longrepr.splitlines()[0] if report.longrepr else ""
        shown = display_path(self.config, self.path)
        located.reprcrash = FailurePlace(shown, line, first.removeprefix(f"{shown}:{line}: "))
        report.longrepr = located

    def _timed_out(self, excinfo: pytest.ExceptionInfo[BaseException]) -> str:
        """pytest-timeout's failure in a few lines (not its ~1,400-line traceback): the limit,
        where the item was, and the plugin's own limit, which stops an evaluation cleanly."""
        self.set_verdict("timeout")
        stdlib = sysconfig.get_paths()["stdlib"]
        ours = [
            e for e in excinfo.traceback
            if not str(e.path).startswith(stdlib)
            and "pytest_timeout" not in str(e.path) and "_pytest" not in str(e.path)
        ]  # fmt: skip
        where = (
            f"\n  it was in {ours[-1].path}:{ours[-1].lineno + 1} ({ours[-1].name})" if ours else ""
        )
        shown = display_path(self.config, self.path)
        return (
            f"{shown} [{self.device}]: {excinfo.value}{where}\n"
            "  (--mlrepro-timeout, or the manifest's runtime.timeout_s, stops an evaluation "
            "cleanly and names its phase)"
        )

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, 0, f"{self.manifest.name}::{self.name}"


class EvaluatingItem(ManifestItem):
    """An item that evaluates the manifest over its data set (or shard), under a time limit."""

    def __init__(
        self, *, manifest: Manifest, device: str, shard: Shard | None = None, **kwargs: Any
    ) -> None:
        super().__init__(manifest=manifest, device=device, **kwargs)
        # The samples evaluated: a shard item's shard, else the run's (--mlrepro-shard), else all.
        self.shard = shard if shard is not None else options(self.config).shard

    def parameters(self) -> dict[str, str]:
        shard = {} if self.shard is None else {"shard": f"{self.shard.index}/{self.shard.count}"}
        return {**super().parameters(), **shard}

    @property
    def timeout_factor(self) -> int:
        """How many evaluations the item makes (its time limit is per evaluation)."""
        return 1

    def explain_build(self, exc: BuildMismatch) -> str:
        """The mismatch, compared with the machine the golden was recorded on."""
        settings = self.config.stash[settings_key]
        path = golden_store.golden_path(self.manifest, settings)
        try:
            golden = golden_store.read(path, settings.golden_dir)
        except (GoldenError, OSError):
            golden = None
        env = golden.environment if golden is not None else None
        return explain_build_mismatch(exc, env, display_path(self.config, path))


MIN_INTERVAL_S = 0.5


class TerminalProgress:
    """A ``Progress`` callable (evaluation/_evaluate.py) for one item; use as a context manager."""

    def __init__(self, config: pytest.Config, total: int) -> None:
        self.config = config
        self.total = total
        self.shown = 0  # characters of progress on the terminal line now
        self.last = 0.0
        self.stream = self._terminal(config)

    @staticmethod
    def _terminal(config: pytest.Config) -> TextIO | None:  # None: progress not shown
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or not reporter.isatty or hasattr(config, "workerinput"):
            return None
        if config.pluginmanager.has_plugin("dsession"):  # the xdist controller
            return None
        # The stream pytest's terminal writer writes to (it has no public name for it).
        return config.get_terminal_writer()._file

    def __enter__(self) -> TerminalProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self._show("")

    def __call__(self, done: int) -> None:
        now = time.monotonic()
        if self.stream is None or (now - self.last < MIN_INTERVAL_S and done < self.total):
            return
        self.last = now
        self._show(f" {done}/{self.total} samples")

    def _show(self, text: str) -> None:
        """Replace what is shown with ``text``, leaving the cursor where pytest left it."""
        if self.stream is None or not (text or self.shown):
            return
        writer = self.config.get_terminal_writer()
        if text and writer.width_of_current_line + len(text) >= writer.fullwidth:
            text = ""  # no room: show nothing rather than wrap
        width = max(len(text), self.shown)
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            # Written past pytest's writer (it counts columns for "[ 50%]"): text, then back.
            self.stream.write(text.ljust(width) + "\b" * width)
            self.stream.flush()
        self.shown = len(text)
