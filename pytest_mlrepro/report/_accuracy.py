"""An accuracy item's outcome in words, from the facts the check returns."""

from __future__ import annotations

from .._names import record_command
from ..accuracy import AccuracyOutcome, ReferenceOutcome
from ._reference import explain_reference
from ._tables import explain

STRICT_NOTE = " (a failure because of --mlrepro-strict)"


def stopped_diagnosis(reason: str) -> str | None:
    """The diagnosis a stopped check's row keeps: the model's own failure named."""
    return "the model produced non-finite outputs" if reason == "non-finite outputs" else None


def _reference_text(ref: ReferenceOutcome, outcome: AccuracyOutcome) -> str:
    if ref.check is not None:
        if ref.check.ok:
            return ""
        where = f"{outcome.manifest_shown} [{outcome.device}]"
        return f"{where}: " + explain_reference(ref.check, outcome.classes)
    if ref.missing:  # the reference's own golden is missing: said of this manifest
        return f"{outcome.manifest_shown}: {ref.problem}"
    return ref.problem


def accuracy_outcome_text(outcome: AccuracyOutcome) -> str:
    o, ref = outcome, outcome.reference
    where = f"{o.manifest_shown} [{o.device}]"
    record_cmd = record_command(o.manifest_shown)
    if_intended = f"If the change is intended, record a new golden:\n  {record_cmd}"
    ref_text = "" if ref is None else _reference_text(ref, o)
    not_recorded = (
        f"{ref_text}\n\n{where}: golden not {o.verb} ({o.golden_shown} is left as it was)"
    )
    reason = o.reason
    if reason == "unavailable":  # a failure only under --mlrepro-strict
        return o.message + (STRICT_NOTE if o.end == "fail" else "")
    if reason == "non-finite outputs":
        return f"{where}: {o.message}"
    if reason in ("error", "build mismatch", "golden not written"):
        return o.message
    if reason == "written, reference failed":
        return f"{where}: golden {o.action}: {o.golden_shown}\n{ref_text}"
    if reason in ("reference error", "reference disagreement"):
        return ref_text
    if reason == "reference refused":  # outside the project, not found
        return f"{not_recorded}: the manifest's reference must be usable first"
    if reason == "reference disagreement, not recorded":
        return (
            f"{not_recorded}:\n  the results disagree with the manifest's reference. If they "
            "are right and the reference is not,\n  record them anyway with\n"
            f"    {record_command(o.manifest_shown, '--mlrepro-update-despite-reference')}"
        )
    # A failure of the golden comparison, followed by the reference check's outcome.
    if reason == "no golden":
        text = f"no golden at {o.golden_shown}: record one with\n  {record_cmd}"
        if not o.model_run:
            text += "\n(the model was not run: there is nothing to compare with)"
    elif reason == "golden not a file":
        text = o.message
    elif reason == "golden unreadable":  # there, but it cannot be read
        text = f"{o.message}\n(only --mlrepro-update replaces it: {record_cmd})"
    elif reason == "golden claimed":  # recorded from another manifest, which still claims it
        text = (
            f"{o.manifest_shown}: its golden {o.golden_shown} was recorded from {o.claimed_by}, "
            f"which still claims it: two manifests named {o.name!r} cannot share one golden "
            "file (each --mlrepro-update would overwrite the other's results); give one of "
            "them another 'name' or a 'golden:' path. Nothing was written."
        )
    elif reason == "classes changed":  # nothing to compare sample by sample
        text = (
            f"{where}: the golden {o.golden_shown} was recorded with {o.recorded_classes} "
            f"classes, the model now has {o.classes_now}: its results cannot be compared. "
            + if_intended
        )
        if o.diagnosis is not None:  # a class added or dropped that maps the indices back
            text += "\n\n" + o.diagnosis
    else:  # data changed, drift
        c, change = o.comparison, o.change
        assert c is not None and change is not None
        if reason == "data changed":  # within every tolerance, but on other data
            text = (
                f"{where}: {change.summary()}.\n  The results are within tolerance (top-1 "
                f"{c.golden_top1:.2f} % → {c.now_top1:.2f} %), but a golden measured on other "
                f"data is not a comparison of the same thing.\n{if_intended}"
            )
        else:
            data = change.summary() if change.changed else ""
            text = f"{where}: " + explain(c, o.golden_shown, o.classes, record_cmd, data=data)
        if o.diagnosis is not None:
            text += "\n\n" + o.diagnosis
    if ref_text:
        text += "\n\nreference check:\n" + ref_text
    elif ref is not None and ref.agrees:
        text += "\n\nreference check: agrees with its reference"
    if o.notes:  # an enrichment refused, a byte change that is no data change
        text += "\n\n" + "\n".join(f"note: {note}" for note in o.notes)
    return text
