"""The pictures of a drift: the golden pipeline's and the current pipeline's output of the first
preprocessing step that differs, for a few probe samples.

The golden keeps the manifest it was recorded with, so its preprocessing can be rebuilt
(:func:`~._manifest_diff.recorded_steps`) and re-run here, step by step
(:func:`~._step_fingerprints.trace`). Which step differs first is the step fingerprints' answer
(:func:`~._step_fingerprints.compare_steps`, the same one the diagnosis text gives); for a golden
recorded before it kept step fingerprints, the recorded pipeline's fingerprints on the shown
probe samples are made here and compared the same way.

Only a drifted item asks for this (and only when an HTML report is written): the arrays are
returned as they are, and the report decides how to show them.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..data import Sample
from ..goldens import Golden
from ..manifest import Manifest
from . import _step_fingerprints as probe_store
from ._manifest_diff import recorded_steps

SHOWN = 3  # probe samples whose outputs are shown


@dataclass(frozen=True)
class ProbeOutputs:
    """One probe sample's output of the first differing step, through each pipeline (None where
    that pipeline has no such output)."""

    sample: str
    golden: np.ndarray | None
    now: np.ndarray | None


@dataclass
class FirstStepOutputs:
    """The first differing step and its outputs on a few probe samples.

    ``first`` is None when no step differs (or none could be compared); ``note`` says why, or
    adds what the pictures cannot show (an environment that changes the golden's own pipeline).
    The indexes are of the outputs shown (``StepReport.compared_outputs``)."""

    first: probe_store.StepDiff | None = None
    golden_index: int | None = None
    now_index: int | None = None
    golden_layout: str = "HWC"
    now_layout: str = "HWC"
    golden_order: str = "RGB"  # the channel order of the shown outputs
    now_order: str = "RGB"
    probes: list[ProbeOutputs] = field(default_factory=list)
    note: str = ""


def first_step_outputs(
    manifest: Manifest,
    golden: Golden,
    samples: Sequence[Sample],
    prefer: Collection[str] = (),
) -> FirstStepOutputs:
    """The outputs of the first preprocessing step whose output differs from the golden
    pipeline's, for ``SHOWN`` probe samples (half of them, where possible, from ``prefer``: the
    samples whose prediction changed). Never raises for a pipeline that cannot run: the
    ``note`` says so."""
    recorded = recorded_steps(golden.manifest)
    if recorded is None:
        return FirstStepOutputs(
            note="the golden's recorded preprocessing cannot be rebuilt here (a step it names "
            "is not registered in this run)"
        )
    steps = tuple(manifest.input.preprocess)
    by_id = {s.id: s for s in samples}
    try:
        probes = golden.probes
        if not isinstance(probes, dict) or probes.get("format") != probe_store.FORMAT:
            # A golden recorded before it kept step fingerprints: the recorded pipeline's on a
            # few probe samples, made here, stand in for them.
            chosen = probe_store.select(list(by_id), SHOWN, prefer)
            probes = probe_store.record(recorded, [by_id[i] for i in chosen], SHOWN)
        report = probe_store.compare_steps(probes, steps, samples, recorded)
        first, environment = report.first, report.environment_step
        if report.note or first is None:
            same = f"every step's output is identical to the golden's on {report.probes} probes"
            return FirstStepOutputs(note=report.note or same)
        assert probes is not None  # (a step was compared: the block is well formed)
        ids = [i for i in probes["samples"] if i in by_id]
        chosen = probe_store.select(ids, SHOWN, prefer)
        golden_states, now_states = probe_store.states(recorded), probe_store.states(steps)
        golden_index, now_index = report.compared_outputs(first)
        out = FirstStepOutputs(first, golden_index, now_index)
        if golden_index is not None:
            out.golden_layout = golden_states[golden_index].layout
            out.golden_order = golden_states[golden_index].order
        if now_index is not None:
            out.now_layout = now_states[now_index].layout
            out.now_order = now_states[now_index].order
        for sample_id in chosen:
            sample = by_id[sample_id]
            golden_trace = probe_store.trace(recorded, sample)
            now_trace = probe_store.trace(steps, sample)
            out.probes.append(
                ProbeOutputs(
                    sample_id,
                    None if golden_index is None else golden_trace[golden_index],
                    None if now_index is None else now_trace[now_index],
                )
            )
    except Exception as exc:  # a probe that no longer decodes, say: the report says so
        return FirstStepOutputs(note=f"the probe samples could not be traced: {exc}")
    if environment is not None:
        out.note = (
            f"with the golden's own recorded pipeline, this machine's {environment.op} output "
            f"differs from the golden's ({environment.text}): the golden pipeline's pictures "
            "are made here, so they show this machine's outputs, not the recorded ones"
        )
    elif first.status == "added":
        out.note = f"{first.op} is a step the golden's pipeline does not have: its output is "
        out.note += "shown beside the golden pipeline's output of the step before it"
    elif first.status == "removed":
        out.note = f"{first.op} is gone from the current pipeline: the golden pipeline's output "
        out.note += "of it is shown beside the current pipeline's output of the step before it"
    return out
