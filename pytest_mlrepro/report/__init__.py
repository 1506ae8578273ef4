"""The presentation layer: what a person reads of a run. Failure explanations, the terminal's
sections (summary, latency, reference agreement, golden audit, shards), the one aligned text
table they share, and the HTML view (:mod:`.html`)."""

from __future__ import annotations

from ._latency import explain_latency, fmt_ms, latency_outcome_text
from ._reference import explain_reference
from ._tables import explain, summary_table
from ._terminal import audit_lines, latency_table, reference_lines, shard_lines
from ._text import aligned

__all__ = [
    "aligned",
    "audit_lines",
    "explain",
    "explain_latency",
    "explain_reference",
    "fmt_ms",
    "latency_outcome_text",
    "latency_table",
    "reference_lines",
    "shard_lines",
    "summary_table",
]
