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
from ._profile import (
    NoProfile,
    OperatorFindings,
    OperatorProfile,
    OperatorTime,
    ProfileComparison,
    compare_profiles,
    findings_json,
    operator_findings,
    profile_from_json,
    profile_json,
    take_profile,
)
from ._run import LatencyFacts, LatencyOutcome, LatencyRequest, run_latency
from ._timing import HostFactor, Judgement

__all__ = [
    "STALE_RATIO",
    "DecisionFacts",
    "HostFactor",
    "Judgement",
    "LatencyDecision",
    "LatencyFacts",
    "LatencyOutcome",
    "LatencyRequest",
    "NoProfile",
    "OperatorFindings",
    "OperatorProfile",
    "OperatorTime",
    "ProfileComparison",
    "compare_profiles",
    "document",
    "findings_json",
    "golden_outpaced",
    "head_commit",
    "latency_decision",
    "latency_golden_stale",
    "operator_findings",
    "profile_from_json",
    "profile_json",
    "run_latency",
    "stale_golden",
    "take_profile",
]
