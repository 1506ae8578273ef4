"""An accuracy item's outcomes in words, besides a drift (:func:`._tables.explain`): no golden, a
golden that cannot be used, a changed class count or data set, a golden written (or refused
because of the reference), and the reference check appended to a failure."""

from __future__ import annotations


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
        f"    pytest {manifest} --mlrepro-update --mlrepro-update-despite-reference"
    )


__all__ = [
    "classes_changed",
    "data_changed",
    "golden_claimed",
    "golden_unreadable",
    "golden_written",
    "no_golden",
    "reference_disagreement_record",
    "reference_refused_record",
    "with_reference",
]
