"""An accuracy item's outcomes in words (:func:`accuracy_outcome_text`, from the facts of an
:class:`~pytest_mlrepro.accuracy.AccuracyOutcome`): a drift (:func:`._tables.explain`), no
golden, a golden that cannot be used, a changed class count or data set, a golden written (or
refused because of the reference), and the reference check appended to a failure."""

from __future__ import annotations

from .._names import record_command
from ..accuracy import AccuracyOutcome, ReferenceOutcome
from ._reference import explain_reference
from ._tables import explain


def no_golden(golden: str, record_cmd: str, model_run: bool = True) -> str:
    """Nothing to compare with (``model_run``: whether the model ran over the data all the
    same)."""
    text = f"no golden at {golden}: record one with\n  {record_cmd}"
    if not model_run:
        text += "\n(the model was not run: there is nothing to compare with)"
    return text


def golden_unreadable(error: str, record_cmd: str) -> str:
    """A golden that is there but cannot be read, and what replaces it."""
    return f"{error}\n(only --mlrepro-update replaces it: {record_cmd})"


def golden_claimed(manifest: str, golden: str, other: str, name: str) -> str:
    """The golden was recorded from another manifest, which still claims it."""
    return (
        f"{manifest}: its golden {golden} was recorded from {other}, which still "
        f"claims it: two manifests named {name!r} cannot share one golden file (each "
        "--mlrepro-update would overwrite the other's results); give one of them "
        "another 'name' or a 'golden:' path. Nothing was written."
    )


def classes_changed(where: str, golden: str, recorded: int, now: int, record_cmd: str) -> str:
    """The model's class count is not the golden's: nothing to compare sample by sample."""
    return (
        f"{where}: the golden {golden} was recorded with "
        f"{recorded} classes, the model now has {now}: its results "
        "cannot be compared. If the change is intended, record a new golden:\n"
        f"  {record_cmd}"
    )


def data_changed(
    where: str, change: str, golden_top1: float, now_top1: float, record_cmd: str
) -> str:
    """Within every tolerance, but measured on other data than the golden's."""
    return (
        f"{where}: {change}.\n"
        f"  The results are within tolerance (top-1 {golden_top1:.2f} % → "
        f"{now_top1:.2f} %), but a golden measured on other data is not a "
        "comparison of the same thing.\n"
        f"If the change is intended, record a new golden:\n  {record_cmd}"
    )


def with_reference(text: str, reference_text: str, agrees: bool | None) -> str:
    """A failure followed by the reference check's outcome, when there is one."""
    if reference_text:
        return text + "\n\nreference check:\n" + reference_text
    if agrees:
        return text + "\n\nreference check: agrees with its reference"
    return text


def golden_written(where: str, action: str, golden: str) -> str:
    return f"{where}: golden {action}: {golden}"


def reference_refused_record(reference_text: str, where: str, verb: str, golden: str) -> str:
    """Nothing recorded: the manifest's reference is unusable (outside the project, not
    found)."""
    return (
        f"{reference_text}\n\n{where}: golden not {verb} ({golden} is "
        "left as it was): the manifest's reference must be usable first"
    )


def reference_disagreement_record(
    reference_text: str, where: str, verb: str, golden: str, manifest: str
) -> str:
    """Nothing recorded: the results disagree with the manifest's reference."""
    return (
        f"{reference_text}\n\n{where}: golden not {verb} ({golden} "
        "is left as it was):\n  the results disagree with the manifest's reference. "
        "If they are right and the reference is not,\n  record them anyway with\n"
        f"    {record_command(manifest, '--mlrepro-update-despite-reference')}"
    )


def reference_outcome_text(ref: ReferenceOutcome, outcome: AccuracyOutcome) -> str:
    """The reference check's outcome as a failure shows it ("" when it agrees)."""
    if ref.check is not None:
        if ref.check.ok:
            return ""
        where = f"{outcome.manifest_shown} [{outcome.device}]"
        return f"{where}: " + explain_reference(ref.check, outcome.classes)
    if ref.missing:  # the reference's own golden is missing: said of this manifest
        return f"{outcome.manifest_shown}: {ref.problem}"
    return ref.problem


def accuracy_outcome_text(outcome: AccuracyOutcome) -> str:
    """The text of an accuracy item that did not pass."""
    o, ref = outcome, outcome.reference
    where = f"{o.manifest_shown} [{o.device}]"
    record_cmd = record_command(o.manifest_shown)
    ref_text = "" if ref is None else reference_outcome_text(ref, o)
    reason = o.reason
    if reason == "written, reference failed":
        return f"{golden_written(where, o.action, o.golden_shown)}\n{ref_text}"
    if reason in ("reference error", "reference disagreement"):
        return ref_text
    if reason == "reference refused":
        return reference_refused_record(ref_text, where, o.verb, o.golden_shown)
    if reason == "reference disagreement, not recorded":
        return reference_disagreement_record(
            ref_text, where, o.verb, o.golden_shown, o.manifest_shown
        )
    if reason == "golden not written":
        return o.message
    # A failure of the golden comparison, followed by the reference check's outcome.
    if reason == "no golden":
        text = no_golden(o.golden_shown, record_cmd, model_run=o.model_run)
    elif reason == "golden not a file":
        text = o.message
    elif reason == "golden unreadable":
        text = golden_unreadable(o.message, record_cmd)
    elif reason == "golden claimed":
        text = golden_claimed(o.manifest_shown, o.golden_shown, o.claimed_by, o.name)
    elif reason == "classes changed":
        text = classes_changed(where, o.golden_shown, o.recorded_classes, o.classes_now, record_cmd)
        if o.diagnosis is not None:  # a class added or dropped that maps the indices back
            text += "\n\n" + o.diagnosis
    else:  # data changed, drift
        c, change = o.comparison, o.change
        assert c is not None and change is not None
        if reason == "data changed":
            text = data_changed(where, change.summary(), c.golden_top1, c.now_top1, record_cmd)
        else:
            data = change.summary() if change.changed else ""
            text = f"{where}: " + explain(c, o.golden_shown, o.classes, record_cmd, data=data)
        if o.diagnosis is not None:
            text += "\n\n" + o.diagnosis
    if ref is not None:
        text = with_reference(text, ref_text, ref.agrees)
    if o.notes:  # an enrichment refused, a byte change that is no data change
        text += "\n\n" + "\n".join(f"note: {note}" for note in o.notes)
    return text


__all__ = [
    "accuracy_outcome_text",
    "classes_changed",
    "data_changed",
    "golden_claimed",
    "golden_unreadable",
    "golden_written",
    "no_golden",
    "record_command",
    "reference_disagreement_record",
    "reference_outcome_text",
    "reference_refused_record",
    "with_reference",
]
