"""From a drift to its likely cause, as facts (data change, counterfactuals, manifest diff, step and
layer fingerprints, environment); report/ words it all; a diagnosis never raises."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ManifestError
from ..evaluation import Evaluation
from ..fingerprint import environment
from ..goldens import Comparison, DataChange, Golden, Results
from ..manifest import Manifest, parse_manifest
from . import _layer_fingerprints as layer_store
from . import _step_fingerprints as probe_store
from ._class_maps import (
    class_count_map,
    class_permutation,
    constant_shift,
    index_map,
    score_transform,
)
from ._data_changes import data_lead, how_files_changed
from ._environment_diff import env_diff, environment_step
from ._lead import MODEL_CAUSES, Facts, Lead, decide, with_layers
from ._manifest_diff import Change, manifest_diff, recorded_steps
from ._probe_trials import (
    SCREEN,
    CounterfactualEvidence,
    run_counterfactuals,
)
from ._step_fingerprints import compare_steps

WIDTH = 100

# The evidence, one type per source: facts, each worded by its renderer in report/, handed in
# (DiagnosisWording): diagnosis/ importing report/ would close the cycle report -> accuracy ->
# diagnosis -> report (pyproject.toml).
Section = tuple[str, list[str]]  # a title and its lines


@dataclass(frozen=True)
class ManifestEvidence:
    """The manifest's edits since the golden's recording."""

    changes: Sequence[Change]


@dataclass(frozen=True)
class StepEvidence:
    """The golden's step probes re-traced; ``changed_probes``: those whose file changed."""

    report: probe_store.StepReport
    changed_probes: Sequence[str] = ()


@dataclass(frozen=True)
class EnvironmentEvidence:
    """The environment's changes since the golden; ``golden_has_flags``: whether the golden
    records the CPU flags, numeric packages and settings (older goldens do not)."""

    changes: Sequence[tuple[str, Any, Any]]
    golden_has_flags: bool


Evidence = (
    DataChange
    | ManifestEvidence
    | StepEvidence
    | layer_store.LayerReport
    | CounterfactualEvidence
    | EnvironmentEvidence
)


@dataclass(frozen=True)
class DiagnosisWording:
    """The words of a diagnosis, which ``report/`` owns (``report.DIAGNOSIS_WORDING``)."""

    section: Callable[[Evidence], Section]
    text: Callable[[DriftDiagnosis, int], str]  # the diagnosis, within a width
    lead: Callable[[Lead], str]


@dataclass(frozen=True)
class DriftDiagnosis:
    """The lead (most likely cause) and the evidence behind it, with its wording."""

    found: Lead
    evidence: tuple[Evidence, ...]  # most telling first
    wording: DiagnosisWording
    probes: int = 0  # the probe samples (every flip that brings the screened ones back runs on all)
    counterfactuals: int = 0
    seconds: float = 0.0
    screen: int = 0  # the probes every flip runs on first

    @property
    def cause(self) -> str:
        """A pitfall category, "environment", "model", "runtime", "unknown" or "error"."""
        return self.found.cause

    @property
    def lead(self) -> str:
        return self.wording.lead(self.found)

    @property
    def sections(self) -> list[Section]:
        """Each evidence's section (title, lines), in order."""
        return [self.wording.section(e) for e in self.evidence]

    @property
    def layer_rows(self) -> list[tuple[int, str, float]]:
        """The layer comparison's (depth, layer, relative difference) rows (the HTML chart)."""
        return [
            (diff.index + 1, diff.name, diff.delta)
            for e in self.evidence
            if isinstance(e, layer_store.LayerReport)
            for diff in e.diffs
        ]

    @property
    def blamed(self) -> str | None:
        """The manifest field the failure is located at: the edit the best restoring flip undoes,
        else the first edit, else the first step that differs; a model cause, ``model``."""
        for e in self.evidence:
            if isinstance(e, CounterfactualEvidence):
                for flip in e.restoring():
                    if flip.reverts:
                        return flip.reverts[0].path
        for e in self.evidence:
            if isinstance(e, ManifestEvidence) and e.changes:
                return e.changes[0].path
        for e in self.evidence:
            if isinstance(e, StepEvidence) and e.report.first is not None:
                index = e.report.first.now_index
                if index is not None:
                    return f"inputs[0].preprocess[{index}]"
        return "model" if self.cause in MODEL_CAUSES else None

    def render(self, width: int = WIDTH) -> str:
        """The text appended to a failure: lead first, then the evidence, within ``width``."""
        return self.wording.text(self, width)


