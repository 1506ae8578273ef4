"""What an accuracy item does with its results and its golden: record, update, pass or fail.

A pure function of facts the item gathered (no pytest, no file access), so that the policy can be
read in one place and tested without running pytest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class AccuracyDecision:
    """``record``: write the golden, ``reason`` says why in words (``recorded``, ``updated
    (manifest changed)``, ...). ``pass``: nothing to write. ``fail``: ``reason`` names the
    failure (``no golden``, ``classes changed`` or ``drift``)."""

    action: Literal["record", "pass", "fail"]
    reason: str


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
    """The decision for one accuracy item.

    :param writes: whether this item may write the golden (``--mlrepro-update``, and the item
        is the manifest's recording device).
    :param has_golden: whether a golden was read.
    :param classes_match: whether the model has as many classes as the golden recorded.
    :param within_tolerance: whether the results match the golden within the tolerances.
    :param manifest_current: whether the manifest the golden records equals today's.
    :param probes_current: whether the golden's per-step fingerprints are those of today's
        pipeline (and of the samples it records).
    :param data_current: whether the data the golden records is the data evaluated now.
    :param data_identity_recorded: whether the golden records its data at all (older goldens
        do not).
    :param manifest_file_current: whether the golden names today's manifest file.
    :param data_changed: whether a file, a label or the sample set differs from the data the
        golden records (a golden without checksums still records its labels and samples).
    """
    if not has_golden:
        return (
            AccuracyDecision("record", "recorded")
            if writes
            else AccuracyDecision("fail", "no golden")
        )
    if not classes_match:
        # Nothing to compare sample by sample: the class indices mean other classes.
        if writes:
            return AccuracyDecision("record", "updated (number of classes changed)")
        return AccuracyDecision("fail", "classes changed")
    if not within_tolerance:
        return (
            AccuracyDecision("record", "updated") if writes else AccuracyDecision("fail", "drift")
        )
    if not writes:
        # A golden measured on other data is not a comparison of the same thing: the change
        # fails, named as such, however little the accuracy moved (DESIGN.md).
        return (
            AccuracyDecision("fail", "data changed")
            if data_changed
            else AccuracyDecision("pass", "")
        )
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
    return AccuracyDecision("pass", "")
