"""From a drift to its likely cause: which pitfall, step or environment change moved the results.

Runs only when an item fails against its golden. A change of the data itself (a file whose
sha256 or label differs from the golden's, ``goldens/_data_identity.py``; how the files changed,
``_data_changes.py``) is named before anything else; then four sources of evidence, most telling
first:

1. **counterfactual probes**: re-run a probe subset (64 samples by default, half of them samples
   whose prediction changed) with one known pitfall flipped at a time (``_pitfalls.py``), and with
   each of the manifest's own edits reverted one at a time, on the model that is already loaded.
   A flip that brings the probe predictions back to the golden names the cause, whether the
   manifest changed or the model did (a model re-exported to expect BGR is found by the BGR flip;
   ``_probe_trials.py``);
2. the **manifest diff** against the manifest the golden was recorded with (``_manifest_diff.py``);
3. the **per-step fingerprints** of the golden's step probes (``_step_fingerprints.py``): the first
   preprocessing step whose output differs, and by how much; and whether this machine reproduces
   the golden's fingerprints with the recorded pipeline (if not, the environment changed them);
4. the **environment diff** (framework and library versions, libjpeg, threads, device, the CPU
   and its ISA flags, the numeric packages and settings; ``_environment_diff.py``).

When every sample's ranking is the golden's and only the scores moved, the lead says so (the
score transform changed: a softmax applied twice, a temperature; ``_score_changes.py``) rather
than naming no cause.

The result is a lead sentence (the most likely cause, ``_lead.py``) followed by the evidence,
readable at 100 columns (this module). Nothing here raises on odd input: a diagnosis that
cannot be made says why.
"""

from __future__ import annotations

import textwrap
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import ManifestError
from ..evaluation import Evaluation
from ..fingerprint import environment
from ..goldens import Comparison, DataChange, Golden
from ..manifest import Manifest, parse_manifest
from . import _layer_fingerprints as layer_store
from . import _step_fingerprints as probe_store
from ._class_maps import constant_shift, index_map
from ._data_changes import data_lead, data_lines, how_files_changed
from ._environment_diff import env_change_text, env_diff, environment_step_text
from ._lead import MODEL_CAUSES, lead_sentence
from ._manifest_diff import manifest_diff, recorded_steps
from ._probe_trials import (
    SCREEN,
    Counterfactual,
    most_moved,
    probe_order,
    restores,
    restoring,
    run_counterfactuals,
)
from ._score_changes import class_permutation, score_transform
from ._wording import short_number

WIDTH = 100
SHOWN = 6  # counterfactual lines shown


@dataclass
class Diagnosis:
    """The lead sentence (most likely cause) and the evidence behind it."""

    lead: str
    cause: str  # a pitfall category, "environment", "model", "runtime" or "unknown"
    sections: list[tuple[str, list[str]]] = field(default_factory=list)
    probes: int = 0  # the probe samples (every flip that brings the screened ones back runs on all)
    counterfactuals: int = 0
    seconds: float = 0.0
    screen: int = 0  # the probes every flip runs on first
    layers: layer_store.LayerReport | None = None  # the model compared layer by layer

    def render(self, width: int = WIDTH) -> str:
        """The text appended to a failure: lead first, then the evidence, within ``width``."""
        head = (
            f"diagnosis ({self.counterfactuals} counterfactuals on {self.probes} probe samples, "
            f"{self.screen} first, {self.seconds:.1f} s)"
        )
        lines = [head]
        lines += textwrap.wrap(self.lead, width - 2, initial_indent="  ", subsequent_indent="  ")
        for title, body in self.sections:
            lines.append("")
            lines += textwrap.wrap(title, width - 2, initial_indent="  ", subsequent_indent="  ")
            for line in body:
                lines += textwrap.wrap(
                    line,
                    width - 4,
                    initial_indent="    ",
                    subsequent_indent="        ",
                    break_on_hyphens=False,
                ) or [""]
        return "\n".join(lines)


