"""Rows from reports: what each of the session's tables, files and pages is made of. A row comes
from a report alone (its ``mlrepro.*`` properties and attributes), never from the item, so that an
xdist controller, which runs no item, gathers the same rows as a single process."""

from __future__ import annotations

from typing import Any

import pytest

from ..results import Row, row_of
from ._base import LATENCY_ATTR, PER_SAMPLE_ATTR, SPLIT_ATTR, properties


def results_row(report: pytest.TestReport, keep_split: bool = False) -> Row | None:
    """An item's typed row from its report (the call, or a skip at setup), made once, by
    ``results.row_of``, from what the report carries as JSON (an xdist worker's too); None for
    other reports and for items of other plugins, and for the shard items of a split item
    (unless ``keep_split``): the whole item's merged report stands for them."""
    if report.when != "call" and not (report.skipped and report.when == "setup"):
        return None
    if not keep_split and getattr(report, SPLIT_ATTR, None) is not None:
        return None
    row = properties(report)
    if not row:
        return None
    # Measured durations ("timing.<what>") go under one key, apart from results that repeat.
    timing = {k[len("timing.") :]: row.pop(k) for k in list(row) if k.startswith("timing.")}
    if "phases" in timing:
        # The call's duration as pytest measured it, beside the phases that account for it.
        timing["call"] = round(report.duration, 4)
    if timing:
        row["timing"] = timing
    per_sample = getattr(report, PER_SAMPLE_ATTR, None)
    if per_sample is not None:
        row["per_sample"] = per_sample
    row["nodeid"] = report.nodeid
    row["outcome"] = report.outcome
    if "status" not in row or (report.failed and row["status"] not in ("failed", "no golden")):
        # The check's record states its status; an item that ended before its record (a skip,
        # a failure worded by the evaluation, the time limit) or failed after it (a skip made
        # a failure by --mlrepro-strict): pytest's outcome.
        row["status"] = report.outcome
    # How many times the item ran, when more than once: pytest-rerunfailures numbers each
    # attempt's reports ("rerun": the runs before it). "runs", not "attempts": a latency row's
    # attempts are its measurement's.
    earlier = getattr(report, "rerun", 0)
    if isinstance(earlier, int) and earlier > 0:
        row["runs"] = earlier + 1
    return row_of(row)


def reference_row(report: pytest.TestReport) -> dict[str, Any] | None:
    """The reference properties of an item checked against a reference; None for other reports
    and items."""
    if report.when != "call":
        return None
    props = properties(report)
    if "reference_verdict" in props:
        return {**props, "outcome": report.outcome}
    return None


def latency_row(report: pytest.TestReport) -> dict[str, Any] | None:
    """A latency item's results from its report (sent by an xdist worker with it); None for
    other reports."""
    data = getattr(report, LATENCY_ATTR, None)
    if report.when == "call" and isinstance(data, dict):
        return {**data, "nodeid": report.nodeid, "outcome": report.outcome}
    return None
