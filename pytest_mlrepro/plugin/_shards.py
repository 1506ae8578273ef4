"""Sharding in the plugin: ``--mlrepro-shard I/N`` (this run evaluates shard I of N of every data
set; ``mlrepro merge`` of the N runs gives the verdict), and ``mlrepro_shards = K`` (each accuracy
item is split into K shard items, spread over pytest-xdist's workers like any items, whose parts
the session merges into one verdict for the whole item as soon as all K have arrived).

The merged verdict is a ``pytest.TestReport`` for the whole item's node id, sent through
``pytest_runtest_logreport`` as pytest-xdist sends the report of a crashed worker's item: the
terminal, JUnit XML and the exit status see it as an item's result.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import pytest

from ..data import MAX_SHARDS, Shard
from ._session import PROPERTY_PREFIX, Row, option_or_ini

SPLIT_ATTR = "mlrepro_split"
"""A shard item's report attribute: which whole item it is a part of (see :class:`Split`)."""
PER_SAMPLE_ATTR = "mlrepro_per_sample"
"""An accuracy item's report attribute: its per-sample results (``results.Part`` as JSON). Kept
out of the user properties, which JUnit XML writes out whole: a results file may hold them, a
JUnit file of a 50,000-image data set should not."""


def _setting(config: pytest.Config, name: str) -> str:
    return str(option_or_ini(config, name)).strip()


def run_shard(config: pytest.Config) -> Shard | None:
    """The shard this run evaluates (``--mlrepro-shard I/N`` / ini ``mlrepro_shard``); None:
    the whole data set. A bad value is a usage error."""
    text = _setting(config, "mlrepro_shard")
    if not text:
        return None
    try:
        shard = Shard.parse(text)
    except ValueError as exc:
        raise pytest.UsageError(f"--mlrepro-shard / mlrepro_shard: {exc}") from None
    return None if shard.count == 1 else shard


def item_shards(config: pytest.Config) -> int:
    """How many shard items each accuracy item is split into (``--mlrepro-shards K`` / ini
    ``mlrepro_shards``; 1: not split). Not split under ``--mlrepro-update`` (a golden is recorded
    from every sample) nor when the run is one shard already (``--mlrepro-shard``)."""
    text = _setting(config, "mlrepro_shards") or "1"
    try:
        count = int(text)
    except ValueError:
        raise pytest.UsageError(f"mlrepro_shards: expected a whole number, got {text!r}") from None
    if count < 1:
        raise pytest.UsageError(f"mlrepro_shards: must be at least 1, got {count}")
    if count > MAX_SHARDS:
        # Checked before any item is made: each shard is an item per device.
        raise pytest.UsageError(
            f"mlrepro_shards: at most {MAX_SHARDS} shard items per accuracy item, got {count}"
        )
    if config.getoption("mlrepro_update") or run_shard(config) is not None:
        return 1
    return count


def check_shard_options(config: pytest.Config) -> None:
    """Usage errors before anything runs: a bad shard, or an update of one shard."""
    shard = run_shard(config)
    item_shards(config)
    if shard is not None and config.getoption("mlrepro_update"):
        raise pytest.UsageError(
            f"--mlrepro-update cannot record goldens from shard {shard} of the data: a golden "
            "needs every sample. Run the update without --mlrepro-shard. Nothing was run."
        )


def machine_name(config: pytest.Config) -> str:
    """The machine's name in the results file (``--mlrepro-machine`` / ini ``mlrepro_machine``;
    default: the host name)."""
    import platform

    return _setting(config, "mlrepro_machine") or platform.node() or "unknown"


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
        if not isinstance(value, dict):
            return None
        return cls(**value)


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
    from ._results import results_row

    split = Split.of(report)
    assert split is not None  # only shard items' reports are gathered

    row = results_row(report, keep_split=True) or {}
    row.setdefault("nodeid", report.nodeid)
    row.setdefault("outcome", report.outcome)
    row["shard"] = {"index": split.index, "count": split.count}
    if "verdict" not in row:
        row["verdict"] = "error" if report.failed else report.outcome
    return row


