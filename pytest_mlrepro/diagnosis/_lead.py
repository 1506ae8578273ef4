"""The lead of a diagnosis as a decision table: the first rule whose facts hold names the most
likely cause. It returns facts (a :class:`Lead`); ``report/_diagnosis_lead.py`` words each rule."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from . import _step_fingerprints as probe_store
from ._class_maps import ClassMap, ClassPermutation, ScoreTransform
from ._environment_diff import EnvChange, EnvironmentStep, model_run_env, relevant_env
from ._layer_fingerprints import LayerReport
from ._manifest_diff import Change
from ._probe_trials import Counterfactual, CounterfactualEvidence, reproduces

# Causes the layer comparison sharpens: no flip explains the drift, the model computes it.
MODEL_CAUSES = ("model", "runtime", "unknown")

# The rules a lead comes from; report/ has one sentence for each.
Rule = Literal[
    "class map", "environment", "flip reverts", "flip model", "flip", "transform model",
    "transform", "class permutation", "environment step", "same steps", "runtime",
    "model", "edits", "step", "unknown", "precision", "data", "data inverted", "data flip",
    "data covers", "data elsewhere", "data labels", "data worst", "class count", "error",
]  # fmt: skip


@dataclass(frozen=True)
class DataFacts:
    """What changed in the data and whether it covers the drift (rules ``data*``)."""

    parts: tuple[str, ...]  # the data change's own parts (goldens.DataChange.parts)
    moved: int  # samples whose prediction changed
    elsewhere: int  # of them, samples whose data is the golden's
    reencoded: Reencoding | None = None
    label_shift: int | None = None  # every changed label moved by this
    worst: str = ""  # the largest score difference, on a sample whose data is the golden's


@dataclass(frozen=True)
class Reencoding:
    """The changed files among the step probes: ``same`` decode to the golden's pixels, ``close``
    are the same pictures re-encoded (block means within ``levels``)."""

    same: int
    close: int
    levels: float


@dataclass(frozen=True)
class Lead:
    """The most likely cause (``cause``) and the facts its rule (``rule``) is worded from."""

    rule: Rule
    cause: str
    model: tuple[Change, ...] = ()  # the model's telling edits
    edits: tuple[Change, ...] = ()  # the preprocessing (or postprocess) edits in play
    flip: Counterfactual | None = None  # the best flip that brings the probes back
    ties: tuple[Counterfactual, ...] = ()  # flips identical to it on these probes
    reproduces: bool = False  # the flip's scores are within tolerance too
    env: tuple[EnvChange, ...] = ()
    step: probe_store.StepDiff | None = None
    env_step: EnvironmentStep | None = None
    class_map: ClassMap | None = None
    permutation: ClassPermutation | None = None
    transform: ScoreTransform | None = None
    layers: LayerReport | None = None  # the first layer that differs, said after the lead
    data: DataFacts | None = None
    other: Lead | None = None  # the lead without the data change (rules ``data*``)
    error: str = ""


@dataclass(frozen=True)
class Facts:
    changes: Sequence[Change]
    steps: probe_store.StepReport
    trials: CounterfactualEvidence
    env_changes: Sequence[EnvChange]
    transform: ScoreTransform | None = None
    permutation: ClassPermutation | None = None
    class_map: ClassMap | None = None
    env_step: EnvironmentStep | None = None
    model: tuple[Change, ...] = field(init=False)
    pre: tuple[Change, ...] = field(init=False)
    ranked: list[Counterfactual] = field(init=False)

    def __post_init__(self) -> None:
        model = [c for c in self.changes if c.area == "model"]
        # The checksum says it best: a path can move without the model changing.
        telling = [c for c in model if c.path.endswith("sha256")] or model
        object.__setattr__(self, "model", tuple(telling[:2]))
        object.__setattr__(self, "pre", tuple(c for c in self.changes if c.area == "preprocess"))
        object.__setattr__(self, "ranked", self.trials.restoring())


def _class_map(f: Facts) -> Lead | None:
    # The predictions are the golden's once their class indices are mapped back: whatever else
    # changed, the indices mean other classes now.
    if f.class_map is None:
        return None
    return Lead("class map", f.class_map.cause, f.model, class_map=f.class_map)


def _environment(f: Facts) -> Lead | None:
    # The manifest is the golden's, yet a step's output is not: what that step runs on changed.
    # A flip that restores the output is a workaround, not the cause.
    if f.env_step is None or any(c.area != "neutral" for c in f.changes):
        return None
    return Lead("environment", "environment", env_step=f.env_step, flip=next(iter(f.ranked), None))


def _flip(f: Facts) -> Lead | None:
    if not f.ranked:
        return None
    best = f.ranked[0]
    # Flips that give exactly the same outputs here (nearest and OpenCV's linear on 3× block
    # images): this data cannot tell them apart.
    ties = tuple(
        c
        for c in f.ranked[1:]
        if (c.agree, c.probes, c.max_diff) == (best.agree, best.probes, best.max_diff)
    )
    rule: Rule = "flip reverts" if best.reverts else "flip model" if f.model else "flip"
    env = relevant_env(f.env_changes, f.steps) if rule == "flip" else []
    return Lead(
        rule, best.category or "preprocessing", f.model, flip=best, ties=ties,
        reproduces=reproduces(best, f.trials.score_tol), env=tuple(env),
    )  # fmt: skip


def _transform(f: Facts) -> Lead | None:
    # Same pixels (or none recorded), same ranking everywhere: the scores were transformed.
    if f.transform is None or f.steps.environment_step is not None or f.steps.first is not None:
        return None
    post = any(c.path.startswith("postprocess") for c in f.changes)
    # Without a postprocess edit the manifest's transform is as recorded: the new model transforms
    # its scores. With one, the edit leads; a model file that changed too kept every ranking.
    rule: Rule = "transform model" if f.model and not post else "transform"
    return Lead(rule, "score transform", f.model, transform=f.transform)


def _permutation(f: Facts) -> Lead | None:
    # Same pixels, and the scores are the golden's once the classes are mapped back.
    if f.permutation is None or f.steps.first is not None or f.pre:
        return None
    return Lead("class permutation", "class permutation", f.model, permutation=f.permutation)


def _environment_step(f: Facts) -> Lead | None:
    step = f.steps.environment_step
    if step is None or f.pre:
        return None
    env = relevant_env(f.env_changes, f.steps) or f.env_changes[:3]
    return Lead("environment step", "environment", env=tuple(env), step=step)


def _same_preprocessing(f: Facts) -> Lead | None:
    if not f.steps.probes or f.steps.first is not None or f.pre:
        return None
    if f.model:
        return Lead("same steps", "model", f.model)
    runtime = model_run_env(f.env_changes)[:4] or f.env_changes[:3]
    return Lead("runtime", "runtime", env=tuple(runtime))


def _edits(f: Facts) -> Lead | None:
    cats = sorted({c.category for c in f.pre if c.category})
    cause = cats[0] if len(cats) == 1 else "preprocessing"
    return Lead("edits", cause, edits=f.pre) if f.pre else None


# Most telling first; the last rule always holds.
RULES: tuple[Callable[[Facts], Lead | None], ...] = (
    _class_map, _environment, _flip, _transform, _permutation, _environment_step,
    _same_preprocessing,
    lambda f: Lead("model", "model", f.model) if f.model and not f.pre else None,
    _edits,
    lambda f: Lead("step", "unknown", step=f.steps.first) if f.steps.first else None,
    lambda f: Lead("unknown", "unknown"),
)  # fmt: skip


def decide(facts: Facts) -> Lead:
    """The lead of the first rule that holds."""
    return next(lead for lead in (rule(facts) for rule in RULES) if lead is not None)


def with_layers(lead: Lead, layers: LayerReport | None) -> Lead:
    """A model cause sharpened: the model's precision changed, or the first layer that differs."""
    if layers is None or lead.cause not in MODEL_CAUSES:
        return lead
    if layers.precision is not None:
        model = tuple(c for c in lead.model if c.path.endswith("sha256"))
        return Lead("precision", "precision", model[:1], layers=layers)
    return replace(lead, layers=layers) if layers.first is not None else lead
