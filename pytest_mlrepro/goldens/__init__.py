"""The golden store (namespaces, strict validation, atomic writes), the comparison with a golden,
reference goldens, the data identity a golden records and the store's audit."""

from __future__ import annotations

from ..errors import GoldenNotAFile, ReferenceGoldenMissing
from ._audit import conflict_message, golden_conflicts, stale_temp_files, unused_goldens
from ._data_identity import DataChange, data_change
from ._decisions import AccuracyDecision, accuracy_decision
from ._latency_store import Baseline as LatencyBaseline
from ._latency_store import add_profile as add_latency_profile
from ._latency_store import find_baseline as find_latency_baseline
from ._latency_store import golden_file as latency_golden_file
from ._latency_store import record as record_latency_golden
from ._metrics import (
    AnyScores,
    Comparison,
    KeptScores,
    Results,
    Scores,
    accuracy,
    compare,
    comparison_of,
    nonfinite_rows,
    paired_rows,
    require_finite,
    score_diffs,
    score_rows,
    softmax,
    take_scores,
    top_k,
)
from ._reference import (
    ReferenceCheck,
    check_reference,
    reference_results,
)
from ._store import (
    Golden,
    check_owner,
    claimed_by_another,
    golden_path,
    golden_schema,
    manifest_file_of,
    manifest_is_current,
    read,
    read_json,
    rounded_scores,
    write,
)
from ._writer import (
    Based,
    GoldenChanged,
    current_digest,
    golden_lock,
    write_golden,
)

__all__ = [
    "AccuracyDecision",
    "AnyScores",
    "Based",
    "Comparison",
    "DataChange",
    "Golden",
    "GoldenChanged",
    "GoldenNotAFile",
    "KeptScores",
    "LatencyBaseline",
    "ReferenceCheck",
    "ReferenceGoldenMissing",
    "Results",
    "Scores",
    "accuracy",
    "accuracy_decision",
    "add_latency_profile",
    "check_owner",
    "check_reference",
    "claimed_by_another",
    "compare",
    "comparison_of",
    "conflict_message",
    "current_digest",
    "data_change",
    "find_latency_baseline",
    "golden_conflicts",
    "golden_lock",
    "golden_path",
    "golden_schema",
    "latency_golden_file",
    "manifest_file_of",
    "manifest_is_current",
    "nonfinite_rows",
    "paired_rows",
    "read",
    "read_json",
    "record_latency_golden",
    "reference_results",
    "require_finite",
    "rounded_scores",
    "score_diffs",
    "score_rows",
    "softmax",
    "stale_temp_files",
    "take_scores",
    "top_k",
    "unused_goldens",
    "write",
    "write_golden",
]
