"""The counterfactual probes: which pipelines to try (edits undone, pitfalls flipped, in-graph
steps dropped), run screening-first on the probe samples, and which bring the probes back."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import zip_longest
from typing import Any, Literal

import numpy as np

from ..data import Sample
from ..evaluation import Evaluation, results_of
from ..goldens import (
    AnyScores,
    Comparison,
    Golden,
    KeptScores,
    Results,
    compare,
    score_rows,
    take_scores,
)
from ..manifest import Manifest
from ..pipeline import COLOUR_ORDERS, Step
from . import _pitfalls as pitfalls
from . import _step_fingerprints as probe_store
from ._counterfactual import score_pipelines
from ._manifest_diff import ABSENT, Change
from ._pitfalls import show_value

# Why no counterfactual ran: turned off (probe count 0), no model loaded, no sample in common.
NoTrial = Literal["off", "no model", "disjoint"]
# A counterfactual's kind and its facts, worded in report/ (_diagnosis_lead.FLIP_LABELS): the
# recorded step (op, values), one put back (step), an added one removed (op), every edit undone,
# a step the new model does itself (step), channels reordered (op, moved), the manifest as it is,
# a pitfall (its facts: _pitfalls.Flip).
Said = tuple[str, ...]
SCREEN = 8  # probes every counterfactual runs on first; only those that bring all of them back
FINALISTS = 4  # (at most this many) then run on every probe


@dataclass
class Counterfactual:
    """One pipeline tried on the probes, and how close it brings them to the golden."""

    label: Said  # what it is, worded by report/ to read after "with": "RGB instead of BGR"
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
    pairs = probe_store.align_steps([s.op for s in recorded], [s.op for s in now])
    for now_index, rec_index in pairs:
        if now_index is not None and rec_index is not None:
            if now[now_index] == recorded[rec_index]:
                continue
            steps = (*now[:now_index], recorded[rec_index], *now[now_index + 1 :])
            mine = [
                c for c in pre if c.path.split(".preprocess", 1)[1].startswith(f"[{now_index}]")
            ]
            values = ", ".join(f"{c.path.rsplit('.', 1)[-1]} {show_value(c.old)}" for c in mine)
            label: Said = ("revert", now[now_index].op, values)
        elif now_index is None:
            assert rec_index is not None
            before = [n for n, r in pairs if n is not None and r is not None and r < rec_index]
            at = (max(before) + 1) if before else 1
            steps = (*now[:at], recorded[rec_index], *now[at:])
            mine = [c for c in pre if c.new is ABSENT and c.path.endswith(f"[{rec_index}]")]
            label = ("put back", pitfalls.describe_step(recorded[rec_index]))
        else:
            steps = (*now[:now_index], *now[now_index + 1 :])
            mine = [c for c in pre if c.old is ABSENT and c.path.endswith(f"[{now_index}]")]
            label = ("removed", now[now_index].op)
        out.append(Counterfactual(label, tuple(steps), _category(mine), mine))
    if recorded != now:  # (a duplicate of a single revert is dropped by the caller)
        out.append(Counterfactual(("recorded",), recorded, _category(pre), pre))
    return out


def _category(changes: list[Change]) -> str | None:
    """The pitfall category of manifest edits that all have the same one."""
    found = {c.category for c in changes if c.category}
    return found.pop() if len(found) == 1 else None


# Manifest steps a re-exported model may have taken inside its graph (then the step runs twice):
# what each one's removal is filed under.
_IN_GRAPH = {"normalize": pitfalls.MEAN_STD, "scale": pitfalls.MEAN_STD, "resize": pitfalls.RESIZE}


def _in_graph_candidates(now: tuple[Step, ...]) -> list[Counterfactual]:
    """Each step a changed model may do itself, dropped on its own (no double normalisation)."""
    return [
        Counterfactual(("in graph", pitfalls.describe_step(step)), (*now[:i], *now[i + 1 :]), cat)
        for i, step in enumerate(now)
        if (cat := _IN_GRAPH.get(step.op)) is not None
    ]


def _reorder_candidates(
    now: tuple[Step, ...], report: probe_store.StepReport | None
) -> list[Counterfactual]:
    """Channels put back in the golden's order after the first step that shows them permuted."""
    shown = [(d, d.delta.order) for d in (report.steps if report else []) if d.delta]
    diff, order = next(((d, o) for d, o in shown if o and d.now_index is not None), (None, None))
    if diff is None or order is None or diff.now_index is None:
        return []
    state = probe_store.states(now[: diff.now_index + 1])[-1]
    if state.order in COLOUR_ORDERS and order == (2, 1, 0, *range(3, len(order))):
        return []
    back = pitfalls.Reorder(tuple(int(i) for i in np.argsort(order)))
    moved = ", ".join(f"{i}←{j}" for i, j in enumerate(order) if i != j)
    steps = (*now[: diff.now_index + 1], back, *now[diff.now_index + 1 :])
    return [Counterfactual(("reorder", diff.op, moved), steps, pitfalls.BANDS)]


