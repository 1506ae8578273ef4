"""What a latency item does once it has measured: record, update, pass or fail.

Pure functions of facts the item gathered (no pytest, no file access, no timing), so that the
policy can be read in one place and tested without running pytest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal


def latency_golden_stale(
    *,
    exact: bool,
    verdict: str,
    missing: Sequence[str],
    settings_changed: bool,
    block_changed: bool,
) -> bool:
    """Whether ``--mlrepro-update`` should rewrite this machine's latency golden.

    :param exact: whether the baseline golden is this hardware key's own (not a neighbour's).
    :param verdict: the concluded verdict (``pass``, ``faster``, ``regression``, ``contended``).
    :param missing: measurements the golden lacks.
    :param settings_changed: whether settings differ from the baseline's (threads, version...).
    :param block_changed: whether the manifest's ``latency:`` block differs from the recorded one.
    """
    return (
        not exact
        or verdict in ("regression", "faster")
        or bool(missing)
        or settings_changed
        or block_changed
    )


@dataclass(frozen=True)
class LatencyDecision:
    """``record``: write the golden (``text``: ``golden recorded`` or ``golden updated``).
    ``not recorded``: the golden is out of date but the machine was too busy to record it.
    ``pass``: ``text`` is the verdict with its notes. ``contended``: skipped, the machine was
    too busy to judge. ``regression``: a failure."""

    action: Literal["record", "not recorded", "pass", "contended", "regression"]
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
    """The decision for one latency item compared with a baseline golden.

    :param update: ``--mlrepro-update``.
    :param stale: :func:`latency_golden_stale`.
    :param quiet: whether the concluding attempt ran with little enough contention to record.
    :param exact: whether the baseline is this hardware key's own golden.
    :param verdict: the concluded verdict (``pass``, ``faster``, ``regression``, ``contended``).
    :param baseline_slug: the baseline's hardware key, named when it is a neighbour's.
    :param missing: measurements the golden lacks.
    :param assessments: attempts judged; ``attempts``: attempts allowed.
    """
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
    return LatencyDecision("regression", "regression")
