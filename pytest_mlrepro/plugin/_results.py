"""The session's results: one row per item from its ``mlrepro.*`` properties, the terminal
summary table and the results file (``--mlrepro-json``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from ._session import PROPERTY_PREFIX, Row, report_output_error


def results_path(config: pytest.Config) -> Path | None:
    """The --mlrepro-json target (relative to the working directory), None without one."""
    target = config.getoption("mlrepro_json")
    if not target:
        return None
    path = Path(target)
    return path if path.is_absolute() else Path(os.getcwd()) / path


def results_row(report: pytest.TestReport, keep_split: bool = False) -> Row | None:
    """An item's metrics from its report (the call, or a skip at setup); None for other
    reports and for items of other plugins, and for the shard items of a split item (unless
    ``keep_split``): the whole item's merged report stands for them."""
    from ._shards import PER_SAMPLE_ATTR, SPLIT_ATTR

    if report.when != "call" and not (report.skipped and report.when == "setup"):
        return None
    if not keep_split and getattr(report, SPLIT_ATTR, None) is not None:
        return None
    row = {
        k[len(PROPERTY_PREFIX) :]: v
        for k, v in report.user_properties
        if isinstance(k, str) and k.startswith(PROPERTY_PREFIX)
    }
    if not row:
        return None
    # Measured durations ("timing.<what>") go under one key, apart from results that repeat.
    timing = {k[len("timing.") :]: row.pop(k) for k in list(row) if k.startswith("timing.")}
    if timing:
        row["timing"] = timing
    per_sample = getattr(report, PER_SAMPLE_ATTR, None)
    if per_sample is not None:
        row["per_sample"] = per_sample
    row["nodeid"] = report.nodeid
    row["outcome"] = report.outcome
    return row


def summary_section(rows: list[Row]) -> list[str]:
    """The session summary table of the accuracy and determinism items (latency items have a
    table of their own); no lines without such items."""
    from ..report import summary_table

    rows = sorted(rows, key=lambda r: (str(r.get("manifest")), str(r.get("device"))))
    rows = [r for r in rows if r.get("kind") != "latency"]
    return summary_table(rows) if rows else []


def write_results_file(session: pytest.Session, rows: list[Row]) -> None:
    """The results file (format 2, docs/results.md), when --mlrepro-json asks for one."""
    path = results_path(session.config)
    if path is None:
        return
    from .._files import atomic_write_bytes
    from ..errors import OutputError
    from ..fingerprint import environment
    from ..results import FORMAT, created_now
    from ._shards import machine_name, run_shard

    # nodeid last: under xdist reports arrive in any order, and the file must not depend on it.
    rows = sorted(rows, key=lambda r: (str(r.get("manifest")), str(r.get("device")), r["nodeid"]))
    shard = run_shard(session.config)
    payload = {
        "format": FORMAT,
        "created": created_now(),  # the history orders nights by it
        "machine": {"name": machine_name(session.config), "environment": environment()},
        "shard": None if shard is None else shard.as_json(),
        "results": rows,
    }
    text = json.dumps(payload, indent=2, sort_keys=True, allow_nan=False)
    try:
        atomic_write_bytes(path, (text + "\n").encode(), what="results file (--mlrepro-json)")
    except OutputError as exc:
        report_output_error(session, str(exc))
