"""Where each item's time went (``timing.phases``, :mod:`pytest_mlrepro._phases`), as the ``-v``
terminal section and the HTML report show it: one row per item, a column per phase that took
time, each cell its wall seconds and, in parentheses, its CPU seconds (every thread's: CPU above
wall is cores kept busy); then the costs the session paid once for all its items."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._phases import PHASES, total
from ..results import Row
from ._text import aligned

Table = tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]
"""A header and its rows, all text."""


def _cell(times: Mapping[str, Any] | None) -> str:
    if not times:
        return "-"
    return f"{float(times['wall']):.2f} ({float(times['cpu']):.2f})"


def phase_table(rows: Sequence[Row], one_time: Mapping[str, Any] | None = None) -> Table:
    """The account of every row that has one, and a last row ``once`` with the session's
    one-time costs; empty rows when no row has an account."""
    accounts: list[tuple[str, float | None, Mapping[str, Any]]] = [
        (row.nodeid.rsplit("/", 1)[-1], row.timing.call, {k: vars(v) for k, v in phases.items()})
        for row in sorted(rows, key=lambda row: row.nodeid)
        if row.timing is not None and (phases := row.timing.phases) is not None
    ]
    if not accounts:
        return (), ()
    if one_time:
        accounts.append(("once for the session", None, one_time))
    seen = {name for *_, account in accounts for name in account}
    names = [name for name in PHASES if name in seen]
    header = ("item", "call s", "phases s", *names)
    body = tuple(
        (
            label,
            "-" if call is None else f"{call:.2f}",
            f"{total(dict(account)):.2f}",
            *(_cell(account.get(name)) for name in names),
        )
        for label, call, account in accounts
    )
    return header, body


def phase_lines(rows: Sequence[Row], one_time: Mapping[str, Any] | None = None) -> list[str]:
    """:func:`phase_table` as the terminal's aligned lines, with what the cells are; none when
    no row has an account."""
    header, body = phase_table(rows, one_time)
    if not body:
        return []
    return [
        "seconds per phase: wall (CPU, every thread's); the phases of an item add up to its call",
        *aligned([header, *body]),
    ]
