"""The lead of a diagnosis in words: one sentence per rule of ``diagnosis/_lead.py``'s decision
table, from the facts its :class:`Lead` carries."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..diagnosis import (
    ABSENT,
    Change,
    ClassMap,
    ClassPermutation,
    DataFacts,
    EnvChange,
    EnvironmentStep,
    Lead,
    ScoreTransform,
    and_list,
    short_number,
    show_value,
    signed,
)


def change_text(c: Change) -> str:
    """One manifest edit as the manifest diff shows it."""
    if c.moved:
        return f"{c.path}: {c.moved} moved from preprocess[{c.old}]"
    if c.old is ABSENT:
        return f"{c.path}: added {show_value(c.new)}"
    if c.new is ABSENT:
        return f"{c.path}: removed (was {show_value(c.old)})"
    return f"{c.path}: {show_value(c.old)} → {show_value(c.new)}"


def change_brief(c: Change) -> str:
    """As a lead sentence says it: ``changed decode.order from 'RGB' to 'BGR'``."""
    if c.moved:
        return f"moved the {c.moved} step from preprocess[{c.old}] to [{c.new}]"
    path = c.path
    if ".preprocess[" in path:
        inside = path.split(".preprocess[", 1)[1]
        path = inside.split("].", 1)[1] if "]." in inside else path
    if c.new is ABSENT:
        return f"removed the step {show_value(c.old)}"
    if c.old is ABSENT:
        return f"added the step {show_value(c.new)}"
    return f"changed {path} from {show_value(c.old)} to {show_value(c.new)}"


def env_change_text(key: str, old: Any, new: Any) -> str:
    """How one environment field changed: ISA flags as ``+avx512f -amx_tile``, a package or
    setting that one side lacks as not installed or unset, else ``old → new``."""
    if key == "cpu_flags" and isinstance(old, list) and isinstance(new, list):
        added = [f"+{f}" for f in new if f not in old]
        removed = [f"-{f}" for f in old if f not in new]
        return " ".join(added + removed)
    absent = {"numeric_packages": "(not installed)", "numeric_settings": "(unset)"}.get(
        key.split(".", 1)[0]
    )
    if absent is not None:
        shown_old = absent if old is None else show_value(old)
        return f"{shown_old} → {absent if new is None else show_value(new)}"
    return f"{show_value(old)} → {show_value(new)}"


def env_text(items: Sequence[EnvChange]) -> str:
    return "; ".join(f"{k} {env_change_text(k, a, b)}" for k, a, b in items)


def flip_expects(label: str) -> str:
    """What a flip says is expected: the part before 'instead of'."""
    return label.split(" instead of ")[0]


def environment_step_text(e: EnvironmentStep) -> str:
    """``the decode step's output differs from the golden's (…): that step runs on Pillow 11.0.0
    (libjpeg-turbo 3.0) here; pillow changed: pillow 10.4.0 → 11.0.0``."""
    if e.changed:
        what = f"{e.library.split(' ')[0]} changed: {env_text(e.changed)}"
    else:
        what = (
            "no recorded version of it changed, so its build or its behaviour did (the same "
            "version built otherwise, patched, or configured otherwise)"
        )
    if e.cpu:
        what += f"; the CPU changed too: {env_text(e.cpu)}"
    if e.others:
        what += f"; other packages changed: {env_text(e.others)}"
    return (
        f"the {e.step.op} step's output differs from the golden's ({e.step.text}): that step runs "
        f"on {e.library} here; {what}"
    )


def class_map_text(m: ClassMap) -> tuple[str, str]:
    """(what the map is, the counterfactual that undoes it)."""
    as_is = f"(as they are, {m.as_is}/{m.total})"
    if m.kind == "shift":
        hint = ""
        if abs(m.k) == 1:
            hint = (
                " (what a 1001-class head with a background class at index 0 gives when it is "
                "sliced at the wrong end, or a labels file that counts from 1)"
            )
        return (
            f"a label offset — every prediction is the golden's class {signed(m.k)}{hint}",
            f"with labels shifted by {signed(-m.k)}, {m.hits}/{m.total} predictions match the "
            f"golden's {as_is}",
        )
    if m.kind == "index":
        shown = ", ".join(f"{old} → {new}" for old, new in m.moved[:4])
        shown += " …" if len(m.moved) > 4 else ""
        left = m.total - m.checked
        unranked = f"the other {left} have classes no other sample ranks; " if left else ""
        return (
            f"a class-index map — the model's output classes follow another index order "
            f"({shown}; {len(m.moved)} of {m.seen} classes seen moved)",
            f"with each prediction mapped back through the map the other samples' top-k give, "
            f"{m.hits}/{m.checked} predictions match the golden's ({unranked}{as_is[1:]}",
        )
    now, recorded = m.classes
    counts = f"the model has {now} output classes, the golden {recorded}"
    what, fix = {  # (a class more, the shift): what the map is, and what undoes it
        (True, 1): (
            f"a background class at index 0 — {counts} (TF-slim style), and every prediction "
            "is the golden's class +1",
            "with the first output dropped (labels shifted by −1)",
        ),
        (True, 0): (
            f"an extra class at the end — {counts}, with the golden's indices kept",
            "with the last output dropped",
        ),
        (False, -1): (
            f"the background class at index 0 is gone — {counts}, and every prediction is the "
            "golden's class −1",
            "with a background class put back at index 0 (labels shifted by +1)",
        ),
        (False, 0): (
            f"the last class is gone — {counts}, with the golden's indices kept",
            "with the indices as they are",
        ),
    }[(now > recorded, m.k)]
    return what, f"{fix}, {m.hits}/{m.total} predictions match the golden's {as_is}"


def permutation_text(p: ClassPermutation) -> str:
    pairs = [f"{old} {'↔' if swap else '→'} {new}" for old, new, swap in p.pairs]
    return (
        f"its output classes are permuted ({', '.join(pairs[:6])}{' …' if len(pairs) > 6 else ''}"
        f"): on all {p.samples} samples the golden's top-{p.k} scores come back on the "
        f"exchanged classes (max diff {short_number(p.max_diff)})"
    )


def transform_text(t: ScoreTransform) -> str:
    lead = (
        f"the ranking is identical to the golden's on every sample (top-{t.k} classes in the "
        f"same order on all {t.samples}), only the scores moved (max diff "
        f"{short_number(t.max_diff)} on {t.max_id})"
    )
    if t.post:
        return f"{lead}: the manifest {' and '.join(change_brief(c) for c in t.post)}"
    if t.probabilities:
        return (
            f"{lead}: the model's own outputs are already probabilities (non-negative, summing "
            "to 1: it applies its own softmax) and the manifest applies postprocess.softmax on "
            "top (set postprocess.softmax: false, or export the model without its softmax)"
        )
    return f"{lead}: the score transform changed (a softmax, a temperature or a scale)"


def _model(lead: Lead) -> str:
    if not lead.model:
        return ""
    return "the model changed (" + "; ".join(change_text(c) for c in lead.model) + ")"


def _flip_evidence(lead: Lead) -> str:
    best = lead.flip
    assert best is not None
    how = (
        "and their scores are within tolerance"
        if lead.reproduces
        else f"(max score diff {short_number(best.max_diff)})"
    )
    evidence = f"with {best.label}, {best.agree}/{best.probes} probe predictions match the golden "
    evidence += how
    if lead.ties:
        verb = "do" if len(lead.ties) > 1 else "does"
        ties = [flip_expects(c.label) for c in lead.ties[:3]]
        evidence += f" (as {verb} {and_list(ties)}, identical on these probes)"
    return evidence


def _class_map(lead: Lead) -> str:
    assert lead.class_map is not None
    what, counterfactual = class_map_text(lead.class_map)
    where = f" ({_model(lead)})" if lead.model else ""
    return f"Likely cause: {what}{where}: {counterfactual}."


def _environment(lead: Lead) -> str:
    assert lead.env_step is not None
    text = "Likely cause: the environment — the manifest is unchanged, and "
    text += f"{environment_step_text(lead.env_step)}."
    best = lead.flip
    if best is not None:
        text += (
            f" A manifest flip happens to restore the output (with {best.label}, "
            f"{best.agree}/{best.probes} probe predictions match the golden), but the golden "
            "was recorded with the manifest as it is."
        )
    return text


def _flip_reverts(lead: Lead) -> str:
    assert lead.flip is not None
    edit = " and ".join(change_brief(c) for c in lead.flip.reverts[:2])
    return f"Likely cause: {lead.cause} — the manifest {edit}, and {_flip_evidence(lead)}."


def _flip_model(lead: Lead) -> str:
    return (
        f"Likely cause: {lead.cause} — {_model(lead)} and the new model expects other "
        f"input: {_flip_evidence(lead)}."
    )


def _flip(lead: Lead) -> str:
    assert lead.flip is not None
    where = f" (the environment changed: {env_text(lead.env)})" if lead.env else ""
    return (
        f"Likely cause: {lead.cause} — {_flip_evidence(lead)}: the model or its golden expects "
        f"{flip_expects(lead.flip.label)}{where}."
    )


def _transform_model(lead: Lead) -> str:
    assert lead.transform is not None
    return (
        f"Likely cause: the score transform — {_model(lead)}, and {transform_text(lead.transform)}."
    )


def _transform(lead: Lead) -> str:
    assert lead.transform is not None
    also = f"; {_model(lead)} too, with the same ranking" if lead.model else ""
    return f"Likely cause: the score transform — {transform_text(lead.transform)}{also}."


def _permutation(lead: Lead) -> str:
    assert lead.permutation is not None
    where = f"{_model(lead)}, and " if lead.model else ""
    return (
        f"Likely cause: the model's output classes — {where}{permutation_text(lead.permutation)}."
    )


def _environment_step(lead: Lead) -> str:
    assert lead.step is not None
    changed = f", and {env_text(lead.env)}" if lead.env else ""
    return (
        f"Likely cause: the environment — with an unchanged manifest, the {lead.step.op} step's "
        f"output differs from the golden's ({lead.step.text}){changed}."
    )


def _same_preprocessing(lead: Lead) -> str:
    return (
        f"Likely cause: the model — preprocessing is identical to the golden's on every "
        f"probe, {_model(lead)}, and no known pitfall brings the predictions back."
    )


def _runtime(lead: Lead) -> str:
    where = f": {env_text(lead.env)}" if lead.env else ""
    return (
        "Likely cause: the model runtime — preprocessing is identical to the golden's on "
        f"every probe, so the outputs changed in the model run{where}."
    )


def _model_lead(lead: Lead) -> str:
    return (
        f"Likely cause: the model — {_model(lead)}, and no known pitfall brings the "
        "predictions back."
    )


def _edits(lead: Lead) -> str:
    cats = sorted({c.category for c in lead.edits if c.category})
    what = f" ({', '.join(cats)})" if cats else ""
    return (
        f"Likely cause: the manifest's preprocessing edits{what} — "
        + "; ".join(change_text(c) for c in lead.edits[:2])
        + ", though no single flip brings the probe predictions back."
    )


def _step(lead: Lead) -> str:
    assert lead.step is not None
    return (
        f"Likely cause unknown — the {lead.step.op} step's output differs from the golden's "
        f"({lead.step.text}) but no known pitfall brings the predictions back."
    )


def _unknown(lead: Lead) -> str:
    return (
        "Likely cause unknown — no manifest edit, step difference or known pitfall explains "
        "the drift."
    )


def _precision(lead: Lead) -> str:
    assert lead.layers is not None
    layers = lead.layers
    where = f" ({layers.lead()})" if layers.first is not None else ""
    changed = f" (the model changed: {change_text(lead.model[0])})" if lead.model else ""
    return f"Likely cause: the model's precision — {layers.precision}{changed}{where}."


def _data_parts(d: DataFacts) -> str:
    return "; ".join(d.parts)


def _data_head(lead: Lead) -> str:
    d = lead.data
    assert d is not None
    how = ""
    r = d.reencoded
    if r is not None and r.close == 0:
        how = (
            f"; the {r.same} changed files among the step probes decode to the very same pixels "
            "as the golden's (re-encoded losslessly, or metadata only)"
        )
    elif r is not None:
        how = (
            f"; the {r.same + r.close} changed files among the step probes are the same pictures "
            f"re-encoded: same size, block means within {r.levels:.1f} levels of the golden's"
        )
    return f"Likely cause: the data — {_data_parts(d)}{how}"


def _rest(lead: Lead) -> str:
    assert lead.other is not None
    return lead_text(lead.other).removeprefix("Likely cause")


def _data(lead: Lead) -> str:
    return _data_head(lead) + "."


def _data_inverted(lead: Lead) -> str:
    assert lead.data is not None and lead.flip is not None
    flip = lead.flip
    return (
        f"Likely cause: {flip.category}, in the changed data — {_data_parts(lead.data)}: the new "
        f"files are {flip.label} restores the golden ({flip.agree}/{flip.probes} probe "
        "predictions match)."
    )


def _data_flip(lead: Lead) -> str:
    assert lead.data is not None and lead.flip is not None
    flip = lead.flip
    return (
        f"Likely cause: {flip.category or 'preprocessing'}, in the changed data — "
        f"{_data_parts(lead.data)}, and with {flip.label}, {flip.agree}/{flip.probes} probe "
        f"predictions match the golden: the new files need {flip_expects(flip.label)}."
    )


def _data_covers(lead: Lead) -> str:
    assert lead.data is not None
    moved = lead.data.moved
    return _data_head(lead) + f"; every sample whose prediction changed ({moved}) is among them."


def _data_and_more(lead: Lead) -> str:
    assert lead.data is not None
    d = lead.data
    return _data_head(lead) + (
        f". But {d.elsewhere} of the {d.moved} samples whose prediction changed have the "
        f"golden's data, so something else changed too — likely cause{_rest(lead)}"
    )


def _data_labels(lead: Lead) -> str:
    assert lead.data is not None
    k = lead.data.label_shift
    shift = ""
    if k is not None:
        shift = (
            f": a label offset, every changed label is the golden's {signed(k)} (with labels "
            f"shifted by {signed(-k)}, they are the golden's)"
        )
    return _data_head(lead) + (
        shift + "; every prediction is the golden's: the accuracy moved with the labels."
    )


def _data_and_worst(lead: Lead) -> str:
    assert lead.data is not None
    return _data_head(lead) + (
        f". But the largest score difference is on {lead.data.worst}, whose data is the "
        f"golden's, so something else changed too — likely cause{_rest(lead)}"
    )


def _class_count(lead: Lead) -> str:
    assert lead.class_map is not None
    what, counterfactual = class_map_text(lead.class_map)
    return f"Likely cause: {what}: {counterfactual}."


def _error(lead: Lead) -> str:
    return f"diagnosis failed ({lead.error})"


# One sentence per rule; a rule missing here fails in the tests (test_diagnosis_wording.py).
LEAD_TEXTS: dict[str, Callable[[Lead], str]] = {
    "class map": _class_map,
    "environment": _environment,
    "flip reverts": _flip_reverts,
    "flip model": _flip_model,
    "flip": _flip,
    "transform model": _transform_model,
    "transform": _transform,
    "class permutation": _permutation,
    "environment step": _environment_step,
    "same steps": _same_preprocessing,
    "runtime": _runtime,
    "model": _model_lead,
    "edits": _edits,
    "step": _step,
    "unknown": _unknown,
    "precision": _precision,
    "data": _data,
    "data inverted": _data_inverted,
    "data flip": _data_flip,
    "data covers": _data_covers,
    "data elsewhere": _data_and_more,
    "data labels": _data_labels,
    "data worst": _data_and_worst,
    "class count": _class_count,
    "error": _error,
}


def lead_text(lead: Lead) -> str:
    """The lead sentence of a diagnosis; the first layer that differs said after a model cause."""
    text = LEAD_TEXTS[lead.rule](lead)
    if lead.layers is not None and lead.rule != "precision":
        return text.removesuffix(".") + "; " + lead.layers.lead() + "."
    return text