def merged_report(gathering: Gathering, nodeid: str) -> pytest.TestReport:
    """The whole item's report from its shards' reports (all of them, or those that arrived:
    then it fails naming the missing ones)."""
    from ..results import Part, ShardMergeError, combine, merge_shards

    gathering.done.add(nodeid)
    split = gathering.splits[nodeid]
    reports = gathering.reports.get(nodeid, {})
    first = reports[min(reports)]
    rows = [_row(reports[i]) for i in sorted(reports)]
    duration = sum(float(getattr(r, "duration", 0.0) or 0.0) for r in reports.values())
    where = f"{split.manifest_file} [{rows[0].get('device', '?')}]"
    text: str | None = None
    try:
        row = merge_shards(rows)
    except ShardMergeError as exc:
        row = {k: rows[0][k] for k in ("manifest", "device", "framework") if k in rows[0]}
        row.update(outcome="failed", verdict="shards incomplete")
        text = (
            f"{where}: no verdict: {exc}. The whole item's verdict needs every shard item "
            f"(deselected, stopped early or crashed ones included)."
        )
    failed = row.get("failed_shards") or []
    if text is None and row["outcome"] == "failed" and failed:
        named = "\n".join(
            f"  shard {f['shard']}: {f['verdict']} ({f['nodeid']}, see its own report)"
            for f in failed
        )
        text = f"{where}: {len(failed)} of its {split.count} shard items failed:\n{named}"
    elif text is None and row["outcome"] == "failed":
        from ..manifest import Tolerances
        from ..report import explain

        tol = Tolerances(**row["tolerances"])
        parts = [Part.from_json(r["per_sample"]) for r in rows]
        comparison = combine(parts, tol)
        text = (
            f"{where}: "
            + explain(
                comparison,
                str(row.get("golden", "the golden")),
                split.classes,
                f"pytest {split.manifest_file} --mlrepro-update",
                # What changed in the data since the golden, as each shard found it in its part.
                data="; ".join(
                    f"shard {r['shard']['index']}/{r['shard']['count']}: {r['data_changed']}"
                    for r in rows
                    if r.get("data_changed")
                ),
            )
            + f"\n\n(merged from its {split.count} shard items, which do not diagnose a drift: "
            f"for its likely cause run\n  mlrepro diagnose {split.manifest_file})"
        )
    properties: list[tuple[str, object]] = [
        (PROPERTY_PREFIX + key, value)
        for key, value in row.items()
        if key not in ("nodeid", "outcome", "per_sample", "timing")
    ]
    for key, value in (row.get("timing") or {}).items():
        properties.append((f"{PROPERTY_PREFIX}timing.{key}", value))
    fspath, lineno, domain = first.location
    location = (fspath, lineno, domain.replace(f"[shard{split.index}of{split.count}]", ""))
    outcome = row["outcome"]
    longrepr: Any = text
    if outcome == "skipped":
        reason = reports[min(reports)].longrepr
        longrepr = reason if isinstance(reason, tuple) else (fspath, lineno or 0, str(reason))
    report = pytest.TestReport(
        nodeid=nodeid,
        location=location,
        keywords=dict(first.keywords),
        outcome=outcome,
        longrepr=longrepr,
        when="call",
        sections=[],
        duration=duration,
        user_properties=properties,
    )
    if "per_sample" in row:
        setattr(report, PER_SAMPLE_ATTR, row["per_sample"])
    return report


def emit(config: pytest.Config, report: pytest.TestReport) -> None:
    """Send the whole item's report to every reporter (terminal, JUnit XML, the session's
    counters and exit status, this plugin's tables and results file), then its teardown (JUnit
    XML writes an item's properties and closes its test case there)."""
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


def shard_item_name(device: str, index: int, count: int) -> str:
    return f"accuracy[{device}][shard{index}of{count}]"


def summary_lines(config: pytest.Config) -> list[str]:
    """What the terminal says of a run that is one shard (nothing otherwise)."""
    shard = run_shard(config)
    if shard is None:
        return []
    json_target = config.getoption("mlrepro_json")
    keep = f" (this run's: {os.fspath(json_target)})" if json_target else ""
    return [
        f"this run is shard {shard} of every data set: its accuracy items compared their "
        f"shard, their tolerance verdict is the merge's;",
        f"`mlrepro merge` of the results files of all {shard.count} shards gives the "
        f"verdict{keep} (write each with --mlrepro-json).",
    ]


__all__ = [
    "PER_SAMPLE_ATTR",
    "SPLIT_ATTR",
    "Gathering",
    "Split",
    "check_shard_options",
    "emit",
    "item_shards",
    "machine_name",
    "merged_report",
    "run_shard",
    "shard_item_name",
    "summary_lines",
]
