"""Rows from reports: a row comes from a report alone (its row attribute, JSON as xdist carries
it), never from the item, so that an xdist controller gathers the same rows as one process."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from ..results import PerSample, Row, record, row_of
from ._base import BENCHMARKS_ATTR, PER_SAMPLE_ATTR, ROW_ATTR, SPLIT_ATTR


def results_row(report: pytest.TestReport, keep_split: bool = False) -> Row | None:
    """An item's typed row from its report (the call, or a skip at setup); None for other
    reports and items of other plugins, and for a split item's shard items (unless
    ``keep_split``): the whole item's merged report stands for them."""
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


def latency_row(
    report: pytest.TestReport, row: Row | None
) -> tuple[Row, list[dict[str, Any]]] | None:
    """A latency item's row (``results_row`` of the report, made once by the caller) and its
    pytest-benchmark entries; None for other reports."""
    benchmarks = getattr(report, BENCHMARKS_ATTR, None)
    if row is None or row.kind != "latency" or not isinstance(benchmarks, list):
        return None
    return row, benchmarks
