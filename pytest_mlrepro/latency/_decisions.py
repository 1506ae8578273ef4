"""What a latency item does once it has measured: record, update, pass or fail."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from ._timing import HostFactor, Judgement


def latency_golden_stale(
    *,
    exact: bool,
    verdict: str,
    missing: Sequence[str],
    settings_changed: bool,
    block_changed: bool,
    outpaced: bool = False,
) -> bool:
    """Whether ``--mlrepro-update`` should rewrite this machine's latency golden."""
    return (
        not exact
        or verdict in ("regression", "faster")
        or bool(missing)
        or settings_changed
        or block_changed
        or outpaced
    )


@dataclass(frozen=True)
class LatencyDecision:
    """``record``: write the golden; ``not recorded``: out of date but the machine was too busy;
    ``pass``: ``text`` is the verdict with its notes."""

    action: Literal["record", "not recorded", "pass", "contended", "inconclusive", "regression"]
    text: str


def latency_decision(
    *,
    update: bool,
    stale: bool,
    quiet: bool,
    exact: bool,
    verdict: str,
    baseline_slug: str,
    missing: Sequence[str],
    assessments: int,
    attempts: int,
) -> LatencyDecision:
    if update and stale:
        if quiet:
            return LatencyDecision("record", "golden updated" if exact else "golden recorded")
        return LatencyDecision("not recorded", "not recorded")
    note = "" if exact else f" (vs {baseline_slug})"
    if assessments > 1:
        note += f" (attempt {assessments} of {attempts})"
    if missing:
        note += f" (not in the golden: {', '.join(missing)})"
    if verdict in ("pass", "faster"):
        return LatencyDecision("pass", verdict + note)
    if verdict == "contended":
        return LatencyDecision("contended", "contended")
    if verdict == "inconclusive":
        return LatencyDecision("inconclusive", "inconclusive")
    return LatencyDecision("regression", "regression")


STALE_RATIO = 0.5
"""A latency golden the machine now beats by more than this (now / golden p50 below it) is stale:
it was most likely recorded on a busy machine, and a tolerance measured against it would let a
real slowdown pass (against a golden twice too slow, even ×2 pass). Flagged, with the command that
re-records it; ``--mlrepro-update`` rewrites such a golden."""


def golden_outpaced(ratio_to_golden: float | None) -> bool:
    """Whether ``now / golden`` (the p50 ratio) is below :data:`STALE_RATIO`."""
    return ratio_to_golden is not None and ratio_to_golden < STALE_RATIO


@dataclass(frozen=True)
class DecisionFacts:
    """What decided a latency verdict, as facts for ``report.latency_decided_by`` to word."""

    verdict: str
    judgements: tuple[tuple[str, Judgement], ...]  # (measurement, judgement): concluding attempt's
    reference_comparable: bool  # the golden's reference workload and today's
    contention: float | None
    max_contention: float
    host: HostFactor | None = None
    host_may_excuse: bool = True


def stale_golden(ratio_to_golden: float | None, command: str) -> dict[str, object] | None:
    """``{"ratio", "command"}`` when the machine beats its golden beyond :data:`STALE_RATIO`."""
    if ratio_to_golden is None or not golden_outpaced(ratio_to_golden):
        return None
    return {"ratio": round(ratio_to_golden, 4), "command": command}