def _candidates(
    manifest: Manifest,
    recorded: tuple[Step, ...] | None,
    changes: list[Change],
    report: probe_store.StepReport | None = None,
) -> list[Counterfactual]:
    now = tuple(manifest.input.preprocess)
    found: dict[tuple[Step, ...], Counterfactual] = {}
    reverts = _revert_candidates(now, recorded, changes) if recorded is not None else []
    model_changed = any(c.area == "model" for c in changes)
    in_graph = _in_graph_candidates(now) if model_changed else []
    for c in (*reverts, *in_graph, *_reorder_candidates(now, report)):
        if pitfalls.valid_steps(c.steps, manifest.input):
            found.setdefault(c.steps, c)
    # Never decided by what the process happens to have imported: the same drift gets the same
    # diagnosis.
    backends = pitfalls.backends_in_play(manifest, recorded or ())
    for v in pitfalls.variants(manifest, backends):
        existing = found.get(v.steps)
        if existing is not None:
            # The same pipeline as a revert: keep the revert's evidence, name the pitfall.
            existing.category = v.pitfall
            existing.label = ("pitfall", *v.flip)
            continue
        found[v.steps] = Counterfactual(("pitfall", *v.flip), v.steps, v.pitfall)
    for order, c in enumerate(found.values()):
        c.order = order
    return list(found.values())


def probe_order(ids: Sequence[str], n: int, changed: Iterable[str]) -> list[str]:
    """``n`` probes, changed and unchanged interleaved: any prefix (screening) holds both."""
    chosen = probe_store.select(ids, n, prefer=set(changed))
    wanted = set(changed)
    a = [i for i in chosen if i in wanted]
    b = [i for i in chosen if i not in wanted]
    return [i for pair in zip_longest(a, b) for i in pair if i is not None]


def most_moved(
    golden: Results, evaluation: Evaluation, shared: Sequence[str], tol: float
) -> list[str]:
    """The samples of ``shared`` whose scores of the golden's top-k moved beyond ``tol``."""
    then = golden.subset(shared)
    now = take_scores(evaluation.scores, evaluation.results.rows(shared), then.topk)
    return [s for s, diff in zip(shared, np.abs(now - then.topk_scores).max(axis=1)) if diff > tol]


def _evaluate(
    scores: np.ndarray, manifest: Manifest, golden_sub: Results, samples: list[Sample]
) -> tuple[int, float]:
    results = results_of(manifest, samples, scores)
    c = compare(golden_sub, results, scores, manifest.tolerances)
    return int(round(c.agreement * c.samples)), c.max_score_diff