def diagnose(
    manifest: Manifest,
    golden: Golden,
    comparison: Comparison,
    evaluation: Evaluation,
    *,
    wording: DiagnosisWording,
    probes: int = probe_store.PROBES,
    data: DataChange | None = None,
) -> DriftDiagnosis:
    """Reuses ``evaluation``'s loaded model; never raises (a failed diagnosis has cause ``error``).
    ``probes``: samples re-run per counterfactual (0: none); ``data``: None when not known."""
    start = time.perf_counter()
    try:
        changes = manifest_diff(_recorded_plain(golden), manifest.normalized())
        recorded, pre = recorded_steps(golden.manifest), manifest.input.preprocess
        steps = compare_steps(golden.probes, pre, evaluation.samples, recorded)
        trials = run_counterfactuals(
            manifest, golden, comparison, evaluation, recorded, changes, probes, steps
        )
        # With the same pixels going in, where the model's computation changed.
        layers = _trace_layers(manifest, golden, evaluation) if steps.first is None else None
        env_now = environment(evaluation.runner_info)
        env_changes = env_diff(golden.environment, env_now)
        env_step = environment_step(steps, pre, env_now, env_changes)
        transform = score_transform(manifest, golden, comparison, evaluation, changes)
        class_map = constant_shift(golden.results, evaluation.results, evaluation.scores.shape[1])
        permutation = None
        if class_map is None:
            permutation = class_permutation(golden.results, evaluation, manifest.tolerances.score)
        if class_map is None and permutation is None:
            class_map = index_map(golden.results, evaluation.results)
        facts = Facts(
            changes, steps, trials, env_changes, transform, permutation, class_map, env_step
        )
        lead = with_layers(decide(facts), layers)  # a model cause sharpened by the layers
        if data is not None and data.changed:  # the data is the cause, a restoring flip its how
            restored = trials.restoring()
            flip = restored[0] if restored and not restored[0].reverts else None
            by_id = {s.id: s for s in evaluation.samples}
            how = how_files_changed(golden.probes, data, by_id, manifest)
            lead = data_lead(data, comparison, lead, flip, how)
        evidence: tuple[Evidence, ...] = (
            *([data] if data is not None else []),
            ManifestEvidence(changes),
            StepEvidence(steps, _changed_probes(golden, data)),
            *([layers] if layers is not None else []),
            trials,
            EnvironmentEvidence(env_changes, "cpu_flags" in golden.environment),
        )
    except Exception as exc:  # diagnosis is a bonus: never replace the failure it explains
        failed = Lead("error", "error", error=f"{type(exc).__name__}: {exc}")
        return DriftDiagnosis(failed, (), wording)
    baseline = trials.baseline
    return DriftDiagnosis(
        found=lead,
        evidence=evidence,
        wording=wording,
        probes=baseline.probes if baseline is not None else 0,
        screen=min(SCREEN, baseline.probes) if baseline is not None else 0,
        counterfactuals=len(trials.tried),
        seconds=time.perf_counter() - start,
    )


def _recorded_plain(golden: Golden) -> Mapping[str, Any]:
    """The golden's recorded manifest, normalised: schema keys added since count as defaults."""
    try:
        return parse_manifest(golden.manifest, "(recorded manifest)", {}).normalized()
    except ManifestError:
        return golden.manifest


def _trace_layers(
    manifest: Manifest, golden: Golden, evaluation: Evaluation
) -> layer_store.LayerReport | None:
    """The golden's layer probes re-traced on the loaded model (None: no model loaded)."""
    if evaluation.runner is None:
        return None
    block = golden.probes.get("layers") if isinstance(golden.probes, Mapping) else None
    try:
        return layer_store.compare(block, evaluation.runner, manifest, evaluation.samples)
    except Exception as exc:  # report, do not hide the rest
        return layer_store.LayerReport(error=str(exc))


def _changed_probes(golden: Golden, data: DataChange | None) -> list[str]:
    if data is None or golden.probes is None:
        return []
    listed = golden.probes.get("samples")
    return [i for i in listed if i in data.ids] if isinstance(listed, list) else []


def explain_class_count(
    golden: Results, now: Results, recorded: int, classes_now: int, wording: DiagnosisWording
) -> tuple[str, str] | None:
    """(text, cause) for a model whose class count is not the golden's, when a class added or
    dropped at the front or the end brings its predictions back; None otherwise."""
    found = class_count_map(golden, now, recorded, classes_now)
    if found is None:
        return None
    d = DriftDiagnosis(Lead("class count", found.cause, class_map=found), (), wording)
    return d.render(), d.cause
