"""When the data changed since the golden: whether changed files still decode to its pixels or are
the same pictures re-encoded, and whether the change covers the drift."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..data import Sample
from ..goldens import Comparison, DataChange
from ..manifest import Manifest
from ..pipeline import Step
from ._lead import DataFacts, Lead, Reencoding, Rule
from ._pitfalls import INVERTED
from ._probe_trials import Counterfactual
from ._step_fingerprints import decode_fingerprints, digest, fingerprint, trace


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
    """``changed`` ids decoded by the manifest's decode step, against the golden's pixel hashes."""
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
) -> Reencoding | None:
    """How the changed files among the step probes changed: the golden's pixels, or the same
    pictures re-encoded (same size, block means within a few levels); None: other pictures."""
    decode = _decode(manifest.input.preprocess)
    if decode is None:
        return None
    same, close, levels = 0, 0, 0.0
    for sample_id, then in decode_fingerprints(probes).items():
        sample = by_id.get(sample_id)
        if sample is None or sample.id not in data.ids:
            continue
        try:
            now = fingerprint(trace([decode], sample)[0])
        except Exception:  # a file that no longer decodes: the evidence says so elsewhere
            return None
        if now.get("sha256") == then.get("sha256"):
            same += 1
            continue
        thumbs = (np.asarray(now.get("thumb"), float), np.asarray(then.get("thumb"), float))
        if list(now.get("shape", [])) != list(then.get("shape", [])) or (
            thumbs[0].shape != thumbs[1].shape
        ):
            return None
        moved = float(np.abs(thumbs[0] - thumbs[1]).max())
        if moved > _REENCODED_LEVELS:
            return None
        close += 1
        levels = max(levels, moved)
    return Reencoding(same, close, levels) if same + close else None


def data_lead(
    data: DataChange,
    comparison: Comparison,
    other: Lead,
    flip: Counterfactual | None = None,
    how: Reencoding | None = None,
) -> Lead:
    """A flip that brings the probes back on the changed data is the more specific cause."""
    moved = [c.id for c in comparison.changed]
    elsewhere = [i for i in moved if i not in data.ids]
    worst = comparison.max_score_diff_id or ""
    worst = worst if worst not in data.ids and "score" in comparison.failures else ""
    facts = DataFacts(
        tuple(data.parts()), len(moved), len(elsewhere), how, _label_shift(data), worst
    )
    rule: Rule = "data"
    if flip is not None and data.files and not elsewhere and flip.category == INVERTED:
        rule = "data inverted"  # the files are negatives: said as what restores them
    elif flip is not None and data.files and not elsewhere and how is None:
        # (When the decoded probes show the same pictures re-encoded, that is the change: a flip
        # that happens to bring the probes back on them is no cause.)
        rule = "data flip"
    elif moved and not elsewhere:
        rule = "data covers"
    elif elsewhere:
        rule = "data elsewhere"
    elif data.labels and not data.files and not data.added:
        rule = "data labels"
    elif worst:
        rule = "data worst"
    flip = flip if rule in ("data inverted", "data flip") else None
    return Lead(rule, "data", flip=flip, data=facts, other=other)


def _label_shift(data: DataChange) -> int | None:
    """The constant all changed labels moved by (1-based labels, a background class), else None."""
    shifts = {c.now - c.golden for c in data.labels}
    if len(shifts) != 1 or len(data.labels) < max(2, data.samples // 2):
        return None
    return shifts.pop()