def run_counterfactuals(
    manifest: Manifest,
    golden: Golden,
    comparison: Comparison,
    evaluation: Evaluation,
    recorded: tuple[Step, ...] | None,
    changes: list[Change],
    probes: int,
    report: probe_store.StepReport | None = None,
) -> CounterfactualEvidence:
    """The probe samples re-run with one flip at a time, or why none could run."""
    score_tol = manifest.tolerances.score
    present = {s.id for s in evaluation.samples}
    shared = [i for i in golden.results.ids if i in present]
    note: NoTrial | None = (
        "off" if probes <= 0 else "no model" if evaluation.runner is None
        else "disjoint" if not shared else None
    )  # fmt: skip
    if note is not None:
        return CounterfactualEvidence((), None, score_tol, note)
    changed = [c.id for c in comparison.changed]
    if not changed:  # same predictions, scores moved: prefer the samples that moved most
        changed = most_moved(golden.results, evaluation, shared, score_tol)
    ids = probe_order(shared, probes, changed)
    by_id = {s.id: s for s in evaluation.samples}
    samples = [by_id[i] for i in ids]
    golden_sub = golden.results.subset(ids)
    now_sub = evaluation.results.subset(ids)
    rows = evaluation.results.rows(ids)
    base = compare(golden_sub, now_sub, score_rows(evaluation.scores, rows), manifest.tolerances)
    baseline = Counterfactual(
        ("as is",),
        tuple(manifest.input.preprocess),
        agree=int(round(base.agreement * base.samples)),
        probes=len(ids),
        max_diff=base.max_score_diff,
    )
    candidates = _candidates(manifest, recorded, changes, report)
    runner = evaluation.runner
    assert runner is not None
    screen = samples[:SCREEN]
    outcomes = score_pipelines(runner, manifest, screen, [c.steps for c in candidates])
    for c, o in zip(candidates, outcomes):
        if o.error or o.scores is None:
            c.error = o.error or "no scores"
            continue
        c.agree, c.max_diff = _evaluate(o.scores, manifest, golden_sub.subset(ids[:SCREEN]), screen)
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
            agree, diff = _evaluate(o.scores, manifest, golden_sub.subset(ids[len(screen) :]), rest)
            c.agree += agree
            c.max_diff = max(c.max_diff, diff)
            c.probes = len(samples)
    return CounterfactualEvidence(candidates, baseline, score_tol)


# Outputs this close to the manifest's own are the same outputs (a batch of another size may
# round the last bit differently).
_NOOP_ATOL = 1e-6


def _same_scores(flipped: Any, as_is: AnyScores) -> bool:
    """Whether a flip's scores equal the manifest's as it is (a no-op proves nothing); for a
    streamed evaluation, on the classes it kept."""
    if flipped.shape != as_is.shape:
        return False
    if isinstance(as_is, KeptScores):
        at_kept = np.take_along_axis(flipped, as_is.classes.astype(np.intp), axis=1)
        return bool(np.allclose(at_kept, as_is.values, rtol=0.0, atol=_NOOP_ATOL))
    return bool(np.allclose(flipped, as_is, rtol=0.0, atol=_NOOP_ATOL))


def reproduces(c: Counterfactual, score_tol: float) -> bool:
    return c.probes > 0 and c.agree == c.probes and c.max_diff <= score_tol


@dataclass(frozen=True)
class CounterfactualEvidence:
    """Probe samples re-run one flip (or undone edit) at a time; ``note``: why none ran."""

    tried: Sequence[Counterfactual]
    baseline: Counterfactual | None
    score_tol: float
    note: NoTrial | None = None

    def restores(self, c: Counterfactual) -> bool:
        """Whether ``c`` brings the probes back: every probe prediction matches (or the scores
        come back within tolerance), clearly better than the manifest as it is."""
        base, tol = self.baseline, self.score_tol
        if base is None or c.error or not c.probes or c.noop:
            return False
        if reproduces(c, tol):
            return not reproduces(base, tol)
        full = c.agree == c.probes and c.probes >= base.probes // 2
        return full and (c.fraction > base.fraction or c.max_diff < base.max_diff / 10)

    def restoring(self) -> list[Counterfactual]:
        """The flips that bring the probes back, best first."""
        return sorted(filter(self.restores, self.tried), key=Counterfactual.key)
