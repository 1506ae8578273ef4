"""Latency: the timing loop and its statistics, per-hardware goldens, verdicts, and
pytest-benchmark's JSON format."""

from __future__ import annotations

from ._benchjson import benchmark_entry, document
from ._decisions import LatencyDecision, latency_decision, latency_golden_stale
from ._measure import (
    Assessment,
    Attempt,
    Baseline,
    assess,
    changed_settings,
    conclude,
    entry_for,
    explain,
    find_baseline,
    fmt_ms,
    golden_file,
    key_for,
    measure_attempt,
    ms,
    prepare,
    record,
    settings_of,
    stop_rule,
    with_threads,
)
from ._timing import ReferenceWorkload, summarize

__all__ = [
    "Assessment",
    "Attempt",
    "Baseline",
    "LatencyDecision",
    "ReferenceWorkload",
    "assess",
    "benchmark_entry",
    "changed_settings",
    "conclude",
    "document",
    "entry_for",
    "explain",
    "find_baseline",
    "fmt_ms",
    "golden_file",
    "key_for",
    "latency_decision",
    "latency_golden_stale",
    "measure_attempt",
    "ms",
    "prepare",
    "record",
    "settings_of",
    "stop_rule",
    "summarize",
    "with_threads",
]
