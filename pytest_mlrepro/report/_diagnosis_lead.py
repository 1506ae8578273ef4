"""The lead of a diagnosis in words: one sentence per rule of ``diagnosis/_lead.py``'s table."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from .._visible import visible
from ..diagnosis import (
    ABSENT,
    Change,
    ClassMap,
    ClassPermutation,
    Counterfactual,
    Delta,
    EnvChange,
    EnvironmentStep,
    LayerDiff,
    LayerReport,
    Lead,
    Precision,
    ScoreTransform,
    StepDiff,
    show_value,
)
from ._pitfall_words import pitfall_words


def short_number(value: float, digits: int = 2) -> str:
    return "-" if not math.isfinite(value) else "0" if value == 0 else f"{value:.{digits}g}"


def signed(k: int) -> str:
    """``+2``, ``−1`` (a minus sign, not a hyphen)."""
    return f"+{k}" if k > 0 else f"−{-k}"


def and_list(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


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


def channels_text(d: Delta) -> str:
    """What the per-channel means show: a channel permutation, premultiplied alpha, or ""."""
    if d.order is not None:
        moved = ", ".join(f"{i}←{j}" for i, j in enumerate(d.order) if i != j)
        return f"the channels in another order (now ← golden, by their means: {moved})"
    if d.alpha is not None:
        how = "premultiplied by alpha" if d.alpha < 1 else "un-premultiplied"
        return f"the colours {how} (alpha the same, every colour mean × {d.alpha:.2f})"
    return ""


def delta_text(d: Delta) -> str:
    """How a step's output differs: ``resize: mean |Δ| 3.1/255 on 8/8 probes``'s words."""
    where = f"on {d.differing}/{d.count} probes"
    if not d.differing:
        return f"identical on {d.count}/{d.count} probes"
    if d.shape is not None:
        return f"shape {d.shape[0]} → {d.shape[1]} {where}"
    if d.dtype is not None:
        return f"dtype {d.dtype[0]} → {d.dtype[1]} {where}"
    # Differences of bytes read best as x/255, of 16-bit samples as x/65535 (2.37e+04 is a third
    # of their range, not 93 bytes).
    unit = {"uint8": "/255", "uint16": "/65535"}.get(d.unit, "")
    parts = [channels_text(d)] if channels_text(d) else []
    if d.full is not None:
        mean, peak, share = d.full
        parts.append(
            f"mean |Δ| {short_number(mean, 3)}{unit} (max {short_number(peak, 3)}, {share:.0%} of "
            "values)"
        )
        return f"{', '.join(parts)} {where}"
    if d.thumb is None:
        return f"differs {where}"
    parts.append(f"thumbnail mean |Δ| {short_number(d.thumb, 3)}{unit}")
    if d.shift and max(abs(v) for v in d.shift) > 0:
        parts.append("channel means " + ", ".join(f"{v:+.3g}" for v in d.shift) + unit)
    if d.detail is not None and d.detail[0] > 0 and abs(d.detail[1] / d.detail[0] - 1) >= 0.005:
        g, n = d.detail
        parts.append(f"detail {short_number(g, 3)} → {short_number(n, 3)} ({n / g - 1:+.0%})")
    return f"{', '.join(parts)} {where}"


def step_text(s: StepDiff) -> str:
    if s.delta is not None:
        return delta_text(s.delta)
    if s.now_index is None:
        return f"step removed (the golden's pipeline had {s.op} at position {s.golden_index})"
    return "step added (not in the golden's pipeline)" if s.golden_index is None else ""


STEP_NOTES = {
    "unrecorded": "the golden keeps no step fingerprints (re-record it with --mlrepro-update to "
    "add them)",
    "absent": "none of the golden's step probes is in this run's data set",
}


def step_note_words(note: str, error: str) -> str:
    """Why a step report compares nothing, or ""."""
    if note == "error":
        return f"the step probes could not be traced: {error}"
    return STEP_NOTES.get(note, "")


def rel(delta: float) -> str:
    """A difference relative to the golden's std: ``0.5×``, ``∞``."""
    return "∞" if not math.isfinite(delta) else f"{delta:.2g}×"


def layer_diff_text(d: LayerDiff) -> str:
    g, n = d.golden, d.now
    if g[2] != n[2]:
        return f"shape {g[2]} → {n[2]}"
    dtype = f"{g[3]} → {n[3]}, " if g[3] != n[3] else ""
    return (
        f"{dtype}max |x| {g[6]:.4g} → {n[6]:.4g}, mean {g[4]:.4g} → {n[4]:.4g}, std "
        f"{g[5]:.4g} → {n[5]:.4g}: {rel(d.delta)} the golden's std"
    )


def layers_lead(r: LayerReport) -> str:
    """Where the model's outputs first differ, and whether that grows to the last layer."""
    f = r.first
    if f is None:
        return ""
    text = (
        f"the first layer whose output differs is {visible(f.op)} {f.name!r} "
        f"(layer {f.index + 1} of {r.layers}: {layer_diff_text(f)})"
    )
    last = r.grows()
    if last is None:
        return text
    verb = "grows" if last.delta > f.delta else "shrinks" if last.delta < f.delta else "stays"
    at = visible(last.name)
    return text + f", and the difference {verb} to {rel(last.delta)} at the last layer ({at})"


