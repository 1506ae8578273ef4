"""Rows from reports, and ``mlrepro_shards = K``: each accuracy item split into K shard items,
spread over pytest-xdist's workers, whose parts are merged into one verdict once all K arrived."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from .._visible import visible_lines
from ..data import Shard
from ..report import merged_shards_text
from ..results import PerSample, Row, ShardMergeError, merge_shards, record, row_json, row_of
from ._base import PER_SAMPLE_ATTR, ROW_ATTR, SPLIT_ATTR
from ._junit import junit_view


# Rows come from reports alone (the row attribute, JSON as xdist carries it), never from the
# item, so that an xdist controller gathers the same rows as one process.
def results_row(report: pytest.TestReport, keep_split: bool = False) -> Row | None:
    """An item's row from its report (the call, or a skip at setup); None for others, and for
    shard items unless ``keep_split`` (the whole item's merged report stands for them)."""
    if report.when != "call" and not (report.skipped and report.when == "setup"):
        return None
    if not keep_split and getattr(report, SPLIT_ATTR, None) is not None:
        return None
    value = getattr(report, ROW_ATTR, None)
    if not isinstance(value, dict):
        return None
    row = row_of({**value, "nodeid": report.nodeid, "outcome": report.outcome})
    timing = row.timing
    if timing is not None and timing.phases is not None:
        # The call's duration as pytest measured it, beside the phases that account for it.
        timing = replace(timing, call=round(report.duration, 4))
    per_sample = getattr(report, PER_SAMPLE_ATTR, None)
    status = row.status
    if status is None or (report.failed and status not in ("failed", "no golden")):
        # An item that ended before its record (a skip, the time limit) or failed after it (a
        # skip made a failure by --mlrepro-strict): pytest's outcome.
        status = report.outcome
    # How many times the item ran, when more than once: pytest-rerunfailures numbers each
    # attempt's reports ("rerun": the runs before it).
    earlier = getattr(report, "rerun", 0)
    return replace(
        row,
        status=status,
        timing=timing,
        per_sample=record(PerSample, per_sample) if per_sample is not None else row.per_sample,
        runs=earlier + 1 if isinstance(earlier, int) and earlier > 0 else row.runs,
    )


@dataclass(frozen=True)
class Split:
    """What a shard item's reports carry about the whole item it is a part of."""

    nodeid: str  # the whole item's node id
    index: int
    count: int
    manifest_file: str  # shown path, for the merged failure
    classes: list[str] | None  # the data set's class names, once known (for the explanation)

    @classmethod
    def of(cls, report: pytest.TestReport) -> Split | None:
        value = getattr(report, SPLIT_ATTR, None)
        return cls(**value) if isinstance(value, dict) else None


@dataclass
class Gathering:
    """The shard items' final reports, by whole item, until each whole item has all of them."""

    reports: dict[str, dict[int, pytest.TestReport]] = field(default_factory=dict)
    splits: dict[str, Split] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)

    def add(self, report: pytest.TestReport) -> str | None:
        """Keep a shard item's report when it is final (its call, or a setup that did not pass);
        the whole item's node id once every shard of it is in, else None."""
        split = Split.of(report)
        if split is None or split.nodeid in self.done:
            return None
        if report.when != "call" and not (report.when == "setup" and not report.passed):
            return None
        self.reports.setdefault(split.nodeid, {})[split.index] = report
        known = self.splits.get(split.nodeid)
        if known is None or (known.classes is None and split.classes is not None):
            self.splits[split.nodeid] = split
        if len(self.reports[split.nodeid]) == split.count:
            return split.nodeid
        return None

    def pending(self) -> list[str]:
        return sorted(nodeid for nodeid in self.reports if nodeid not in self.done)


def _row(report: pytest.TestReport) -> Row:
    """A shard item's row with its shard and a verdict (what ``merge_shards`` reads)."""
    split = Split.of(report)
    assert split is not None  # only shard items' reports are gathered
    row = results_row(report, keep_split=True)
    if row is None:  # a setup that failed: no properties
        row = row_of({"nodeid": report.nodeid, "outcome": report.outcome})
    verdict = row.verdict if row.verdict is not None else "error" if report.failed else None
    shard = Shard(split.index, split.count)
    return replace(row, shard=shard, verdict=verdict or report.outcome)


def merged_report(gathering: Gathering, nodeid: str) -> pytest.TestReport:
    """The whole item's report from its shards' (failing, naming them, when some did not arrive)."""
    gathering.done.add(nodeid)
    split = gathering.splits[nodeid]
    reports = gathering.reports.get(nodeid, {})
    first = reports[min(reports)]
    rows = [_row(reports[i]) for i in sorted(reports)]
    duration = sum(float(getattr(r, "duration", 0.0) or 0.0) for r in reports.values())
    where = f"{split.manifest_file} [{rows[0].device or '?'}]"
    text: str | None = None
    try:
        merged = merge_shards(rows)
    except ShardMergeError as exc:
        merged = Row(
            nodeid=nodeid,
            outcome="failed",
            verdict="shards incomplete",
            manifest=rows[0].manifest,
            device=rows[0].device,
            framework=rows[0].framework,
        )
        text = (
            f"{where}: no verdict: {exc}. The whole item's verdict needs every shard item "
            f"(deselected, stopped early or crashed ones included)."
        )
    if text is None and merged.outcome == "failed":
        text = merged_shards_text(where, merged, rows, split.manifest_file, split.classes)
    row = row_json(merged)
    per_sample = row.pop("per_sample", None)
    fspath, lineno, domain = first.location
    location = (fspath, lineno, domain.replace(f"[shard{split.index}of{split.count}]", ""))
    outcome = row["outcome"]
    longrepr: Any = None if text is None else visible_lines(text)  # data shown, not obeyed
    if outcome == "skipped":
        reason = first.longrepr
        longrepr = reason if isinstance(reason, tuple) else (fspath, lineno or 0, str(reason))
    return pytest.TestReport(
        nodeid=nodeid,
        location=location,
        keywords=dict(first.keywords),
        outcome=outcome,
        longrepr=longrepr,
        when="call",
        sections=[],
        duration=duration,
        user_properties=junit_view(row),
        # Extra attributes, as the session's makereport wrapper gives an item's reports.
        **{ROW_ATTR: row, **({PER_SAMPLE_ATTR: per_sample} if per_sample is not None else {})},
    )


def emit(config: pytest.Config, report: pytest.TestReport) -> None:
    """The whole item's report to every reporter, then its teardown (JUnit XML writes an item's
    properties and closes its test case there)."""
    config.hook.pytest_runtest_logreport(report=report)
    teardown = pytest.TestReport(
        nodeid=report.nodeid,
        location=report.location,
        keywords=report.keywords,
        outcome="passed",
        longrepr=None,
        when="teardown",
        sections=[],
        duration=0.0,
        user_properties=report.user_properties,
    )
    config.hook.pytest_runtest_logreport(report=teardown)
