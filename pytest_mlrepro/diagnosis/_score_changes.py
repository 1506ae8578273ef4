"""Drifts that keep every ranking: the scores transformed (a softmax applied twice, a
temperature), or the output classes permuted. Each check gives its facts, or None."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data import ResolvedDataset
from ..evaluation import Evaluation, run_model
from ..goldens import Comparison, Golden, Results
from ..manifest import Manifest
from ._class_maps import shared_rows
from ._manifest_diff import Change


@dataclass(frozen=True)
class ClassPermutation:
    """The golden's top-k scores come back on exchanged classes: ``pairs`` (golden's, this
    run's, whether the two are swapped) on all ``samples``."""

    pairs: tuple[tuple[int, int, bool], ...]
    samples: int
    k: int
    max_diff: float


@dataclass(frozen=True)
class ScoreTransform:
    """Every ranking is the golden's, only the scores moved; ``post``: the postprocess edits;
    ``probabilities``: the model outputs probabilities already under the manifest's softmax."""

    k: int
    samples: int
    max_diff: float
    max_id: str
    post: tuple[Change, ...] = ()
    probabilities: bool = False


def class_permutation(
    golden: Results, evaluation: Evaluation, score_tol: float
) -> ClassPermutation | None:
    """The model's output classes exchanged: the golden's top-k scores come back, in order, on
    other classes, mapped one to one the same on every sample."""
    g, n = shared_rows(golden, evaluation.results)
    k = min(g.topk.shape[1], n.topk.shape[1])
    diffs = np.abs(n.topk_scores[:, :k] - g.topk_scores[:, :k]).max(axis=1)
    if not g.ids or not np.all(diffs <= score_tol):
        return None
    mapping: dict[int, int] = {}
    for old, new in zip(g.topk[:, :k].ravel().tolist(), n.topk[:, :k].ravel().tolist()):
        if mapping.setdefault(old, new) != new:
            return None
    moved = {old: new for old, new in mapping.items() if old != new}
    if not moved or set(moved) != set(moved.values()):
        return None
    pairs: list[tuple[int, int, bool]] = []
    said: set[int] = set()
    for old, new in sorted(moved.items()):
        if old not in said:
            swap = moved.get(new) == old
            pairs.append((old, new, swap))
            said |= {old, new} if swap else {old}
    return ClassPermutation(tuple(pairs), len(g.ids), k, float(diffs.max()))


def score_transform(
    manifest: Manifest,
    golden: Golden,
    comparison: Comparison,
    evaluation: Evaluation,
    changes: list[Change],
) -> ScoreTransform | None:
    """When every shared sample ranks its classes as the golden did (its recorded top-k, in
    order) and only the scores moved; else None."""
    g, now = shared_rows(golden.results, evaluation.results)
    if not g.ids or comparison.changed or "score" not in comparison.failures:
        return None
    k = min(g.topk.shape[1], now.topk.shape[1])
    if not np.array_equal(g.topk[:, :k], now.topk[:, :k]):
        return None
    post = tuple(c for c in changes if c.path.startswith("postprocess"))
    probabilities = not post and bool(manifest.postprocess.softmax)
    probabilities = probabilities and _outputs_are_probabilities(manifest, evaluation)
    return ScoreTransform(
        k, len(g.ids), comparison.max_score_diff, comparison.max_score_diff_id or "", post,
        probabilities,
    )  # fmt: skip


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
