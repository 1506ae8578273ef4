"""When the data changed since the golden: which changed files are still the golden's input, how
the others differ, and whether the change covers the drift.

The identity of each file's decoded pixels tells a byte change that is not a data change (a
JPEG comment added, a PNG stored under a ``.JPEG`` name, an ICC profile inserted) from one that
is. A golden keeps, per sample, 16 hex digits of the sha256 of the decode step's output (its
``pixels`` block; :func:`record`). When a file's bytes differ from the golden's, it is decoded
again (only the changed files) and its hash compared with the golden's: the same pixels are the
same input to the model. A golden recorded before the block falls back on its step probes,
whose decode fingerprints hash the same output the same way; a changed file that neither
covers is unknown, and stays a data change. Of the files that do change the input, the decoded
step probes tell the same pictures re-encoded from other pictures (:func:`how_files_changed`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..data import Sample
from ..goldens import Comparison, DataChange
from ..manifest import Manifest
from ..pipeline import Step
from ._pitfalls import INVERTED
from ._probe_trials import Counterfactual
from ._step_fingerprints import decode_fingerprints, digest, fingerprint, trace
from ._wording import flip_expects, signed


def _decode(steps: Sequence[Step]) -> Step | None:
    return next((s for s in steps if s.op == "decode"), None)


def pixel_digest(decode: Step, sample: Sample) -> str:
    """16 hex digits of the decode step's output for ``sample`` (the step fingerprints' hash)."""
    return digest(trace([decode], sample)[0])


def record(steps: Sequence[Step], samples: Sequence[Sample]) -> dict[str, str] | None:
    """The golden's ``pixels`` block: every sample's decoded-pixel hash, sorted by id; None when
    the pipeline has no decode step or a file does not decode (never costs the golden)."""
    decode = _decode(steps)
    if decode is None or not samples:
        return None
    try:
        return {s.id: pixel_digest(decode, s) for s in sorted(samples, key=lambda s: s.id)}
    except Exception:  # a file that does not decode: the evaluation said so already
        return None


@dataclass(frozen=True)
class PixelCheck:
    """The changed files sorted by what their decoded pixels are: the golden's (``same``),
    others (``differ``), or not known to the golden (``unknown``)."""

    same: list[str] = field(default_factory=list)
    differ: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)


def check(
    pixels: Mapping[str, str] | None,
    probes: Any,
    steps: Sequence[Step],
    samples: Iterable[Sample],
    changed: Sequence[str],
) -> PixelCheck:
    """The ``changed`` files (ids whose sha256 is not the golden's) decoded with the manifest's
    decode step and compared with the golden's decoded-pixel hashes."""
    decode = _decode(steps)
    # The step probes' decode hashes: older goldens' only evidence.
    from_probes = decode_fingerprints(probes).items()
    known = {i: fp["sha256"] for i, fp in from_probes if isinstance(fp.get("sha256"), str)}
    known.update(pixels or {})
    by_id = {s.id: s for s in samples}
    found = PixelCheck()
    for sample_id in changed:
        sample, then = by_id.get(sample_id), known.get(sample_id)
        if decode is None or sample is None or then is None:
            found.unknown.append(sample_id)
            continue
        try:
            now = pixel_digest(decode, sample)
        except Exception:  # a file that no longer decodes is not the golden's pixels
            found.differ.append(sample_id)
            continue
        (found.same if now == then else found.differ).append(sample_id)
    return found


# Block means (16 × 16 grid, 0–255 levels) of a decoded picture re-encoded lossily move by a few
# levels; another picture's move by tens.
_REENCODED_LEVELS = 4.0


def how_files_changed(
    probes: Any, data: DataChange, by_id: Mapping[str, Sample], manifest: Manifest
) -> str:
    """What the changed files among the golden's step probes are, from their decoded pixels
    against the decode fingerprints the golden recorded: the same pixels (a lossless
    re-encoding, or metadata only), the same pictures re-encoded (same size, block means
    within a few levels), or other pictures (then nothing is said: the file list says it)."""
    decode = _decode(manifest.input.preprocess)
    if decode is None:
        return ""
    same, close, levels = 0, 0, 0.0
    for sample_id, then in decode_fingerprints(probes).items():
        sample = by_id.get(sample_id)
        if sample is None or sample.id not in data.ids:
            continue
        try:
            now = fingerprint(trace([decode], sample)[0])
        except Exception:  # a file that no longer decodes: the evidence says so elsewhere
            return ""
        if now.get("sha256") == then.get("sha256"):
            same += 1
            continue
        thumbs = (np.asarray(now.get("thumb"), float), np.asarray(then.get("thumb"), float))
        if list(now.get("shape", [])) != list(then.get("shape", [])) or (
            thumbs[0].shape != thumbs[1].shape
        ):
            return ""
        moved = float(np.abs(thumbs[0] - thumbs[1]).max())
        if moved > _REENCODED_LEVELS:
            return ""
        close += 1
        levels = max(levels, moved)
    if same + close == 0:
        return ""
    if close == 0:
        return (
            f"the {same} changed files among the step probes decode to the very same pixels "
            "as the golden's (re-encoded losslessly, or metadata only)"
        )
    return (
        f"the {same + close} changed files among the step probes are the same pictures "
        f"re-encoded: same size, block means within {levels:.1f} levels of the golden's"
    )


def data_lead(
    data: DataChange,
    comparison: Comparison,
    other: str,
    flip: Counterfactual | None = None,
    how: str = "",
) -> str:
    """The lead when the data changed: what changed (and how, where the decoded probes tell:
    ``how``), then whether it covers the drift. A flip that brings the probes back on the
    changed data is the more specific cause: it leads."""
    parts = "; ".join(data.parts())
    lead = f"Likely cause: the data — {parts}" + (f"; {how}" if how else "")
    moved = [c.id for c in comparison.changed]
    elsewhere = [i for i in moved if i not in data.ids]
    rest = other.removeprefix("Likely cause")
    if flip is not None and data.files and not elsewhere and flip.category == INVERTED:
        # The files are negatives: said as what restores them, not as a step they "need".
        return (
            f"Likely cause: {INVERTED}, in the changed data — {parts}: the new files are "
            f"{flip.label} restores the golden ({flip.agree}/{flip.probes} probe predictions "
            "match)."
        )
    if flip is not None and data.files and not elsewhere and not how:
        # (When the decoded probes show the same pictures re-encoded, that is the change: a
        # flip that happens to bring the probes back on them is no cause.)
        return (
            f"Likely cause: {flip.category or 'preprocessing'}, in the changed data — {parts}, "
            f"and with {flip.label}, {flip.agree}/{flip.probes} probe predictions match the "
            f"golden: the new files need {flip_expects(flip.label)}."
        )
    if moved and not elsewhere:
        return lead + f"; every sample whose prediction changed ({len(moved)}) is among them."
    if elsewhere:
        return (
            lead + f". But {len(elsewhere)} of the {len(moved)} samples whose prediction changed "
            f"have the golden's data, so something else changed too — likely cause{rest}"
        )
    if data.labels and not data.files and not data.added:
        return (
            lead + _label_shift(data) + "; every prediction is the golden's: the accuracy moved "
            "with the labels."
        )
    worst = comparison.max_score_diff_id
    if worst and worst not in data.ids and "score" in comparison.failures:
        return (
            lead + f". But the largest score difference is on {worst}, whose data is the "
            f"golden's, so something else changed too — likely cause{rest}"
        )
    return lead + "."


def _label_shift(data: DataChange) -> str:
    """``: every label shifted by +1`` when the changed labels all moved by one constant (a
    labels file that counts from 1, or counts a background class); else ""."""
    shifts = {c.now - c.golden for c in data.labels}
    if len(shifts) != 1 or len(data.labels) < max(2, data.samples // 2):
        return ""
    k = shifts.pop()
    return (
        f": a label offset, every changed label is the golden's {signed(k)} (with labels shifted "
        f"by {signed(-k)}, they are the golden's)"
    )
