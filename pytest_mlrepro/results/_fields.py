"""A row's fields beyond its metrics: the manifest's identity (content, digest, pipeline,
settings), the changed samples and the diagnosis' summary."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ._record import ChangedSample, ChangedSamples, DiagnosisSection, DiagnosisSummary

SETTINGS = ("runtime",)
"""Top-level manifest blocks that say how the model runs, not what it computes."""
NOT_PIPELINE = ("description", "version", "tolerances", "diagnosis", "golden")
"""Top-level manifest fields that are neither the pipeline nor a setting."""
CHANGED_SAMPLES = 100
"""Changed samples a row lists (the count says how many there are in all)."""
LINES = 40
"""Lines kept per diagnosis section (a section's own length is bounded by the diagnosis)."""


def manifest_digest(content: Mapping[str, Any]) -> str:
    """sha256 of a normalised manifest's one serialisation (sorted keys, no spaces)."""
    text = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def manifest_identity(content: Mapping[str, Any]) -> dict[str, Any]:
    """Digest and content, so that two results files can say *what* differs, not only *that*."""
    return {"manifest_digest": manifest_digest(content), "manifest_content": dict(content)}


def settings_of(content: Mapping[str, Any]) -> dict[str, Any]:
    """The run settings of a normalised manifest, flattened (``runtime.intra_op_threads``)."""
    out: dict[str, Any] = {}
    for block in SETTINGS:
        value = content.get(block)
        if isinstance(value, Mapping):
            out.update({f"{block}.{k}": v for k, v in sorted(value.items())})
    return out


def pipeline_of(content: Mapping[str, Any]) -> dict[str, Any]:
    """A normalised manifest without its settings and checks: what is computed."""
    return {k: v for k, v in content.items() if k not in SETTINGS and k not in NOT_PIPELINE}


def pipeline_digest(content: Mapping[str, Any]) -> str:
    """Rows with the same pipeline digest compute the same thing, whatever their thread counts."""
    return manifest_digest(pipeline_of(content))


def flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as ``{"a.b[0].c": leaf}`` (lists of mappings by index)."""
    out: dict[str, Any] = {}
    if isinstance(value, Mapping):
        for k, v in value.items():
            out.update(flat(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(value, list) and any(isinstance(v, (Mapping, list)) for v in value):
        for i, v in enumerate(value):
            out.update(flat(v, f"{prefix}[{i}]"))
    else:
        out[prefix] = value
    return out


def differences(old: Any, new: Any) -> list[tuple[str, Any, Any]]:
    """``(path, old, new)`` per differing leaf, sorted by path (None where one side lacks it)."""
    a, b = flat(old), flat(new)
    return [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def _name(classes: Sequence[str] | None, index: int) -> str:
    if classes and 0 <= index < len(classes):
        return f"{index} {classes[index]}"
    return str(index)


def changed_samples(changed: Sequence[Any], classes: Sequence[str] | None) -> ChangedSamples:
    """The first :data:`CHANGED_SAMPLES` changed samples, classes named, and their count."""
    return ChangedSamples(
        count=len(changed),
        samples=tuple(
            ChangedSample(
                id=str(c.id),
                label=_name(classes, int(c.label)),
                golden=_name(classes, int(c.golden)),
                golden_score=round(float(c.golden_score), 6),
                now=_name(classes, int(c.now)),
                now_score=round(float(c.now_score), 6),
            )
            for c in changed[:CHANGED_SAMPLES]
        ),
    )


def diagnosis_summary(
    lead: str, cause: str, sections: Sequence[tuple[str, Sequence[str]]]
) -> DiagnosisSummary:
    return DiagnosisSummary(
        cause=cause,
        lead=lead,
        sections=tuple(
            DiagnosisSection(str(title), tuple(str(line) for line in lines[:LINES]))
            for title, lines in sections
        ),
    )
