"""The presentation layer: everything a person reads of a run, worded in one place."""

from __future__ import annotations

from .._names import record_command
from ._accuracy import accuracy_outcome_text, stopped_diagnosis
from ._accuracy_notes import accuracy_words
from ._build_mismatch_text import explain_build_mismatch
from ._determinism import determinism_stopped_text, determinism_text
from ._diagnosis_text import DIAGNOSIS_WORDING
from ._latency import explain_latency, latency_decided_by, latency_outcome_text
from ._matrix_text import csv_text, history_text, markdown
from ._operators import operators_lead, operators_text
from ._phases import phase_lines, phase_table
from ._pitfall_words import pitfall_words
from ._reference import explain_reference
from ._sensitivity_text import sensitivity_text
from ._tables import explain, merged_shards_text, summary_table
from ._terminal import (
    audit_lines,
    latency_table,
    note_lines,
    reference_lines,
    repeat_lines,
    shard_lines,
)
from ._text import aligned

__all__ = [
    "DIAGNOSIS_WORDING",
    "accuracy_outcome_text",
    "accuracy_words",
    "aligned",
    "audit_lines",
    "csv_text",
    "determinism_stopped_text",
    "determinism_text",
    "explain",
    "explain_build_mismatch",
    "explain_latency",
    "explain_reference",
    "history_text",
    "latency_decided_by",
    "latency_outcome_text",
    "latency_table",
    "markdown",
    "merged_shards_text",
    "note_lines",
    "operators_lead",
    "operators_text",
    "phase_lines",
    "phase_table",
    "pitfall_words",
    "record_command",
    "reference_lines",
    "repeat_lines",
    "sensitivity_text",
    "shard_lines",
    "stopped_diagnosis",
    "summary_table",
]