def precision_text(p: Precision) -> str:
    parts = []
    if p.quant is not None:
        now, then, kinds = p.quant
        parts.append(
            f"the new model has {now} quantisation ops ({kinds}) where the golden's had {then}"
        )
    parts += [
        f"{n} layer outputs are {dtype} where the golden's had {g}" for dtype, n, g in p.dtypes
    ]
    if p.scales:
        moved = ", ".join(f"{name} {old:g} → {new:g}" for name, old, new in p.scales)
        parts.append(f"the quantisation scale changed: {moved}")
    return "; ".join(parts)


def alignment_text(r: LayerReport) -> str:
    if r.alignment == "name":
        return "by name"
    if r.alignment == "position":
        return "by position and shape (the names differ)"
    return (
        f"no alignment holds: the golden's model has {r.golden_layers} layers, this one "
        f"{r.layers}, and their names and shapes do not match in order"
    )


LAYER_NOTES = {
    "absent": "the golden's layer probes are not in this run's data set",
    "untraceable": "this model's layers cannot be traced with this runner",
}


FLIP_LABELS = {
    "revert": "the recorded {} ({})",
    "put back": "the recorded {} put back",
    "removed": "the added {} step removed",
    "recorded": "the recorded preprocessing (every edit undone)",
    "in graph": "the manifest's {} dropped (the new model does it itself)",
    "reorder": "the channels after {} put back in the golden's order (now ← golden: {})",
    "as is": "the manifest as it is",
}


def flip_label(c: Counterfactual) -> str:
    """What a flip is, to read after "with": ``BGR instead of RGB``."""
    kind, *facts = c.label
    if kind == "pitfall":
        return pitfall_words(tuple(facts))
    if kind == "revert" and not facts[1]:
        facts[1] = "as recorded"
    return FLIP_LABELS[kind].format(*facts)


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
        f"the {e.step.op} step's output differs from the golden's ({step_text(e.step)}): that "
        f"step runs on {e.library} here; {what}"
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


# The pieces worded from one fact of the lead, which the rule's sentence needs: (the fact, how).
_FACT_WORDS: dict[str, tuple[str, Callable[[Any], str]]] = {
    "model": ("model", lambda model: f"the model changed ({'; '.join(map(change_text, model))})"),
    "env": ("env", env_text),
    "env_step": ("env_step", environment_step_text),
    "difference": ("step", step_text),
    "map_what": ("class_map", lambda m: class_map_text(m)[0]),
    "map_how": ("class_map", lambda m: class_map_text(m)[1]),
    "permutation": ("permutation", permutation_text),
    "transform": ("transform", transform_text),
    "parts": ("data", lambda data: "; ".join(data.parts)),
    "label": ("flip", flip_label),
    "expects": ("flip", lambda flip: flip_expects(flip_label(flip))),
    "flip_category": ("flip", lambda flip: flip.category or "preprocessing"),
    "reverts": ("flip", lambda flip: " and ".join(change_brief(c) for c in flip.reverts[:2])),
    "rest": ("other", lambda other: lead_text(other).removeprefix("Likely cause")),
}
# The pieces said only when the lead has their fact: (the piece, how it is said).
_IF_ANY = {
    "model_in": ("model", " ({})"),  # the model's edits in brackets after a class map
    "model_and": ("model", "{}, and "),
    "model_too": ("model", "; {} too, with the same ranking"),
    "env_flip": ("env", " (the environment changed: {})"),
    "env_and": ("env", ", and {}"),
    "env_run": ("env", ": {}"),
}


