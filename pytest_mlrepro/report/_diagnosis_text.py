"""A diagnosis in words: one renderer per evidence type, and the layout appended to a failure;
handed to the accuracy check (below report/) as :data:`DIAGNOSIS_WORDING`."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

from .._visible import visible
from ..diagnosis import (
    LAYER_TOLERANCE,
    SCREEN,
    Counterfactual,
    CounterfactualEvidence,
    DiagnosisWording,
    DriftDiagnosis,
    EnvironmentEvidence,
    Evidence,
    LayerReport,
    ManifestEvidence,
    Section,
    StepEvidence,
)
from ..goldens import DataChange
from ._diagnosis_lead import (
    LAYER_NOTES,
    alignment_text,
    and_list,
    change_text,
    env_change_text,
    flip_label,
    layers_lead,
    lead_text,
    precision_text,
    rel,
    short_number,
    step_note_words,
    step_text,
)

SHOWN_FLIPS = 6  # counterfactual lines shown
SHOWN_NEUTRAL = 6  # manifest edits that cannot move outputs, named
SHOWN_ENVIRONMENT = 12  # environment changes shown
NO_TRIAL = {
    "off": "counterfactual probes are turned off (probe count 0)",
    "no model": "no loaded model to run counterfactual probes on",
    "disjoint": "no sample of the golden is in this run's data set",
}


def data_section(data: DataChange) -> Section:
    lines = data.parts()
    if not data.files_known:
        lines.append(
            "the golden records no checksum of its files (recorded before pytest-mlrepro kept "
            "them; --mlrepro-update adds them): only labels and the sample set are compared"
        )
    elif not data.changed:
        lines.append(f"unchanged: the {data.samples} files (sha256) and their labels")
    return "the data against the golden's:", lines


def manifest_section(e: ManifestEvidence) -> Section:
    neutral = [c for c in e.changes if c.area == "neutral"]
    body = [change_text(c) for c in e.changes if c.area != "neutral"]
    body = body or ["no change that can move the outputs"]
    if neutral:
        body.append(
            "changes that do not move outputs: "
            + ", ".join(c.path for c in neutral[:SHOWN_NEUTRAL])
            + (" …" if len(neutral) > SHOWN_NEUTRAL else "")
        )
    return "manifest diff against the manifest the golden was recorded with:", body


def step_section(e: StepEvidence) -> Section:
    report, first = e.report, e.report.first
    if report.note or first is None:
        identical = f"every step's output is identical to the golden's on {report.probes} probes"
        lines = [step_note_words(report.note or "", report.error) or identical]
    else:  # resize: mean |Δ| 3.1/255 on 8/8 probes; decode and crop identical
        summary = f"{first.op}: {step_text(first)}"
        if first.status == "removed":
            after = next((s for s in report.steps if s.status in ("differs", "added")), None)
            if after is not None:
                summary += f"; then {after.op}: {step_text(after)}"
        same = [s.op for s in report.steps[: report.steps.index(first)] if s.status == "identical"]
        lines = [summary + (f"; {and_list(same)} identical" if same else "")]
    if report.environment_step is not None:
        env = report.environment_step
        lines.append(
            f"with the golden's own recorded pipeline, this machine's {env.op} output differs "
            f"from the golden's: {step_text(env)}"
        )
    moved = e.changed_probes
    if moved:  # a probe whose file changed differs from its fingerprints because of the data
        lines.append(
            f"{len(moved)} of these probes' data changed since the golden "
            f"({', '.join(moved[:3])}): their steps differ because their files did"
        )
    later = [
        s.op
        for s in report.steps
        if s.status in ("differs", "added", "removed") and s.op not in lines[0]
    ]
    if later:
        lines.append(f"downstream, {', '.join(later)} differ as well")
    on = f", on the golden's {report.probes} step probes" if report.probes else ""
    return f"preprocessing, step by step{on}:", lines


def layer_section(report: LayerReport) -> Section:
    on = f", on the golden's {report.probes} layer probes" if report.probes else ""
    title = f"the model, layer by layer{on}:"
    precision = report.precision
    extra = [f"precision: {precision_text(precision)}"] if precision is not None else []
    if report.error:
        return title, [f"the layers could not be traced: {report.error}", *extra]
    if report.note:
        return title, [LAYER_NOTES.get(report.note) or alignment_text(report), *extra]
    lines = [f"{report.layers} layers aligned {alignment_text(report)}", *extra]
    first = report.first
    if first is None:
        lines.append(
            f"every layer's output is within {LAYER_TOLERANCE:g} of the golden's (relative to "
            "its std): the model computes what it computed"
        )
        return title, lines
    lines.append(layers_lead(report))
    same = sum(1 for d in report.diffs if d.index < first.index)
    lines.append(f"the {same} layers before it are as the golden's")
    shown = [d for d in report.diffs if d.index >= first.index]
    for d in shown[:: max(1, len(shown) // 6)][:6]:
        delta = rel(d.delta)
        lines.append(f"layer {d.index + 1} {visible(d.op)} {visible(d.name)}: {delta}")
    return title, lines


def counterfactual_section(e: CounterfactualEvidence) -> Section:
    baseline = e.baseline
    if not e.tried or baseline is None:
        return "counterfactual probes:", [NO_TRIAL.get(e.note or "", "none could run")]
    ranked = sorted(e.tried, key=Counterfactual.key)
    lines = [
        f"as the manifest is now: {baseline.agree}/{baseline.probes} match"
        f" (max score diff {short_number(baseline.max_diff)})"
    ]
    lines += [_flip_line(c, e) for c in ranked[:SHOWN_FLIPS] if not c.error]
    failed = [c for c in e.tried if c.error]
    rest = len([c for c in ranked if not c.error]) - min(SHOWN_FLIPS, len(ranked))
    if rest > 0:
        lines.append(f"… {rest} more flips, none closer to the golden")
    if failed:
        lines.append(
            f"{len(failed)} flips cannot run on this model/data: "
            + "; ".join(f"{flip_label(c)}: {c.error}" for c in failed[:2])
            + (" …" if len(failed) > 2 else "")
        )
    title = (
        "counterfactual probes (the probe samples re-run with one pitfall flipped, or one "
        f"manifest edit undone, at a time, each on {min(SCREEN, baseline.probes)} probes "
        "first; ✓ = changes the outputs and brings them back to the golden):"
    )
    return title, lines


def _flip_line(c: Counterfactual, e: CounterfactualEvidence) -> str:
    # ✓ only for a flip that changed the probes' outputs and brought them back: a no-op matches
    # whatever the manifest as it is matches, and proves nothing.
    mark = "✓ " if e.restores(c) else ""
    reverts = f" (undoes {', '.join(x.path for x in c.reverts)})" if c.reverts else ""
    noop = ", the same outputs as the manifest as it is" if c.noop else ""
    return (
        f"{mark}with {flip_label(c)}{reverts}: {c.agree}/{c.probes} match"
        f" (max score diff {short_number(c.max_diff)}{noop})"
    )


def environment_section(e: EnvironmentEvidence) -> Section:
    shown = e.changes[:SHOWN_ENVIRONMENT]
    lines = [f"{k}: {env_change_text(k, a, b)}" for k, a, b in shown] or ["none"]
    if len(e.changes) > SHOWN_ENVIRONMENT:
        lines.append(f"… {len(e.changes) - SHOWN_ENVIRONMENT} more")
    if not e.golden_has_flags:
        lines.append(
            "the golden records no CPU flags, numeric packages or settings (recorded before "
            "pytest-mlrepro kept them; the golden's next recording adds them)"
        )
    return "environment diff against the golden's:", lines


# One renderer per evidence type; a type missing here fails loudly in the tests, not silently.
SECTION_RENDERERS: dict[type[Any], Callable[[Any], Section]] = {
    DataChange: data_section,
    ManifestEvidence: manifest_section,
    StepEvidence: step_section,
    LayerReport: layer_section,
    CounterfactualEvidence: counterfactual_section,
    EnvironmentEvidence: environment_section,
}


def evidence_section(evidence: Evidence) -> Section:
    """The section (title, lines) of one piece of evidence, by its type's renderer."""
    return SECTION_RENDERERS[type(evidence)](evidence)


def _wrap(text: str, width: int) -> list[str]:
    return textwrap.wrap(text, width - 2, initial_indent="  ", subsequent_indent="  ")


def diagnosis_text(d: DriftDiagnosis, width: int) -> str:
    """The text appended to a failure: lead first, then the evidence, within ``width``."""
    if d.found.rule == "class count":
        head = "diagnosis (from the golden's recorded top-k and this run's; no model re-run)"
        return "\n".join([head, *_wrap(d.lead, width)])
    if not d.evidence:  # the diagnosis failed: its lead says why
        return d.lead
    head = (
        f"diagnosis ({d.counterfactuals} counterfactuals on {d.probes} probe samples, "
        f"{d.screen} first, {d.seconds:.1f} s)"
    )
    lines = [head, *_wrap(d.lead, width)]
    for title, body in d.sections:
        lines.append("")
        lines += _wrap(title, width)
        for line in body:
            lines += textwrap.wrap(
                line,
                width - 4,
                initial_indent="    ",
                subsequent_indent="        ",
                break_on_hyphens=False,
            ) or [""]
    return "\n".join(lines)


DIAGNOSIS_WORDING = DiagnosisWording(section=evidence_section, text=diagnosis_text, lead=lead_text)
