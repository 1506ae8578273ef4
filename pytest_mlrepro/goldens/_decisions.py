"""What an accuracy item does with its results and its golden: record, update, pass or fail; a
pure function of the facts the item gathered, so that the policy reads in one place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class AccuracyDecision:
    """``record``: write the golden, ``reason`` says why; ``pass``: nothing to write; ``fail``:
    ``reason`` names the failure (``no golden``, ``classes changed`` or ``drift``)."""

    action: Literal["record", "pass", "fail"]
    reason: str


PASS = AccuracyDecision("pass", "")


def accuracy_decision(
    *,
    writes: bool,
    has_golden: bool,
    classes_match: bool = True,
    within_tolerance: bool = False,
    manifest_current: bool = True,
    probes_current: bool = True,
    data_current: bool = True,
    data_identity_recorded: bool = True,
    manifest_file_current: bool = True,
    data_changed: bool = False,
) -> AccuracyDecision:
    """``writes``: ``--mlrepro-update`` on the recording device; ``*_current``: the golden
    records what runs today."""
    # What a missing golden or a failed comparison does: recorded under --mlrepro-update.
    written: Literal["record", "fail"] = "record" if writes else "fail"
    if not has_golden:
        return AccuracyDecision(written, "recorded" if writes else "no golden")
    if not classes_match:
        # Nothing to compare sample by sample: the class indices mean other classes.
        reason = "updated (number of classes changed)" if writes else "classes changed"
        return AccuracyDecision(written, reason)
    if not within_tolerance:
        return AccuracyDecision(written, "updated" if writes else "drift")
    if not writes:
        # A golden measured on other data is not a comparison of the same thing: the change
        # fails, named as such, however little the accuracy moved (DESIGN.md).
        return AccuracyDecision("fail", "data changed") if data_changed else PASS
    # Results within tolerance: a golden is rewritten only when what it records is out of date,
    # the most fundamental reason first.
    if not manifest_current:
        return AccuracyDecision("record", "updated (manifest changed)")
    if not probes_current:
        return AccuracyDecision("record", "updated (step probes added)")
    if not data_current:
        # Results within tolerance on other data (or a golden that predates the data block):
        # the golden records the data it now stands for.
        what = "data identity added" if not data_identity_recorded else "data changed"
        return AccuracyDecision("record", f"updated ({what})")
    if not manifest_file_current:
        return AccuracyDecision("record", "updated (manifest file recorded)")
    return PASS