def diagnose(
    manifest: Manifest,
    golden: Golden,
    comparison: Comparison,
    evaluation: Evaluation,
    *,
    probes: int = probe_store.PROBES,
    data: DataChange | None = None,
) -> Diagnosis:
    """Explain why ``evaluation`` drifted from ``golden`` (see the module docstring).

    ``probes`` is the number of samples re-run per counterfactual (0: no counterfactuals).
    ``data``: what changed in the data since the golden (None: not known).
    The model in ``evaluation.runner`` is reused; nothing is reloaded or re-verified.
    """
    start = time.perf_counter()
    tol = manifest.tolerances
    now_plain = manifest.normalized()
    try:
        # Keys added to the schema since the recording count as their defaults (not as edits).
        recorded_plain = parse_manifest(golden.manifest, "(recorded manifest)", {}).normalized()
    except ManifestError:
        recorded_plain = golden.manifest
    changes = manifest_diff(recorded_plain, now_plain)
    recorded = recorded_steps(golden.manifest)
    samples = evaluation.samples
    by_id = {s.id: s for s in samples}
    sections: list[tuple[str, list[str]]] = []

    # Step fingerprints: the first step whose output differs from the golden's.
    try:
        steps_report = probe_store.compare_steps(
            golden.probes, manifest.input.preprocess, samples, recorded
        )
    except Exception as exc:  # a probe that no longer decodes, say: report, do not hide the rest
        steps_report = probe_store.StepReport(0, note=f"the step probes could not be traced: {exc}")

    # Counterfactual probes.
    tried: list[Counterfactual] = []
    baseline: Counterfactual | None = None
    cf_note = ""
    shared = [i for i in golden.results.ids if i in by_id]
    if probes <= 0:
        cf_note = "counterfactual probes are turned off (probe count 0)"
    elif evaluation.runner is None:
        cf_note = "no loaded model to run counterfactual probes on"
    elif not shared:
        cf_note = "no sample of the golden is in this run's data set"
    else:
        changed = [c.id for c in comparison.changed]
        if not changed:  # same predictions, scores moved: prefer the samples that moved most
            changed = most_moved(golden.results, evaluation, shared, tol.score)
        ids = probe_order(shared, probes, changed)
        tried, baseline = run_counterfactuals(manifest, golden, evaluation, ids, recorded, changes)

    # Layer fingerprints: with the same pixels going in, where the model's computation changed.
    layer_report = None
    if steps_report.first is None and evaluation.runner is not None:
        block = golden.probes.get("layers") if isinstance(golden.probes, Mapping) else None
        try:
            layer_report = layer_store.compare(block, evaluation.runner, manifest, samples)
        except Exception as exc:  # report, do not hide the rest
            layer_report = layer_store.LayerReport(note=f"the layers could not be traced: {exc}")

    env_now = environment(evaluation.runner_info)
    env_changes = env_diff(golden.environment, env_now)

    transform = score_transform(manifest, golden, comparison, evaluation, changes)
    class_map = constant_shift(golden.results, evaluation.results, evaluation.scores.shape[1])
    permutation = None if class_map else class_permutation(golden.results, evaluation, tol.score)
    if class_map is None and permutation is None:
        class_map = index_map(golden.results, evaluation.results)
    env_step = environment_step_text(steps_report, manifest.input.preprocess, env_now, env_changes)
    lead, cause = lead_sentence(
        changes, steps_report, tried, baseline, env_changes, tol.score, transform, permutation,
        class_map, env_step,
    )  # fmt: skip
    if layer_report is not None and layer_report.precision and cause in MODEL_CAUSES:
        # The model's precision changed: the most specific cause the layers support.
        model_text = next((c.text() for c in changes if c.path.endswith("sha256")), "")
        where = f" ({layer_report.lead()})" if layer_report.first is not None else ""
        lead = (
            f"Likely cause: the model's precision — {layer_report.precision}"
            + (f" (the model changed: {model_text})" if model_text else "")
            + f"{where}."
        )
        cause = "precision"
    elif layer_report is not None and layer_report.first is not None and cause in MODEL_CAUSES:
        lead = lead.removesuffix(".") + "; " + layer_report.lead() + "."
    if data is not None and data.changed:
        restored = restoring(tried, baseline, tol.score)
        flip = restored[0] if restored and not restored[0].reverts else None
        how = how_files_changed(golden.probes, data, by_id, manifest)
        lead, cause = data_lead(data, comparison, lead, flip, how), "data"
    if data is not None:
        sections.append(("the data against the golden's:", data_lines(data)))

    # Evidence.
    shown_changes = [c for c in changes if c.area != "neutral"]
    neutral = [c for c in changes if c.area == "neutral"]
    body = [c.text() for c in shown_changes] or ["no change that can move the outputs"]
    if neutral:
        body.append(
            "changes that do not move outputs: "
            + ", ".join(c.path for c in neutral[:6])
            + (" …" if len(neutral) > 6 else "")
        )
    sections.append(("manifest diff against the manifest the golden was recorded with:", body))

    step_lines = [steps_report.summary()]
    if steps_report.environment_step is not None:
        e = steps_report.environment_step
        step_lines.append(
            f"with the golden's own recorded pipeline, this machine's {e.op} output differs "
            f"from the golden's: {e.text}"
        )
    if data is not None and golden.probes is not None:
        # A probe whose file changed differs from its fingerprints because of the data.
        listed = golden.probes.get("samples")
        moved = [i for i in listed if i in data.ids] if isinstance(listed, list) else []
        if moved:
            step_lines.append(
                f"{len(moved)} of these probes' data changed since the golden "
                f"({', '.join(moved[:3])}): their steps differ because their files did"
            )
    later = [
        s.op
        for s in steps_report.steps
        if s.status in ("differs", "added", "removed") and s.op not in step_lines[0]
    ]
    if later:
        step_lines.append(f"downstream, {', '.join(later)} differ as well")
    sections.append(
        (
            f"preprocessing, step by step, on the golden's {steps_report.probes} step probes:"
            if steps_report.probes
            else "preprocessing, step by step:",
            step_lines,
        )
    )

    if layer_report is not None:
        sections.append(
            (
                f"the model, layer by layer, on the golden's {layer_report.probes} layer probes:"
                if layer_report.probes
                else "the model, layer by layer:",
                layer_report.lines(),
            )
        )

    if tried and baseline is not None:
        ranked = sorted(tried, key=Counterfactual.key)
        lines = [
            f"as the manifest is now: {baseline.agree}/{baseline.probes} match"
            f" (max score diff {short_number(baseline.max_diff)})"
        ]
        for c in ranked[:SHOWN]:
            if c.error:
                continue
            # ✓ only for a flip that changed the probes' outputs and brought them back: a no-op
            # matches whatever the manifest as it is matches, and proves nothing.
            mark = "✓ " if restores(c, baseline, tol.score) else ""
            reverts = f" (undoes {', '.join(x.path for x in c.reverts)})" if c.reverts else ""
            noop = ", the same outputs as the manifest as it is" if c.noop else ""
            lines.append(
                f"{mark}with {c.label}{reverts}: {c.agree}/{c.probes} match"
                f" (max score diff {short_number(c.max_diff)}{noop})"
            )
        failed = [c for c in tried if c.error]
        rest = len([c for c in ranked if not c.error]) - min(SHOWN, len(ranked))
        if rest > 0:
            lines.append(f"… {rest} more flips, none closer to the golden")
        if failed:
            lines.append(
                f"{len(failed)} flips cannot run on this model/data: "
                + "; ".join(f"{c.label}: {c.error}" for c in failed[:2])
                + (" …" if len(failed) > 2 else "")
            )
        sections.append(
            (
                "counterfactual probes (the probe samples re-run with one pitfall flipped, or one "
                f"manifest edit undone, at a time, each on {min(SCREEN, baseline.probes)} probes "
                f"first; ✓ = changes the outputs and brings them back to the golden):",
                lines,
            )
        )
    else:
        sections.append(("counterfactual probes:", [cf_note or "none could run"]))

    env_lines = [f"{k}: {env_change_text(k, a, b)}" for k, a, b in env_changes[:12]] or ["none"]
    if len(env_changes) > 12:
        env_lines.append(f"… {len(env_changes) - 12} more")
    if "cpu_flags" not in golden.environment:
        env_lines.append(
            "the golden records no CPU flags, numeric packages or settings (recorded before "
            "pytest-mlrepro kept them; the golden's next recording adds them)"
        )
    sections.append(("environment diff against the golden's:", env_lines))
    return Diagnosis(
        lead=lead,
        cause=cause,
        sections=sections,
        probes=baseline.probes if baseline is not None else 0,
        screen=min(SCREEN, baseline.probes) if baseline is not None else 0,
        counterfactuals=len(tried),
        seconds=time.perf_counter() - start,
        layers=layer_report,
    )


def explain(
    manifest: Manifest,
    golden: Golden,
    comparison: Comparison,
    evaluation: Evaluation,
    *,
    probes: int = probe_store.PROBES,
    data: DataChange | None = None,
    layers: list[tuple[int, str, float]] | None = None,
    found: list[Diagnosis] | None = None,
) -> tuple[str, str]:
    """(text, cause) of :func:`diagnose`; never raises: a diagnosis that fails says so and the
    verdict it would have explained stands on its own. ``layers``, when given, receives the
    layer comparison's (depth, layer, relative difference) rows (the HTML report's chart);
    ``found`` the :class:`Diagnosis` itself (the results file's summary of it)."""
    try:
        d = diagnose(manifest, golden, comparison, evaluation, probes=probes, data=data)
    except Exception as exc:  # diagnosis is a bonus: never replace the failure it explains
        return f"diagnosis failed ({type(exc).__name__}: {exc})", "error"
    if found is not None:
        found.append(d)
    if layers is not None and d.layers is not None:
        layers.extend(d.layers.chart())
    return d.render(), d.cause


__all__ = [
    "Diagnosis",
    "diagnose",
    "explain",
]
