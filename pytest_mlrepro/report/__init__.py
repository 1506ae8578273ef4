"""Text for people: failure explanations and the session summary table."""

from __future__ import annotations

from ._tables import explain, summary_table

__all__ = [
    "explain",
    "summary_table",
]
