"""From a drift to its likely cause: which pitfall, step or environment change moved the results.

Runs only when an item fails against its golden. A change of the data itself (a file whose
sha256 or label differs from the golden's, ``data_identity.py``) is named before anything else;
then four sources of evidence, most telling first:

1. **counterfactual probes**: re-run a probe subset (64 samples by default, half of them samples
   whose prediction changed) with one known pitfall flipped at a time (``pitfalls.py``), and with
   each of the manifest's own edits reverted one at a time, on the model that is already loaded.
   A flip that brings the probe predictions back to the golden names the cause, whether the
   manifest changed or the model did (a model re-exported to expect BGR is found by the BGR flip);
2. the **manifest diff** against the manifest the golden was recorded with;
3. the **per-step fingerprints** of the golden's step probes (``probes.py``): the first
   preprocessing step whose output differs, and by how much; and whether this machine reproduces
   the golden's fingerprints with the recorded pipeline (if not, the environment changed them);
4. the **environment diff** (framework and library versions, libjpeg, threads, device, the CPU
   and its ISA flags, the numeric packages and settings).

When every sample's ranking is the golden's and only the scores moved, the lead says so (the
score transform changed: a softmax applied twice, a temperature) rather than naming no cause.

The result is a lead sentence (the most likely cause) followed by the evidence, readable at 100
columns. Nothing here raises on odd input: a diagnosis that cannot be made says why.
"""

from __future__ import annotations

import math
import textwrap
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from .._schema import Context, convert_dataclass
from ..data import ResolvedDataset, Sample
from ..errors import ManifestError
from ..evaluation import Evaluation, results_of, run_model
from ..fingerprint import environment
from ..goldens import (
    AnyScores,
    Comparison,
    DataChange,
    Golden,
    KeptScores,
    Results,
    compare,
    score_rows,
    take_scores,
)
from ..manifest import Manifest, parse_manifest
from ..pipeline import STEPS, Step
from . import _layer_fingerprints as layer_store
from . import _pitfalls as pitfalls
from . import _step_fingerprints as probe_store
from ._counterfactual import score_pipelines

WIDTH = 100
SCREEN = 8  # probes every counterfactual runs on first; only those that bring all of them back
FINALISTS = 4  # (at most this many) then run on every probe
SHOWN = 6  # counterfactual lines shown

# Manifest fields whose change cannot move a model's outputs (they change how it runs or what
# is checked, not what is computed).
_NEUTRAL = (
    "description",
    "version",
    "name",
    "golden",
    "tolerances",
    "latency",
    "diagnosis",
    "runtime.batch_size",
    "runtime.intra_op_threads",
    "runtime.inter_op_threads",
    "runtime.devices",
    "dataset.limit",
)
_ENV_FOR_STEP = {
    "decode": ("pillow", "libjpeg", "libjpeg_turbo", "opencv", "tensorflow"),
    "resize": ("pillow", "opencv", "tensorflow", "numpy"),
    "crop": ("numpy",),
}


# --- the manifest diff ----------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    """One difference between the recorded manifest and this one."""

    path: str
    old: object  # a manifest value (plain data), or _ABSENT
    new: object
    area: str  # preprocess | model | runtime | neutral | other
    category: str | None = None  # the pitfall category of a preprocessing change
    moved: str | None = None  # the op of a step that moved (old and new are positions)

    def text(self) -> str:
        if self.moved:
            return f"{self.path}: {self.moved} moved from preprocess[{self.old}]"
        if self.old is _ABSENT:
            return f"{self.path}: added {_show(self.new)}"
        if self.new is _ABSENT:
            return f"{self.path}: removed (was {_show(self.old)})"
        return f"{self.path}: {_show(self.old)} → {_show(self.new)}"

    def brief(self) -> str:
        """As a lead sentence says it: ``changed decode.order from 'RGB' to 'BGR'``."""
        if self.moved:
            return f"moved the {self.moved} step from preprocess[{self.old}] to [{self.new}]"
        path = self.path
        if ".preprocess[" in path:
            inside = path.split(".preprocess[", 1)[1]
            path = inside.split("].", 1)[1] if "]." in inside else path
        if self.new is _ABSENT:
            return f"removed the step {_show(self.old)}"
        if self.old is _ABSENT:
            return f"added the step {_show(self.new)}"
        return f"changed {path} from {_show(self.old)} to {_show(self.new)}"


class _Absent:
    def __repr__(self) -> str:
        return "(absent)"


_ABSENT: Final = _Absent()