class _Words(dict[str, object]):
    """The pieces a rule's sentence is made of, each worded from the lead's facts when the
    sentence asks for it."""

    def __init__(self, lead: Lead) -> None:
        super().__init__(lead=lead, data=lead.data, flip=lead.flip, step=lead.step)
        self.lead = lead

    def __missing__(self, key: str) -> str:
        if key in _IF_ANY:
            piece, said = _IF_ANY[key]
            return said.format(self[piece]) if getattr(self.lead, piece) else ""
        if key in _FACT_WORDS:
            name, words = _FACT_WORDS[key]
            fact = getattr(self.lead, name)
            assert fact is not None
            return words(fact)
        return str(getattr(self, "_" + key)())

    def _evidence(self) -> str:
        lead, flip = self.lead, self.lead.flip
        assert flip is not None
        how = f"(max score diff {short_number(flip.max_diff)})"
        how = "and their scores are within tolerance" if lead.reproduces else how
        text = f"with {flip_label(flip)}, {flip.agree}/{flip.probes} probe predictions match the "
        text += f"golden {how}"
        if lead.ties:
            verb = "do" if len(lead.ties) > 1 else "does"
            ties = and_list([flip_expects(flip_label(c)) for c in lead.ties[:3]])
            text += f" (as {verb} {ties}, identical on these probes)"
        return text

    def _workaround(self) -> str:
        flip = self.lead.flip
        if flip is None:
            return ""
        return (
            f" A manifest flip happens to restore the output (with {flip_label(flip)}, "
            f"{flip.agree}/{flip.probes} probe predictions match the golden), but the golden was "
            "recorded with the manifest as it is."
        )

    def _edits(self) -> str:
        cats = sorted({c.category for c in self.lead.edits if c.category})
        what = f" ({', '.join(cats)})" if cats else ""
        return what + " — " + "; ".join(change_text(c) for c in self.lead.edits[:2])

    def _precision(self) -> str:
        layers = self.lead.layers
        assert layers is not None and layers.precision is not None
        where = f" ({layers_lead(layers)})" if layers.first is not None else ""
        changed = f" (the model changed: {change_text(self.lead.model[0])})"
        return precision_text(layers.precision) + (changed if self.lead.model else "") + where

    def _how(self) -> str:
        assert self.lead.data is not None
        r = self.lead.data.reencoded
        if r is None:
            return ""
        if r.close == 0:
            return (
                f"; the {r.same} changed files among the step probes decode to the very same "
                "pixels as the golden's (re-encoded losslessly, or metadata only)"
            )
        return (
            f"; the {r.same + r.close} changed files among the step probes are the same pictures "
            f"re-encoded: same size, block means within {r.levels:.1f} levels of the golden's"
        )

    def _shift(self) -> str:
        assert self.lead.data is not None
        k = self.lead.data.label_shift
        if k is None:
            return ""
        return (
            f": a label offset, every changed label is the golden's {signed(k)} (with labels "
            f"shifted by {signed(-k)}, they are the golden's)"
        )


_DATA = "Likely cause: the data — {parts}{how}"
_BUT = ", so something else changed too — likely cause{rest}"
# One sentence per rule, its pieces named (_Words); a rule missing here fails in the tests.
LEAD_TEXTS: dict[str, str] = {
    "class map": "Likely cause: {map_what}{model_in}: {map_how}.",
    "environment": "Likely cause: the environment — the manifest is unchanged, and {env_step}."
    "{workaround}",
    "flip reverts": "Likely cause: {lead.cause} — the manifest {reverts}, and {evidence}.",
    "flip model": "Likely cause: {lead.cause} — {model} and the new model expects other input: "
    "{evidence}.",
    "flip": "Likely cause: {lead.cause} — {evidence}: the model or its golden expects "
    "{expects}{env_flip}.",
    "transform model": "Likely cause: the score transform — {model}, and {transform}.",
    "transform": "Likely cause: the score transform — {transform}{model_too}.",
    "class permutation": "Likely cause: the model's output classes — {model_and}{permutation}.",
    "environment step": "Likely cause: the environment — with an unchanged manifest, the {step.op} "
    "step's output differs from the golden's ({difference}){env_and}.",
    "same steps": "Likely cause: the model — preprocessing is identical to the golden's on every "
    "probe, {model}, and no known pitfall brings the predictions back.",
    "runtime": "Likely cause: the model runtime — preprocessing is identical to the golden's on "
    "every probe, so the outputs changed in the model run{env_run}.",
    "model": "Likely cause: the model — {model}, and no known pitfall brings the predictions back.",
    "edits": "Likely cause: the manifest's preprocessing edits{edits}, though no single flip "
    "brings the probe predictions back.",
    "step": "Likely cause unknown — the {step.op} step's output differs from the golden's "
    "({difference}) but no known pitfall brings the predictions back.",
    "unknown": "Likely cause unknown — no manifest edit, step difference or known pitfall explains "
    "the drift.",
    "precision": "Likely cause: the model's precision — {precision}.",
    "data": _DATA + ".",
    "data inverted": "Likely cause: {flip_category}, in the changed data — {parts}: the new files "
    "are {label} restores the golden ({flip.agree}/{flip.probes} probe predictions match).",
    "data flip": "Likely cause: {flip_category}, in the changed data — {parts}, and with "
    "{label}, {flip.agree}/{flip.probes} probe predictions match the golden: the new files "
    "need {expects}.",
    "data covers": _DATA + "; every sample whose prediction changed ({data.moved}) is among them.",
    "data elsewhere": _DATA
    + ". But {data.elsewhere} of the {data.moved} samples whose prediction changed "
    "have the golden's data" + _BUT,
    "data labels": _DATA + "{shift}; every prediction is the golden's: the accuracy moved with "
    "the labels.",
    "data worst": _DATA
    + ". But the largest score difference is on {data.worst}, whose data is the "
    "golden's" + _BUT,
    "class count": "Likely cause: {map_what}: {map_how}.",
    "error": "diagnosis failed ({lead.error})",
}


def lead_text(lead: Lead) -> str:
    """The lead sentence of a diagnosis; the first layer that differs said after a model cause."""
    text = LEAD_TEXTS[lead.rule].format_map(_Words(lead))
    if lead.layers is not None and lead.rule != "precision":
        return text.removesuffix(".") + "; " + layers_lead(lead.layers) + "."
    return text
