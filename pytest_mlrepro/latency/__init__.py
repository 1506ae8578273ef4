"""Latency: the timing loop and its statistics, per-hardware goldens, verdicts, and
pytest-benchmark's JSON format."""

from __future__ import annotations

from ._benchjson import document, head_commit
from ._decisions import (
    STALE_RATIO,
    DecisionFacts,
    LatencyDecision,
    golden_outpaced,
    latency_decision,
    latency_golden_stale,
    stale_golden,
)
from ._run import LatencyOutcome, LatencyRequest, run_latency
from ._timing import Judgement

__all__ = [
    "STALE_RATIO",
    "DecisionFacts",
    "Judgement",
    "LatencyDecision",
    "LatencyOutcome",
    "LatencyRequest",
    "document",
    "golden_outpaced",
    "head_commit",
    "latency_decision",
    "latency_golden_stale",
    "run_latency",
    "stale_golden",
]