def _show(value: object) -> str:
    if isinstance(value, dict) and len(value) == 1:
        ((op, params),) = value.items()
        if isinstance(params, dict):
            inner = ", ".join(f"{k}: {_show(v)}" for k, v in params.items() if v is not None)
            return f"{op}: {{{inner}}}"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    if isinstance(value, str) and len(value) > 24 and all(c in "0123456789abcdef" for c in value):
        return value[:12] + "…"  # a sha256
    return repr(value) if isinstance(value, str) else str(value)


def _area(path: str) -> str:
    if any(path == p or path.startswith(p + ".") or path.startswith(p + "[") for p in _NEUTRAL):
        return "neutral"
    if ".preprocess" in path:
        return "preprocess"
    if path.startswith("model") or path.startswith("framework"):
        return "model"
    if path.startswith("runtime"):
        return "runtime"
    return "other"


def manifest_diff(recorded: Mapping[str, Any], now: Mapping[str, Any]) -> list[Change]:
    """Field by field differences of two normalised manifests; preprocessing steps are aligned
    by op, so a removed crop reads as one removed step, not as every later step changed."""
    changes: list[Change] = []
    _diff(recorded, now, "", changes)
    return changes


def _diff(old: object, new: object, path: str, out: list[Change]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if (
                key == "preprocess"
                and isinstance(old.get(key), list)
                and isinstance(new.get(key), list)
            ):
                _diff_steps(old[key], new[key], sub, out)
            else:
                _diff(old.get(key, _ABSENT), new.get(key, _ABSENT), sub, out)
        return
    if (
        isinstance(old, list)
        and isinstance(new, list)
        and len(old) == len(new)
        and any(isinstance(v, dict) for v in old + new)
    ):
        for index, (a, b) in enumerate(zip(old, new)):
            _diff(a, b, f"{path}[{index}]", out)
        return
    if old != new and not (old is _ABSENT and new is None):
        out.append(Change(path, old, new, _area(path)))


def _op_of(step: object) -> str:
    return next(iter(step)) if isinstance(step, dict) and len(step) == 1 else "?"


def _diff_steps(old: list[Any], new: list[Any], path: str, out: list[Change]) -> None:
    pairs = probe_store._align([_op_of(s) for s in old], [_op_of(s) for s in new])
    both = [(n, o) for n, o in pairs if n is not None and o is not None]
    for now_index, old_index in pairs:
        if now_index is not None and old_index is not None:
            a, b = old[old_index], new[now_index]
            op = _op_of(b)
            if any((n - now_index) * (o - old_index) < 0 for n, o in both):
                category = (
                    pitfalls.NORM_ORDER
                    if op in ("cast", "scale", "normalize")
                    else pitfalls.category_of_change(op, None)
                )
                out.append(
                    Change(f"{path}[{now_index}]", old_index, now_index, "preprocess", category, op)
                )
            if a == b:
                continue
            pa, pb = a.get(op, {}), b.get(op, {})
            if isinstance(pa, dict) and isinstance(pb, dict):
                for key in sorted(set(pa) | set(pb)):
                    if pa.get(key, _ABSENT) != pb.get(key, _ABSENT):
                        out.append(
                            Change(
                                f"{path}[{now_index}].{op}.{key}",
                                pa.get(key, _ABSENT),
                                pb.get(key, _ABSENT),
                                "preprocess",
                                pitfalls.category_of_change(op, key),
                            )
                        )
            continue
        if now_index is None:
            step = old[old_index or 0]
            out.append(
                Change(
                    f"{path}[{old_index}]",
                    step,
                    _ABSENT,
                    "preprocess",
                    pitfalls.category_of_change(_op_of(step), None),
                )
            )
        else:
            step = new[now_index]
            out.append(
                Change(
                    f"{path}[{now_index}]",
                    _ABSENT,
                    step,
                    "preprocess",
                    pitfalls.category_of_change(_op_of(step), None),
                )
            )


def recorded_steps(recorded: Mapping[str, Any]) -> tuple[Step, ...] | None:
    """The golden's recorded preprocessing as step objects, or None if it no longer parses
    (e.g. it names a custom step that is not registered in this run)."""
    try:
        raw = recorded["inputs"][0]["preprocess"]
        ctx = Context("the golden's recorded manifest", {})
        steps = []
        for index, item in enumerate(raw):
            ((op, params),) = item.items()
            steps.append(convert_dataclass(STEPS[op], params, ("preprocess", index, op), ctx))
        return tuple(steps)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, ManifestError):
        return None


# --- counterfactuals ------------------------------------------------------------------------


