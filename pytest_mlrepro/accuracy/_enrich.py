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


@dataclass
class Enrichment:
    """The enriched golden (None: nothing to add), what was added, and what was left out and
    why (each a phrase)."""

    golden: Golden | None = None
    added: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)


def enrich(
    golden: Golden,
    manifest: Manifest,
    samples: Sequence[Sample],
    runner: Any,
    environment: Mapping[str, Any],
    data_files: Mapping[str, str],
    fingerprint_samples: int,
) -> Enrichment:
    """The golden with the evidence it lacks (module docstring); the caller has checked that
    the run reproduces it."""
    out = Enrichment()
    steps = manifest.input.preprocess
    changes: dict[str, Any] = {}
    probes = golden.probes
    fresh: dict[str, Any] | None = None
    try:
        fresh = record_step_fingerprints(steps, samples, fingerprint_samples)
    except (MlreproError, OSError) as exc:
        out.left_out.append(
            f"step fingerprints (the probes do not run through the pipeline: {exc})"
        )
    if probes is None and fresh is not None:
        probes = fresh
        out.added.append("step fingerprints")
    if fresh is not None and probes is not None and "layers" not in probes and runner is not None:
        ids = [str(i) for i in probes.get("samples", [])]
        if probes is not fresh and not same_step_outputs(probes, fresh):
            out.left_out.append(
                "layer fingerprints (the step probes' preprocessed outputs are not the ones the "
                "golden recorded: the model's input would not be the golden's)"
            )
        else:
            layers = record_layer_fingerprints(runner, manifest, samples, ids)
            if layers is not None:
                probes = {**probes, "layers": layers}
                out.added.append(f"layer fingerprints ({len(layers['rows'])} layers)")
            else:
                out.left_out.append("layer fingerprints (this model's layers cannot be traced)")
    if probes is not golden.probes:
        changes["probes"] = probes
    if golden.data is None and data_files:
        changes["data"] = dict(sorted(data_files.items()))
        out.added.append(f"data checksums ({len(data_files)} files)")
    elif golden.data is not None and dict(data_files) != golden.data:
        # Only reached for a byte change proven to decode to the golden's pixels.
        changes["data"] = dict(sorted(data_files.items()))
        out.added.append("data checksums refreshed (same decoded pixels)")
    if golden.pixels is None:
        pixels = record_pixel_identity(steps, samples)
        if pixels is not None:
            changes["pixels"] = pixels
            out.added.append(f"decoded-pixel identities ({len(pixels)} files)")
    missing = sorted(set(environment) - set(golden.environment))
    if missing:
        differing = sorted(
            k for k in set(environment) & set(golden.environment)
            if environment[k] != golden.environment[k]
        )  # fmt: skip
        if differing:
            out.left_out.append(
                f"environment fields {', '.join(missing)} (this run's environment is not the "
                f"recording's: {', '.join(differing)} differ)"
            )
        else:
            changes["environment"] = {
                **golden.environment,
                **{k: environment[k] for k in missing},
            }
            out.added.append(f"environment fields ({', '.join(missing)})")
    if changes:
        out.golden = dataclasses.replace(golden, **changes)
    return out
