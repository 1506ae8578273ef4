"""A latency regression's operators in words: which took the added time, spread or concentrated,
and what changed in kind (fusion, quantisation, op type or provider)."""

from __future__ import annotations

from collections.abc import Sequence

from ..results import Operators, OpTypeShare
from ._text import aligned

SHOWN_KINDS = 6
"""Op types named per line (the results file keeps them all)."""


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.3g} ms" if abs(value) < 100 else f"{value:.0f} ms"


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{share:.0%}"


def _kinds(kinds: Sequence[OpTypeShare], side: str) -> str:
    """Op types with their node count and time on ``side`` (``now`` or ``golden``)."""
    shown = []
    for k in kinds[:SHOWN_KINDS]:
        nodes, ms = (k.now_nodes, k.now_ms) if side == "now" else (k.golden_nodes, k.golden_ms)
        shown.append(f"{k.kind} ({nodes} node{'' if nodes == 1 else 's'}, {_ms(ms)})")
    more = len(kinds) - SHOWN_KINDS
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def operators_text(ops: Operators, enrich_cmd: str = "", update_cmd: str = "") -> list[str]:
    """The lines (indented by two) of a regression's operator diagnosis; ``enrich_cmd`` and
    ``update_cmd`` are offered when the golden has no profile."""
    if not ops.compared:
        if ops.missing == "golden":
            lines = [
                "  which operators got slower: the golden has no operator profile (recorded "
                "before profiles were kept); add one with a run that reproduces the golden:",
                f"    {enrich_cmd}" if enrich_cmd else "    pytest ... --mlrepro-enrich",
            ]
            if update_cmd:
                lines += ["  or record a new golden with it:", f"    {update_cmd}"]
            return lines
        return [f"  which operators got slower: no operator profile for {ops.runtime}: {ops.why}"]
    unit = "operators" if ops.by_node else "op types"
    lines = [
        f"  which operators got slower ({ops.runtime}'s profiler, ms per call): operators "
        f"{_ms(ops.golden_ms)} → {_ms(ops.now_ms)}, +{_ms(ops.added_ms)} added",
    ]
    if not ops.by_node:
        lines.append(
            f"    the graph changed: the nodes run now under their golden names hold "
            f"{_pct(ops.matched)} of the golden's operator time, so {unit} are compared"
        )
    if ops.pattern == "none":
        lines.append(
            "    no operator took more time: the added time is outside the operators "
            f"(the whole call {_ms(ops.golden_call_ms)} → {_ms(ops.now_call_ms)} as profiled)"
        )
    elif not ops.by_node:  # op types: "most operators" would not be what was compared
        lines.append(
            f"    the op types that slowed hold {_pct(ops.slowed)} of the golden's operator "
            f"time; op types the golden did not run took {_pct(ops.new_share)} of the added time"
        )
    elif ops.pattern == "evenly":
        q1, median, q3 = (list(ops.ratios) + [None] * 3)[:3]
        spread = (
            f"×{median:.2f} per operator (half of the time within ×{q1:.2f}–×{q3:.2f})"
            if median is not None and q1 is not None and q3 is not None
            else "slower"
        )
        lines.append(
            f"    most operators, evenly: those that slowed hold {_pct(ops.slowed)} of the "
            f"golden's operator time, {spread}; the 3 largest took {_pct(ops.top3)} of the "
            "added time"
        )
    else:
        lines.append(
            f"    concentrated: the 3 largest took {_pct(ops.top3)} of the added time; the "
            f"operators that took 75% of it hold {_pct(ops.spread)} of the golden's operator "
            "time"
            + (
                f", and operators the golden did not run took {_pct(ops.new_share)}"
                if ops.new_share
                else ""
            )
        )
    if ops.operators:
        n = len(ops.operators)
        lines.append(
            f"    {'this' if n == 1 else 'these'} {n} {unit if n > 1 else unit[:-1]} took "
            f"{_pct(ops.covered)} of the added time:"
        )
        head = ("operator", "op type") if ops.by_node else ("op type",)
        rows = [(*head, "golden", "now", "added", "share")] + [
            (
                *((o.name, o.kind) if ops.by_node else (o.kind,)),
                _ms(o.golden_ms) if o.golden_ms is not None else "not run",
                _ms(o.now_ms) if o.now_ms is not None else "not run",
                f"+{_ms(o.added_ms)}",
                _pct(o.share),
            )
            for o in ops.operators
        ]
        lines += aligned(rows, indent="      ")
    if ops.by_node and ops.kinds:
        shown = ", ".join(f"{k.kind} +{_ms(k.added_ms)} ({_pct(k.share)})" for k in ops.kinds[:6])
        lines.append(f"    by op type: {shown}")
    if ops.unfused:
        lines.append(
            f"    fused operators split apart: {ops.now_nodes} nodes run now, "
            f"{ops.golden_nodes} in the golden"
            + (f"; op types the golden never ran: {_kinds(ops.new_kinds, 'now')}"
               if ops.new_kinds else "")
        )  # fmt: skip
    elif ops.new_kinds:
        lines.append(f"    op types the golden never ran: {_kinds(ops.new_kinds, 'now')}")
    if ops.gone_kinds:
        lines.append(f"    op types no longer run: {_kinds(ops.gone_kinds, 'golden')}")
    if ops.dequantised:
        lines.append(
            "    quantised operators now float: fewer quantised nodes run than in the golden"
        )
    for c in ops.changes[:5]:
        provider = (
            f", {c.golden_provider} → {c.now_provider}"
            if c.golden_provider != c.now_provider
            else ""
        )
        lines.append(f"    {c.name}: {c.golden_kind} → {c.now_kind}{provider} ({c.change})")
    if len(ops.changes) > 5:
        lines.append(f"    and {len(ops.changes) - 5} more nodes run as another kind")
    return lines


def operators_lead(ops: Operators) -> str:
    """One sentence of the diagnosis (the HTML page's summary, a matrix cell's note)."""
    if not ops.compared:
        return (
            "the golden has no operator profile"
            if ops.missing == "golden"
            else f"no operator profile for {ops.runtime}"
        )
    unit = "operators" if ops.by_node else "op types"
    if ops.pattern == "none":
        return "no operator took more time"
    n = len(ops.operators)
    if not ops.by_node:
        kinds = f"{n} op type{'s' if n != 1 else ''}"
        return f"the graph changed: {kinds} took {_pct(ops.covered)} of the added time"
    head = "most operators, evenly" if ops.pattern == "evenly" else "concentrated"
    return f"{head}: {n} {unit if n != 1 else unit[:-1]} took {_pct(ops.covered)} of the added time"