@dataclass
class Counterfactual:
    """One pipeline tried on the probes, and how close it brings them to the golden."""

    label: str  # reads after "with": "RGB instead of BGR"
    steps: tuple[Step, ...]
    category: str | None = None
    reverts: list[Change] = field(default_factory=list)  # manifest edits this one undoes
    agree: int = 0
    probes: int = 0
    max_diff: float = math.inf
    error: str | None = None
    order: int = 0
    # Its outputs on the screening probes are those of the manifest as it is: the flip changes
    # nothing there, so it proves nothing, whatever it matches.
    noop: bool = False

    @property
    def fraction(self) -> float:
        return self.agree / self.probes if self.probes else 0.0

    def key(self) -> tuple[float, float, int, int]:
        return (-self.fraction, self.max_diff, 0 if self.reverts else 1, self.order)


def _revert_candidates(
    now: tuple[Step, ...], recorded: tuple[Step, ...], changes: list[Change]
) -> list[Counterfactual]:
    """The recorded pipeline, and each preprocessing edit of the manifest undone on its own."""
    out: list[Counterfactual] = []
    pre = [c for c in changes if c.area == "preprocess"]
    pairs = probe_store._align([s.op for s in recorded], [s.op for s in now])
    for now_index, rec_index in pairs:
        if now_index is not None and rec_index is not None:
            if now[now_index] == recorded[rec_index]:
                continue
            steps = (*now[:now_index], recorded[rec_index], *now[now_index + 1 :])
            mine = [
                c for c in pre if c.path.split(".preprocess", 1)[1].startswith(f"[{now_index}]")
            ]
            label = ", ".join(f"{c.path.rsplit('.', 1)[-1]} {_show(c.old)}" for c in mine)
            label = f"the recorded {now[now_index].op} ({label or 'as recorded'})"
        elif now_index is None:
            assert rec_index is not None
            before = [n for n, r in pairs if n is not None and r is not None and r < rec_index]
            at = (max(before) + 1) if before else 1
            steps = (*now[:at], recorded[rec_index], *now[at:])
            mine = [c for c in pre if c.new is _ABSENT and c.path.endswith(f"[{rec_index}]")]
            label = f"the recorded {pitfalls.describe_step(recorded[rec_index])} put back"
        else:
            steps = (*now[:now_index], *now[now_index + 1 :])
            mine = [c for c in pre if c.old is _ABSENT and c.path.endswith(f"[{now_index}]")]
            label = f"the added {now[now_index].op} step removed"
        categories = {c.category for c in mine if c.category}
        out.append(
            Counterfactual(
                label,
                tuple(steps),
                categories.pop() if len(categories) == 1 else None,
                mine,
            )
        )
    if recorded != now:  # (a duplicate of a single revert is dropped by the caller)
        cats = {c.category for c in pre if c.category}
        out.append(
            Counterfactual(
                "the recorded preprocessing (every edit undone)",
                recorded,
                cats.pop() if len(cats) == 1 else None,
                pre,
            )
        )
    return out


# Causes the layer comparison sharpens: no flip explains the drift, the model computes it.
_MODEL_CAUSES = ("model", "runtime", "unknown")

# Manifest steps a re-exported model may have taken inside its graph (then the step runs twice):
# what each one's removal is filed under.
_IN_GRAPH = {"normalize": pitfalls.MEAN_STD, "scale": pitfalls.MEAN_STD, "resize": pitfalls.RESIZE}


def _in_graph_candidates(manifest: Manifest) -> list[Counterfactual]:
    """When the model changed: each manifest step that a model can do itself, dropped on its
    own (a model with the normalisation built in gets it twice from the manifest)."""
    now = tuple(manifest.input.preprocess)
    out = []
    for index, step in enumerate(now):
        category = _IN_GRAPH.get(step.op)
        if category is None:
            continue
        steps = (*now[:index], *now[index + 1 :])
        if pitfalls.valid_steps(steps, manifest.input):
            label = (
                f"the manifest's {pitfalls.describe_step(step)} dropped (the new model does "
                "it itself)"
            )
            out.append(Counterfactual(label, steps, category))
    return out


def _candidates(
    manifest: Manifest,
    recorded: tuple[Step, ...] | None,
    changes: list[Change],
    model_changed: bool = False,
) -> list[Counterfactual]:
    now = tuple(manifest.input.preprocess)
    found: dict[tuple[Step, ...], Counterfactual] = {}
    if recorded is not None:
        for c in _revert_candidates(now, recorded, changes):
            if pitfalls.valid_steps(c.steps, manifest.input) and c.steps not in found:
                found[c.steps] = c
    if model_changed:
        for c in _in_graph_candidates(manifest):
            found.setdefault(c.steps, c)
    # Never decided by what the process happens to have imported: the same drift gets the same
    # diagnosis.
    backends = pitfalls.backends_in_play(manifest, recorded or ())
    for v in pitfalls.variants(manifest, backends):
        existing = found.get(v.steps)
        if existing is not None:
            # The same pipeline as a revert: keep the revert's evidence, name the pitfall.
            existing.category = v.pitfall
            existing.label = v.description
            continue
        found[v.steps] = Counterfactual(v.description, v.steps, v.pitfall)
    for order, c in enumerate(found.values()):
        c.order = order
    return list(found.values())


