"""When the data changed since the golden: how the changed files differ (the same pixels, the
same pictures re-encoded, or other pictures), and whether the change covers the drift."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..data import Sample
from ..goldens import Comparison, DataChange
from ..manifest import Manifest
from . import _step_fingerprints as probe_store
from ._pitfalls import INVERTED
from ._probe_trials import Counterfactual
from ._wording import flip_expects

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
    decode = next((s for s in manifest.input.preprocess if s.op == "decode"), None)
    if decode is None:
        return ""
    same, close, levels = 0, 0, 0.0
    for sample_id, then in probe_store.decode_fingerprints(probes).items():
        sample = by_id.get(sample_id)
        if sample is None or sample.id not in data.ids:
            continue
        try:
            now = probe_store.fingerprint(probe_store.trace([decode], sample)[0])
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
    lead = "Likely cause: the data — " + "; ".join(data.parts()) + (f"; {how}" if how else "")
    moved = [c.id for c in comparison.changed]
    elsewhere = [i for i in moved if i not in data.ids]
    rest = other.removeprefix("Likely cause")
    if flip is not None and data.files and not elsewhere and flip.category == INVERTED:
        # The files are negatives: said as what restores them, not as a step they "need".
        return (
            f"Likely cause: {INVERTED}, in the changed data — " + "; ".join(data.parts())
            + f": the new files are {flip.label} restores the golden ({flip.agree}/"
            f"{flip.probes} probe predictions match)."
        )  # fmt: skip
    if flip is not None and data.files and not elsewhere and not how:
        # (When the decoded probes show the same pictures re-encoded, that is the change: a
        # flip that happens to bring the probes back on them is no cause.)
        return (
            f"Likely cause: {flip.category or 'preprocessing'}, in the changed data — "
            + "; ".join(data.parts())
            + f", and with {flip.label}, {flip.agree}/{flip.probes} probe predictions match the "
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
    sign = f"+{k}" if k > 0 else f"−{-k}"
    return (
        f": a label offset, every changed label is the golden's {sign} (with labels shifted by "
        f"{'−' if k > 0 else '+'}{abs(k)}, they are the golden's)"
    )
