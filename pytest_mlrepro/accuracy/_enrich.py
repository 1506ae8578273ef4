"""A golden gains the evidence it lacks without being re-recorded (``--mlrepro-enrich``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..data import Sample
from ..diagnosis import (
    record_layer_fingerprints,
    record_pixel_identity,
    record_step_fingerprints,
    same_step_outputs,
)
from ..errors import MlreproError
from ..goldens import Golden
from ..manifest import Manifest

# A piece of evidence added or left out: its kind and facts, worded in report/
# (_accuracy_notes.py): ("data checksums", "6") is "data checksums (6 files)".
Evidence = tuple[str, ...]


@dataclass
class Enrichment:
    """The enriched golden (None: nothing to add), what was added, what was left out and why."""

    golden: Golden | None = None
    added: list[Evidence] = field(default_factory=list)
    left_out: list[Evidence] = field(default_factory=list)


def enrich(
    golden: Golden,
    manifest: Manifest,
    samples: Sequence[Sample],
    runner: Any,
    environment: Mapping[str, Any],
    data_files: Mapping[str, str],
    fingerprint_samples: int,
) -> Enrichment:
    """The golden with the evidence it lacks; the caller has checked that the run reproduces it."""
    out = Enrichment()
    steps = manifest.input.preprocess
    changes: dict[str, Any] = {}
    probes = golden.probes
    fresh: dict[str, Any] | None = None
    try:
        fresh = record_step_fingerprints(steps, samples, fingerprint_samples)
    except (MlreproError, OSError) as exc:
        out.left_out.append(("steps unrun", str(exc)))
    if probes is None and fresh is not None:
        probes = fresh
        out.added.append(("step fingerprints",))
    if fresh is not None and probes is not None and "layers" not in probes and runner is not None:
        ids = [str(i) for i in probes.get("samples", [])]
        if probes is not fresh and not same_step_outputs(probes, fresh):
            out.left_out.append(("layers unmatched",))
        else:
            layers = record_layer_fingerprints(runner, manifest, samples, ids)
            if layers is not None:
                probes = {**probes, "layers": layers}
                out.added.append(("layer fingerprints", str(len(layers["rows"]))))
            else:
                out.left_out.append(("layers untraceable",))
    if probes is not golden.probes:
        changes["probes"] = probes
    if golden.data is None and data_files:
        changes["data"] = dict(sorted(data_files.items()))
        out.added.append(("data checksums", str(len(data_files))))
    elif golden.data is not None and dict(data_files) != golden.data:
        # Only reached for a byte change proven to decode to the golden's pixels.
        changes["data"] = dict(sorted(data_files.items()))
        out.added.append(("data refreshed",))
    if golden.pixels is None:
        pixels = record_pixel_identity(steps, samples)
        if pixels is not None:
            changes["pixels"] = pixels
            out.added.append(("pixel identities", str(len(pixels))))
    missing = sorted(set(environment) - set(golden.environment))
    if missing:
        differing = sorted(
            k for k in set(environment) & set(golden.environment)
            if environment[k] != golden.environment[k]
        )  # fmt: skip
        if differing:
            out.left_out.append(("environment foreign", ", ".join(missing), ", ".join(differing)))
        else:
            changes["environment"] = {
                **golden.environment,
                **{k: environment[k] for k in missing},
            }
            out.added.append(("environment fields", ", ".join(missing)))
    if changes:
        out.golden = dataclasses.replace(golden, **changes)
    return out