def probe_order(ids: Sequence[str], n: int, changed: Iterable[str]) -> list[str]:
    """``n`` probes, samples whose prediction changed and the others interleaved, so that any
    prefix (the screening subset) holds both kinds."""
    chosen = probe_store.select(ids, n, prefer=set(changed))
    wanted = set(changed)
    a = [i for i in chosen if i in wanted]
    b = [i for i in chosen if i not in wanted]
    out: list[str] = []
    for x, y in zip(a, b):
        out += [x, y]
    longer = a if len(a) > len(b) else b
    return out + longer[min(len(a), len(b)) :]


def _subset(results: Results, ids: Sequence[str]) -> Results:
    index = {sample: i for i, sample in enumerate(results.ids)}
    rows = np.asarray([index[i] for i in ids], dtype=np.int64)
    return Results(
        ids=tuple(ids),
        labels=results.labels[rows],
        topk=results.topk[rows],
        topk_scores=results.topk_scores[rows],
    )


# --- the diagnosis --------------------------------------------------------------------------


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


# Environment fields that goldens recorded before fingerprint.py kept them lack: such a golden
# says nothing about them, which is not a change.
_LATER_ENV_FIELDS = ("cpu_vendor", "cpu_flags", "numeric_packages", "numeric_settings")


def _env_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    def flat(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in d.items():
            key = f"{prefix}{k}"
            if isinstance(v, Mapping):
                out.update(flat(v, key + "."))
            else:
                out[key] = v
        return out

    unrecorded = [f for f in _LATER_ENV_FIELDS if f not in old]
    a, b = flat(old), flat({k: v for k, v in new.items() if k not in unrecorded})
    changes = [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    # numeric_packages.numpy repeats the top-level numpy: one line is enough.
    said = [(k, x, y) for k, x, y in changes if "." not in k]  # values may be lists: no set
    return [
        (k, x, y)
        for k, x, y in changes
        if not (k.startswith("numeric_packages.") and (k.split(".", 1)[1], x, y) in said)
    ]


def _env_change(key: str, old: Any, new: Any) -> str:
    """How one environment field changed, readably: ISA flags as ``+avx512f -amx_tile``, a
    package or setting that one side lacks as not installed or unset, else ``old → new``."""
    if key == "cpu_flags" and isinstance(old, list) and isinstance(new, list):
        added = [f"+{f}" for f in new if f not in old]
        removed = [f"-{f}" for f in old if f not in new]
        return " ".join(added + removed)
    absent = {"numeric_packages": "(not installed)", "numeric_settings": "(unset)"}.get(
        key.split(".", 1)[0]
    )
    if absent is not None:
        return f"{absent if old is None else _show(old)} → {absent if new is None else _show(new)}"
    return f"{_show(old)} → {_show(new)}"


def _env_text(items: Sequence[tuple[str, Any, Any]]) -> str:
    return "; ".join(f"{k} {_env_change(k, a, b)}" for k, a, b in items)


def _model_run_env(env_changes: list[tuple[str, Any, Any]]) -> list[tuple[str, Any, Any]]:
    """The environment changes that act on the model run: the runtime's, then the CPU's ISA, the
    numeric packages and settings."""
    runtime = [e for e in env_changes if e[0].startswith("runtime.")]
    numeric = [
        e
        for e in env_changes
        if e[0] in ("cpu_vendor", "cpu_flags")
        or e[0].startswith(("numeric_packages.", "numeric_settings."))
    ]
    return runtime + numeric


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
            changed = _most_moved(golden.results, evaluation, shared, tol.score)
        ids = probe_order(shared, probes, changed)
        tried, baseline = _run_counterfactuals(manifest, golden, evaluation, ids, recorded, changes)

    # Layer fingerprints: with the same pixels going in, where the model's computation changed.
    layer_report = None
    if steps_report.first is None and evaluation.runner is not None:
        block = golden.probes.get("layers") if isinstance(golden.probes, Mapping) else None
        try:
            layer_report = layer_store.compare(block, evaluation.runner, manifest, samples)
        except Exception as exc:  # report, do not hide the rest
            layer_report = layer_store.LayerReport(note=f"the layers could not be traced: {exc}")

    env_now = environment(evaluation.runner_info)
    env_changes = _env_diff(golden.environment, env_now)

    transform = _score_transform(manifest, golden, comparison, evaluation, changes)
    permutation = _class_permutation(golden.results, evaluation, tol.score)
    lead, cause = _lead(
        changes, steps_report, tried, baseline, env_changes, tol.score, transform, permutation
    )
    if layer_report is not None and layer_report.precision and cause in _MODEL_CAUSES:
        # The model's precision changed: the most specific cause the layers support.
        model_text = next((c.text() for c in changes if c.path.endswith("sha256")), "")
        where = f" ({layer_report.lead()})" if layer_report.first is not None else ""
        lead = (
            f"Likely cause: the model's precision — {layer_report.precision}"
            + (f" (the model changed: {model_text})" if model_text else "")
            + f"{where}."
        )
        cause = "precision"
    elif layer_report is not None and layer_report.first is not None and cause in _MODEL_CAUSES:
        lead = lead.removesuffix(".") + "; " + layer_report.lead() + "."
    if data is not None and data.changed:
        restoring = _restoring(tried, baseline, tol.score)
        flip = restoring[0] if restoring and not restoring[0].reverts else None
        how = _how_files_changed(golden.probes, data, by_id, manifest)
        lead, cause = _data_lead(data, comparison, lead, flip, how), "data"
    if data is not None:
        sections.append(("the data against the golden's:", _data_lines(data)))

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
            f" (max score diff {_num(baseline.max_diff)})"
        ]
        for c in ranked[:SHOWN]:
            if c.error:
                continue
            # ✓ only for a flip that changed the probes' outputs and brought them back: a no-op
            # matches whatever the manifest as it is matches, and proves nothing.
            mark = "✓ " if _restores(c, baseline, tol.score) else ""
            reverts = f" (undoes {', '.join(x.path for x in c.reverts)})" if c.reverts else ""
            noop = ", the same outputs as the manifest as it is" if c.noop else ""
            lines.append(
                f"{mark}with {c.label}{reverts}: {c.agree}/{c.probes} match"
                f" (max score diff {_num(c.max_diff)}{noop})"
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

    env_lines = [f"{k}: {_env_change(k, a, b)}" for k, a, b in env_changes[:12]] or ["none"]
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


def _num(value: float) -> str:
    if not math.isfinite(value):
        return "-"
    return "0" if value == 0 else f"{value:.2g}"


def _most_moved(
    golden: Results, evaluation: Evaluation, shared: Sequence[str], tol: float
) -> list[str]:
    index = {sample: i for i, sample in enumerate(evaluation.results.ids)}
    g_index = {sample: i for i, sample in enumerate(golden.ids)}
    moved = []
    for sample in shared:
        g, n = g_index[sample], index[sample]
        now = take_scores(evaluation.scores, np.asarray([n]), golden.topk[g : g + 1])[0]
        if np.abs(now - golden.topk_scores[g]).max() > tol:
            moved.append(sample)
    return moved


def _evaluate(
    cf: Counterfactual,
    scores: np.ndarray,
    manifest: Manifest,
    golden_sub: Results,
    samples: list[Sample],
) -> tuple[int, float]:
    results = results_of(manifest, samples, scores)
    c = compare(golden_sub, results, scores, manifest.tolerances)
    return int(round(c.agreement * c.samples)), c.max_score_diff


def _run_counterfactuals(
    manifest: Manifest,
    golden: Golden,
    evaluation: Evaluation,
    ids: list[str],
    recorded: tuple[Step, ...] | None,
    changes: list[Change],
) -> tuple[list[Counterfactual], Counterfactual]:
    by_id = {s.id: s for s in evaluation.samples}
    samples = [by_id[i] for i in ids]
    golden_sub = _subset(golden.results, ids)
    now_sub = _subset(evaluation.results, ids)
    rows = np.asarray([evaluation.results.ids.index(i) for i in ids], dtype=np.int64)
    base = compare(golden_sub, now_sub, score_rows(evaluation.scores, rows), manifest.tolerances)
    baseline = Counterfactual(
        "the manifest as it is",
        tuple(manifest.input.preprocess),
        agree=int(round(base.agreement * base.samples)),
        probes=len(ids),
        max_diff=base.max_score_diff,
    )
    model_changed = any(c.area == "model" for c in changes)
    candidates = _candidates(manifest, recorded, changes, model_changed)
    runner = evaluation.runner
    assert runner is not None
    screen = samples[:SCREEN]
    outcomes = score_pipelines(runner, manifest, screen, [c.steps for c in candidates])
    for c, o in zip(candidates, outcomes):
        if o.error or o.scores is None:
            c.error = o.error or "no scores"
            continue
        c.agree, c.max_diff = _evaluate(
            c, o.scores, manifest, _subset(golden_sub, ids[:SCREEN]), screen
        )
        c.probes = len(screen)
        c.noop = _same_scores(o.scores, score_rows(evaluation.scores, rows[: len(screen)]))
    if len(samples) > len(screen):
        ok = sorted((c for c in candidates if not c.error), key=Counterfactual.key)
        # Only a flip that brings back every screened probe can explain the drift: the others
        # keep their screening figures (a fraction of the cost of running them on every probe).
        finalists = [c for c in ok[:FINALISTS] if c.agree == c.probes]
        rest = samples[len(screen) :]
        outcomes = score_pipelines(runner, manifest, rest, [c.steps for c in finalists])
        for c, o in zip(finalists, outcomes):
            if o.error or o.scores is None:
                continue  # keep its screening figures
            agree, diff = _evaluate(
                c, o.scores, manifest, _subset(golden_sub, ids[len(screen) :]), rest
            )
            c.agree += agree
            c.max_diff = max(c.max_diff, diff)
            c.probes = len(samples)
    return candidates, baseline


# Outputs this close to the manifest's own are the same outputs (a batch of another size may
# round the last bit differently).
_NOOP_ATOL = 1e-6


def _same_scores(flipped: Any, as_is: AnyScores) -> bool:
    """Whether a flip's scores (a full matrix) equal the manifest's as it is: a no-op flip
    proves nothing. A streamed evaluation kept only some classes per row: those are compared
    (the flip's top-k among them, so a flip that moves any prediction differs)."""
    if flipped.shape != as_is.shape:
        return False
    if isinstance(as_is, KeptScores):
        at_kept = np.take_along_axis(flipped, as_is.classes.astype(np.intp), axis=1)
        return bool(np.allclose(at_kept, as_is.values, rtol=0.0, atol=_NOOP_ATOL))
    return bool(np.allclose(flipped, as_is, rtol=0.0, atol=_NOOP_ATOL))


def _reproduces(c: Counterfactual, score_tol: float) -> bool:
    return c.probes > 0 and c.agree == c.probes and c.max_diff <= score_tol


def _restores(c: Counterfactual, baseline: Counterfactual, score_tol: float) -> bool:
    """Whether a counterfactual brings the probes back: every probe prediction matches (or the
    scores come back within tolerance), clearly better than the manifest as it is."""
    if c.error or not c.probes or c.noop:
        return False
    if _reproduces(c, score_tol):
        return not _reproduces(baseline, score_tol)
    full = c.agree == c.probes and c.probes >= baseline.probes // 2
    return full and (c.fraction > baseline.fraction or c.max_diff < baseline.max_diff / 10)


def _lead(
    changes: list[Change],
    steps_report: probe_store.StepReport,
    tried: list[Counterfactual],
    baseline: Counterfactual | None,
    env_changes: list[tuple[str, Any, Any]],
    score_tol: float,
    transform: str | None = None,
    permutation: str | None = None,
) -> tuple[str, str]:
    model_changes = [c for c in changes if c.area == "model"]
    pre_changes = [c for c in changes if c.area == "preprocess"]
    model_text = ""
    if model_changes:
        # The checksum says it best: a path can move without the model changing.
        telling = [c for c in model_changes if c.path.endswith("sha256")] or model_changes
        model_text = "the model changed (" + "; ".join(c.text() for c in telling[:2]) + ")"
    ranked = _restoring(tried, baseline, score_tol)
    best = ranked[0] if ranked else None
    if best is not None:
        category = best.category or "preprocessing"
        how = (
            "and their scores are within tolerance"
            if _reproduces(best, score_tol)
            else f"(max score diff {_num(best.max_diff)})"
        )
        evidence = (
            f"with {best.label}, {best.agree}/{best.probes} probe predictions match the golden "
            + how
        )
        # Flips that give exactly the same outputs here (nearest and OpenCV's linear on 3×
        # block images): name them, this data cannot tell them apart.
        ties = [
            c.label.split(" instead of ")[0]
            for c in ranked[1:]
            if c.agree == best.agree and c.probes == best.probes and c.max_diff == best.max_diff
        ]
        if ties:
            verb = "do" if len(ties) > 1 else "does"
            evidence += f" (as {verb} {_and(ties[:3])}, identical on these probes)"
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
        env = _relevant_env(env_changes, steps_report)
        where = f" (the environment changed: {_env_text(env)})" if env else ""
        return (
            f"Likely cause: {category} — {evidence}: the model or its golden expects "
            f"{_expected(best.label)}{where}.",
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
        env = _relevant_env(env_changes, steps_report) or env_changes[:3]
        changed = f", and {_env_text(env)}" if env else ""
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
        runtime = _model_run_env(env_changes)[:4] or env_changes[:3]
        where = f": {_env_text(runtime)}" if runtime else ""
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


def _restoring(
    tried: list[Counterfactual], baseline: Counterfactual | None, score_tol: float
) -> list[Counterfactual]:
    """The flips that bring the probes back, best first."""
    if not tried or baseline is None:
        return []
    return sorted((c for c in tried if _restores(c, baseline, score_tol)), key=Counterfactual.key)


def _class_permutation(golden: Results, evaluation: Evaluation, score_tol: float) -> str | None:
    """When the model's output classes were exchanged: every shared sample's recorded top-k
    scores come back, in order, on other classes, and those classes map one to one (a
    permutation, the same on every sample). The sentence that names it, or None."""
    now = evaluation.results
    index = {sample: i for i, sample in enumerate(now.ids)}
    k = min(golden.topk.shape[1], now.topk.shape[1])
    mapping: dict[int, int] = {}
    worst, samples = 0.0, 0
    for g, sample in enumerate(golden.ids):
        n = index.get(sample)
        if n is None:
            continue
        diff = float(np.abs(now.topk_scores[n, :k] - golden.topk_scores[g, :k]).max())
        if not diff <= score_tol:
            return None
        for old, new in zip(golden.topk[g, :k].tolist(), now.topk[n, :k].tolist()):
            if mapping.setdefault(int(old), int(new)) != new:
                return None
        worst, samples = max(worst, diff), samples + 1
    moved = {old: new for old, new in mapping.items() if old != new}
    if not samples or not moved or set(moved) != set(moved.values()):
        return None
    pairs, said = [], set()
    for old, new in sorted(moved.items()):
        if old in said:
            continue
        if moved.get(new) == old:
            pairs.append(f"{old} ↔ {new}")
            said |= {old, new}
        else:
            pairs.append(f"{old} → {new}")
            said.add(old)
    return (
        f"its output classes are permuted ({', '.join(pairs[:6])}{' …' if len(pairs) > 6 else ''}"
        f"): on all {samples} samples the golden's top-{k} scores come back on the exchanged "
        f"classes (max diff {_num(worst)})"
    )


# Block means (16 × 16 grid, 0–255 levels) of a decoded picture re-encoded lossily move by a few
# levels; another picture's move by tens.
_REENCODED_LEVELS = 4.0


def _how_files_changed(
    probes: Any, data: DataChange, by_id: Mapping[str, Sample], manifest: Manifest
) -> str:
    """What the changed files among the golden's step probes are, from their decoded pixels
    against the decode fingerprints the golden recorded: the same pixels (a lossless
    re-encoding, or metadata only), the same pictures re-encoded (same size, block means
    within a few levels), or other pictures (then nothing is said: the file list says it)."""
    rows = probes.get("fingerprints") if isinstance(probes, Mapping) else None
    decode = next((s for s in manifest.input.preprocess if s.op == "decode"), None)
    if not isinstance(rows, list) or decode is None:
        return ""
    same, close, levels = 0, 0, 0.0
    for row in rows:
        if not (isinstance(row, list) and len(row) == 4 and row[2] == "decode"):
            continue
        sample = by_id.get(str(row[0]))
        if sample is None or sample.id not in data.ids or not isinstance(row[3], Mapping):
            continue
        try:
            now = probe_store.fingerprint(probe_store.trace([decode], sample)[0])
        except Exception:  # a file that no longer decodes: the evidence says so elsewhere
            return ""
        then = row[3]
        if now.get("sha256") == then.get("sha256"):
            same += 1
            continue
        thumbs = (np.asarray(now.get("thumb"), float), np.asarray(then.get("thumb"), float))
        if list(now.get("shape", [])) != list(then.get("shape", [])) or (
            thumbs[0].shape != thumbs[1].shape
        ):
            return ""
        moved = float(np.abs(thumbs[0] - thumbs[1]).max())
        if moved > _REENCODED_LEVELS:
            return ""
        close += 1
        levels = max(levels, moved)
    if same + close == 0:
        return ""
    if close == 0:
        return (
            f"the {same} changed files among the step probes decode to the very same pixels "
            "as the golden's (re-encoded losslessly, or metadata only)"
        )
    return (
        f"the {same + close} changed files among the step probes are the same pictures "
        f"re-encoded: same size, block means within {levels:.1f} levels of the golden's"
    )


def _data_lead(
    data: DataChange,
    comparison: Comparison,
    other: str,
    flip: Counterfactual | None = None,
    how: str = "",
) -> str:
    """The lead when the data changed: what changed (and how, where the decoded probes tell:
    ``how``), then whether it covers the drift. A flip that brings the probes back on the
    changed data is the more specific cause: it leads."""
    lead = "Likely cause: the data — " + "; ".join(data.parts()) + (f"; {how}" if how else "")
    moved = [c.id for c in comparison.changed]
    elsewhere = [i for i in moved if i not in data.ids]
    rest = other.removeprefix("Likely cause")
    if flip is not None and data.files and not elsewhere:
        return (
            f"Likely cause: {flip.category or 'preprocessing'}, in the changed data — "
            + "; ".join(data.parts())
            + f", and with {flip.label}, {flip.agree}/{flip.probes} probe predictions match the "
            f"golden: the new files need {_expected(flip.label)}."
        )
    if moved and not elsewhere:
        return lead + f"; every sample whose prediction changed ({len(moved)}) is among them."
    if elsewhere:
        return (
            lead + f". But {len(elsewhere)} of the {len(moved)} samples whose prediction changed "
            f"have the golden's data, so something else changed too — likely cause{rest}"
        )
    if data.labels and not data.files and not data.added:
        return lead + "; every prediction is the golden's: the accuracy moved with the labels."
    worst = comparison.max_score_diff_id
    if worst and worst not in data.ids and "score" in comparison.failures:
        return (
            lead + f". But the largest score difference is on {worst}, whose data is the "
            f"golden's, so something else changed too — likely cause{rest}"
        )
    return lead + "."


def _data_lines(data: DataChange) -> list[str]:
    lines = data.parts()
    if not data.files_known:
        lines.append(
            "the golden records no checksum of its files (recorded before pytest-mlrepro kept "
            "them; --mlrepro-update adds them): only labels and the sample set are compared"
        )
    elif not data.changed:
        lines.append(f"unchanged: the {data.samples} files (sha256) and their labels")
    return lines


def _score_transform(
    manifest: Manifest,
    golden: Golden,
    comparison: Comparison,
    evaluation: Evaluation,
    changes: list[Change],
) -> str | None:
    """When every shared sample ranks its classes as the golden did (its recorded top-k, in
    order) and only the scores moved: the sentence that says so and why; else None."""
    g, now = golden.results, evaluation.results
    index = {sample: i for i, sample in enumerate(now.ids)}
    shared = [i for i, sample in enumerate(g.ids) if sample in index]
    if not shared or comparison.changed or "score" not in comparison.failures:
        return None
    k = min(g.topk.shape[1], now.topk.shape[1])
    rows = np.asarray([index[g.ids[i]] for i in shared], np.int64)
    if not np.array_equal(g.topk[shared, :k], now.topk[rows, :k]):
        return None
    lead = (
        f"the ranking is identical to the golden's on every sample (top-{k} classes in the "
        f"same order on all {len(shared)}), only the scores moved (max diff "
        f"{_num(comparison.max_score_diff)} on {comparison.max_score_diff_id})"
    )
    post = [c for c in changes if c.path.startswith("postprocess")]
    if post:
        return f"{lead}: the manifest {' and '.join(c.brief() for c in post)}"
    if manifest.postprocess.softmax and _outputs_are_probabilities(manifest, evaluation):
        return (
            f"{lead}: the model's own outputs are already probabilities (non-negative, summing "
            "to 1: it applies its own softmax) and the manifest applies postprocess.softmax on "
            "top (set postprocess.softmax: false, or export the model without its softmax)"
        )
    return f"{lead}: the score transform changed (a softmax, a temperature or a scale)"


def _outputs_are_probabilities(manifest: Manifest, evaluation: Evaluation, n: int = 8) -> bool:
    """Whether the model's raw outputs (before the manifest's softmax) on a few samples are
    already probability vectors. Re-runs them on the loaded model; False if it cannot."""
    if evaluation.runner is None or not evaluation.samples:
        return False
    subset = ResolvedDataset(
        root=evaluation.samples[0].path.parent,
        samples=tuple(evaluation.samples[:n]),
        class_names=None,
        origin="diagnosis probes",
    )
    try:
        raw = run_model(evaluation.runner, manifest, subset).astype(np.float64)
    except Exception:  # a diagnosis never raises: without the outputs, make no claim
        return False
    return bool(np.all(raw >= -1e-6) and np.allclose(raw.sum(axis=1), 1.0, atol=1e-4))


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _relevant_env(
    env_changes: list[tuple[str, Any, Any]], report: probe_store.StepReport
) -> list[tuple[str, Any, Any]]:
    step = report.environment_step or report.first
    keys = _ENV_FOR_STEP.get(step.op, ()) if step is not None else ()
    return [e for e in env_changes if e[0] in keys]


def _expected(label: str) -> str:
    """What a flip says is expected: the part before 'instead of'."""
    return label.split(" instead of ")[0]


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
    "Change",
    "Counterfactual",
    "Diagnosis",
    "diagnose",
    "explain",
    "manifest_diff",
    "probe_order",
    "recorded_steps",
]
