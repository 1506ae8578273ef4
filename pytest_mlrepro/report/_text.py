"""The one aligned text table of the terminal's sections and failure texts."""

from __future__ import annotations

from collections.abc import Sequence

from .._visible import visible


def dash(value: float | None, template: str) -> str:
    """``value`` as ``template`` words it ("-" where there is none)."""
    return "-" if value is None else template.format(value)


def aligned(
    rows: Sequence[Sequence[str]], indent: str = "", marks: Sequence[str] | None = None
) -> list[str]:
    """``rows`` as lines whose columns line up, each followed by its mark in ``marks``. Every cell
    is shown through ``visible``: a cell carries data read from a file, never a control sequence."""
    if not rows:
        return []
    rows = [[visible(cell) for cell in row] for row in rows]
    width = [max(len(row[i]) if i < len(row) else 0 for row in rows) for i in range(len(rows[0]))]
    lines = []
    for index, row in enumerate(rows):
        text = "  ".join(cell.ljust(w) for cell, w in zip(row, width)).rstrip()
        mark = marks[index] if marks is not None and index < len(marks) else ""
        lines.append(indent + text + mark)
    return lines
