"""The identity of each file's decoded pixels: what tells a byte change that is not a data change
(a JPEG comment added, a PNG stored under a ``.JPEG`` name, an ICC profile inserted) from one
that is.

A golden keeps, per sample, 16 hex digits of the sha256 of the decode step's output (its
``pixels`` block; :func:`record`). When a file's bytes differ from the golden's, it is decoded
again (only the changed files) and its hash compared with the golden's: the same pixels are the
same input to the model. A golden recorded before the block falls back on its step probes,
whose decode fingerprints hash the same output the same way; a changed file that neither
covers is unknown, and stays a data change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..data import Sample
from ..pipeline import Step
from ._step_fingerprints import decode_fingerprints, digest, trace


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


def _probe_digests(probes: Any) -> dict[str, str]:
    """{sample id: decode hash} from a golden's step probes (older goldens' only evidence)."""
    found = decode_fingerprints(probes).items()
    return {i: fp["sha256"] for i, fp in found if isinstance(fp.get("sha256"), str)}


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
    known = {**_probe_digests(probes), **(pixels or {})}
    by_id = {s.id: s for s in samples}
    same: list[str] = []
    differ: list[str] = []
    unknown: list[str] = []
    for sample_id in changed:
        sample, then = by_id.get(sample_id), known.get(sample_id)
        if decode is None or sample is None or then is None:
            unknown.append(sample_id)
            continue
        try:
            now = pixel_digest(decode, sample)
        except Exception:  # a file that no longer decodes is not the golden's pixels
            differ.append(sample_id)
            continue
        (same if now == then else differ).append(sample_id)
    return PixelCheck(same, differ, unknown)


__all__ = ["PixelCheck", "check", "pixel_digest", "record"]
