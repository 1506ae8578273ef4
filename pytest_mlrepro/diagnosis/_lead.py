"""The lead sentence of a diagnosis: the most likely cause, from the flips that bring the probes
back, the manifest's edits, the step fingerprints, the environment diff and the drifts that
keep every ranking, most telling first."""

from __future__ import annotations

from typing import Any

from . import _step_fingerprints as probe_store
from ._class_maps import ClassMap
from ._environment_diff import env_text, model_run_env, relevant_env
from ._manifest_diff import Change
from ._probe_trials import CounterfactualEvidence, reproduces
from ._wording import and_list, flip_expects, short_number

# Causes the layer comparison sharpens: no flip explains the drift, the model computes it.
MODEL_CAUSES = ("model", "runtime", "unknown")


def lead_sentence(
    changes: list[Change],
    steps_report: probe_store.StepReport,
    trials: CounterfactualEvidence,
    env_changes: list[tuple[str, Any, Any]],
    transform: str | None = None,
    permutation: str | None = None,
    class_map: ClassMap | None = None,
    environment_step: str | None = None,
) -> tuple[str, str]:
    """``environment_step``: with the golden's own pipeline run here, the step whose output
    differs from the golden's and the library it runs on, in words (:func:`environment_step`)."""
    model_changes = [c for c in changes if c.area == "model"]
    pre_changes = [c for c in changes if c.area == "preprocess"]
    model_text = ""
    if model_changes:
        # The checksum says it best: a path can move without the model changing.
        telling = [c for c in model_changes if c.path.endswith("sha256")] or model_changes
        model_text = "the model changed (" + "; ".join(c.text() for c in telling[:2]) + ")"
    if class_map is not None:
        # The predictions are the golden's once their class indices are mapped back: whatever
        # else changed, the indices mean other classes now.
        where = f" ({model_text})" if model_text else ""
        return f"Likely cause: {class_map.what}{where}: {class_map.counterfactual}.", (
            class_map.cause
        )
    ranked, score_tol = trials.restoring(), trials.score_tol
    best = ranked[0] if ranked else None
    moving = [c for c in changes if c.area != "neutral"]
    if environment_step is not None and not moving:
        # The manifest is the golden's, yet a step's output is not: what that step runs on
        # changed. A flip that restores the output is a workaround, not the cause: the golden
        # was recorded with the manifest as it is.
        lead = f"Likely cause: the environment — the manifest is unchanged, and {environment_step}."
        if best is not None:
            lead += (
                f" A manifest flip happens to restore the output (with {best.label}, "
                f"{best.agree}/{best.probes} probe predictions match the golden), but the golden "
                "was recorded with the manifest as it is."
            )
        return lead, "environment"
    if best is not None:
        category = best.category or "preprocessing"
        how = (
            "and their scores are within tolerance"
            if reproduces(best, score_tol)
            else f"(max score diff {short_number(best.max_diff)})"
        )
        evidence = (
            f"with {best.label}, {best.agree}/{best.probes} probe predictions match the golden "
            + how
        )
        # Flips that give exactly the same outputs here (nearest and OpenCV's linear on 3×
        # block images): name them, this data cannot tell them apart.
        ties = [
            flip_expects(c.label)
            for c in ranked[1:]
            if c.agree == best.agree and c.probes == best.probes and c.max_diff == best.max_diff
        ]
        if ties:
            verb = "do" if len(ties) > 1 else "does"
            evidence += f" (as {verb} {and_list(ties[:3])}, identical on these probes)"
        if best.reverts:
            edit = " and ".join(c.brief() for c in best.reverts[:2])
            return (
                f"Likely cause: {category} — the manifest {edit}, and {evidence}.",
                category,
            )
        if model_text:
            return (
                f"Likely cause: {category} — {model_text} and the new model expects other "
                f"input: {evidence}.",
                category,
            )
        env = relevant_env(env_changes, steps_report)
        where = f" (the environment changed: {env_text(env)})" if env else ""
        return (
            f"Likely cause: {category} — {evidence}: the model or its golden expects "
            f"{flip_expects(best.label)}{where}.",
            category,
        )
    env_step = steps_report.environment_step
    if transform is not None and env_step is None and steps_report.first is None:
        # Same pixels (or none recorded), same ranking everywhere: the scores were transformed.
        if model_text and not any(c.path.startswith("postprocess") for c in changes):
            # The manifest's transform is as recorded: the new model transforms its scores.
            return (
                f"Likely cause: the score transform — {model_text}, and {transform}.",
                "score transform",
            )
        # The manifest changed its transform: that leads; a model file that changed too kept
        # every ranking.
        also = f"; {model_text} too, with the same ranking" if model_text else ""
        return f"Likely cause: the score transform — {transform}{also}.", "score transform"
    if permutation is not None and steps_report.first is None and not pre_changes:
        # Same pixels, and the scores are the golden's once the classes are mapped back.
        where = f"{model_text}, and " if model_text else ""
        return (
            f"Likely cause: the model's output classes — {where}{permutation}.",
            "class permutation",
        )
    if env_step is not None and not pre_changes:
        env = relevant_env(env_changes, steps_report) or env_changes[:3]
        changed = f", and {env_text(env)}" if env else ""
        return (
            f"Likely cause: the environment — with an unchanged manifest, the {env_step.op} step's "
            f"output differs from the golden's ({env_step.text}){changed}.",
            "environment",
        )
    first = steps_report.first
    if steps_report.probes and first is None and not pre_changes:
        if model_text:
            return (
                f"Likely cause: the model — preprocessing is identical to the golden's on every "
                f"probe, {model_text}, and no known pitfall brings the predictions back.",
                "model",
            )
        runtime = model_run_env(env_changes)[:4] or env_changes[:3]
        where = f": {env_text(runtime)}" if runtime else ""
        return (
            "Likely cause: the model runtime — preprocessing is identical to the golden's on "
            f"every probe, so the outputs changed in the model run{where}.",
            "runtime",
        )
    if model_text and not pre_changes:
        return (
            f"Likely cause: the model — {model_text}, and no known pitfall brings the "
            "predictions back.",
            "model",
        )
    if pre_changes:
        cats = sorted({c.category for c in pre_changes if c.category})
        what = f" ({', '.join(cats)})" if cats else ""
        return (
            f"Likely cause: the manifest's preprocessing edits{what} — "
            + "; ".join(c.text() for c in pre_changes[:2])
            + ", though no single flip brings the probe predictions back.",
            cats[0] if len(cats) == 1 else "preprocessing",
        )
    if first is not None:
        return (
            f"Likely cause unknown — the {first.op} step's output differs from the golden's "
            f"({first.text}) but no known pitfall brings the predictions back.",
            "unknown",
        )
    return (
        "Likely cause unknown — no manifest edit, step difference or known pitfall explains "
        "the drift.",
        "unknown",
    )
