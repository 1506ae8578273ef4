"""The pictures of a drift: the first differing step's output through the golden pipeline and the
current one, for a few probe samples; the report decides how to show them."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from ..data import Sample
from ..goldens import Golden
from ..manifest import Manifest
from . import _step_fingerprints as probe_store
from ._manifest_diff import recorded_steps

SHOWN = 3  # probe samples whose outputs are shown


@dataclass(frozen=True)
class ProbeOutputs:
    """One probe's output of the first differing step per pipeline (None: no such output)."""

    sample: str
    golden: np.ndarray | None
    now: np.ndarray | None


# Why there are no pictures, or what they cannot show: the recorded preprocessing cannot be
# rebuilt, every step identical, the probes not traced (or a step report's own note); the
# environment changes the golden's own pipeline here; the step added, or removed.
DriftNote = Literal[
    "unbuilt", "identical", "untraced", "environment", "added", "removed", "error", "unrecorded",
    "absent",
]  # fmt: skip


@dataclass
class FirstStepOutputs:
    """The first differing step and its outputs on a few probe samples; ``note`` says why there is
    none, or what the pictures cannot show."""

    first: probe_store.StepDiff | None = None
    golden_index: int | None = None
    now_index: int | None = None
    golden_layout: str = "HWC"
    now_layout: str = "HWC"
    golden_order: str = "RGB"  # the channel order of the shown outputs
    now_order: str = "RGB"
    probes: list[ProbeOutputs] = field(default_factory=list)
    note: DriftNote | None = None
    error: str = ""  # (note "error") why the probes could not be traced
    compared: int = 0  # (note "identical") the probes compared
    environment: probe_store.StepDiff | None = None  # (note "environment")


def first_step_outputs(
    manifest: Manifest,
    golden: Golden,
    samples: Sequence[Sample],
    prefer: Collection[str] = (),
) -> FirstStepOutputs:
    """The outputs of the first step that differs from the golden pipeline's, for ``SHOWN`` probes
    (half from ``prefer`` where possible); never raises: the ``note`` says why not."""
    recorded = recorded_steps(golden.manifest)
    if recorded is None:
        return FirstStepOutputs(note="unbuilt")
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
            return FirstStepOutputs(note=report.note or "identical", error=report.error,
                                    compared=report.probes)  # fmt: skip
        assert probes is not None  # (a step was compared: the block is well formed)
        ids = [i for i in probes["samples"] if i in by_id]
        chosen = probe_store.select(ids, SHOWN, prefer)
        golden_states, now_states = probe_store.states(recorded), probe_store.states(steps)
        golden_index, now_index = report.compared_outputs(first)
        out = FirstStepOutputs(first, golden_index, now_index)
        if golden_index is not None:
            state = golden_states[golden_index]
            out.golden_layout, out.golden_order = state.layout, state.order
        if now_index is not None:
            state = now_states[now_index]
            out.now_layout, out.now_order = state.layout, state.order
        for sample_id in chosen:
            traces = [probe_store.trace(p, by_id[sample_id]) for p in (recorded, steps)]
            shown = [None if i is None else t[i] for t, i in zip(traces, (golden_index, now_index))]
            out.probes.append(ProbeOutputs(sample_id, *shown))
    except Exception as exc:  # a probe that no longer decodes, say: the report says so
        return FirstStepOutputs(note="untraced", error=str(exc))
    if environment is not None:
        out.note, out.environment = "environment", environment
    elif first.status in ("added", "removed"):
        out.note = "added" if first.status == "added" else "removed"
    return out
