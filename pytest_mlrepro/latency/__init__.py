"""Latency: the timing loop and its statistics, per-hardware goldens, verdicts, and
pytest-benchmark's JSON format."""

from __future__ import annotations

from ._benchjson import benchmark_entry, document
from ._decisions import (
    STALE_RATIO,
    DecisionFacts,
    LatencyDecision,
    RatioFacts,
    golden_outpaced,
    latency_decision,
    latency_golden_stale,
    stale_golden,
)
from ._measure import (
    Assessment,
    Attempt,
    assess,
    changed_settings,
    conclude,
    decision_facts,
    entry_for,
    key_for,
    measure_attempt,
    ms,
    prepare,
    primary_measurement,
    ratio_facts,
    settings_of,
    stop_rule,
    with_threads,
)
from ._run import LatencyOutcome, LatencyRequest, run_latency
from ._timing import ReferenceWorkload, summarize

__all__ = [
    "STALE_RATIO",
    "Assessment",
    "Attempt",
    "DecisionFacts",
    "LatencyDecision",
    "LatencyOutcome",
    "LatencyRequest",
    "RatioFacts",
    "ReferenceWorkload",
    "assess",
    "benchmark_entry",
    "changed_settings",
    "conclude",
    "decision_facts",
    "document",
    "entry_for",
    "golden_outpaced",
    "key_for",
    "latency_decision",
    "latency_golden_stale",
    "measure_attempt",
    "ms",
    "prepare",
    "primary_measurement",
    "ratio_facts",
    "run_latency",
    "settings_of",
    "stale_golden",
    "stop_rule",
    "summarize",
    "with_threads",
]
