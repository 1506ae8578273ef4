"""Accuracy, per-sample agreement and score distance between a run and its golden."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ..errors import GoldenError, NonFiniteOutputs
from ..manifest import Tolerances

# A score matrix (N, classes): logits or probabilities, float32 from a model, float64 in goldens.
Scores = npt.NDArray[np.floating[Any]]
# Class indices or labels: (N,) or (N, k) integers.
Indices = npt.NDArray[np.integer[Any]]


def nonfinite_rows(scores: Scores) -> npt.NDArray[np.intp]:
    """Indices of the rows of ``scores`` holding a NaN or ±Inf (empty when all are finite)."""
    if len(scores) == 0:  # no rows (a shard of a small data set may hold no sample)
        return np.zeros(0, np.intp)
    return np.flatnonzero(~np.isfinite(scores).reshape(len(scores), -1).all(axis=1))


def require_finite(scores: Scores, ids: Sequence[str] | None = None) -> None:
    """Refuse NaN or ±Inf scores: a NaN row's top-k is silently "some class", a NaN distance is
    never above a tolerance."""
    bad = nonfinite_rows(scores)
    if len(bad):
        names = [ids[i] if ids is not None else f"row {i}" for i in bad]
        raise NonFiniteOutputs(names, len(scores))


def softmax(logits: Scores) -> npt.NDArray[np.float64]:
    require_finite(logits)
    shifted = logits.astype(np.float64) - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    probabilities: npt.NDArray[np.float64] = exp / exp.sum(axis=1, keepdims=True)
    return probabilities


def top_k(scores: Scores, k: int) -> npt.NDArray[np.intp]:
    """Indices of the ``k`` highest scores per row, best first; ties go to the lower index."""
    require_finite(scores)
    k = min(k, scores.shape[1])
    return np.argsort(-scores, axis=1, kind="stable")[:, :k]


def accuracy(topk: Indices, labels: Indices) -> tuple[float, float]:
    """(top-1, top-5) accuracy in percent."""
    if len(labels) == 0:
        return 0.0, 0.0
    top1 = float(np.mean(topk[:, 0] == labels) * 100.0)
    top5 = float(np.mean(np.any(topk[:, :5] == labels[:, None], axis=1)) * 100.0)
    return top1, top5


@dataclass(frozen=True)
class Results:
    """Per-sample results in a form shared by fresh runs and goldens."""

    ids: tuple[str, ...]
    labels: Indices  # (N,)
    topk: Indices  # (N, k)
    topk_scores: Scores  # (N, k)

    @property
    def top1(self) -> float:
        return accuracy(self.topk, self.labels)[0]

    @property
    def top5(self) -> float:
        return accuracy(self.topk, self.labels)[1]

    def rows(self, ids: Sequence[str]) -> npt.NDArray[np.int64]:
        """The row of each of ``ids`` (KeyError: one that is not here)."""
        index = {sample: i for i, sample in enumerate(self.ids)}
        return np.asarray([index[i] for i in ids], dtype=np.int64)

    def subset(self, ids: Sequence[str]) -> Results:
        """The results of ``ids``, in that order (KeyError: one that is not here)."""
        rows = self.rows(ids)
        return Results(tuple(ids), self.labels[rows], self.topk[rows], self.topk_scores[rows])


@dataclass(frozen=True)
class KeptScores:
    """Per sample, the scores of a few ``classes`` (its top-k and each golden's), so memory grows
    with samples × k; a class a row did not keep is a KeyError, never a guess."""

    classes: Indices  # (N, m)
    values: npt.NDArray[np.float64]  # (N, m)
    width: int  # the number of classes of the full matrix

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.classes), self.width

    def __len__(self) -> int:
        return len(self.classes)


AnyScores = Scores | KeptScores
"""A full score matrix, or the part of one a streamed evaluation kept."""


def take_scores(scores: AnyScores, rows: Indices, cols: Indices) -> npt.NDArray[np.floating[Any]]:
    """Like ``np.take_along_axis(full[rows], cols, axis=1)``."""
    if not isinstance(scores, KeptScores):
        taken: npt.NDArray[np.floating[Any]] = np.take_along_axis(scores[rows], cols, axis=1)
        return taken
    kept = scores.classes[rows]  # (m, M)
    match = kept[:, None, :] == np.asarray(cols)[:, :, None]  # (m, k, M)
    found = match.any(axis=2)
    if not found.all():
        row, col = (int(x[0]) for x in np.nonzero(~found))
        raise KeyError(
            f"class {int(cols[row, col])} of row {int(rows[row])} was not kept by the "
            "streamed evaluation (only its top-k and its goldens' top-k classes are)"
        )
    picked: npt.NDArray[np.float64] = np.take_along_axis(
        scores.values[rows], match.argmax(axis=2), axis=1
    )
    return picked


def score_rows(scores: AnyScores, rows: Indices) -> AnyScores:
    if isinstance(scores, KeptScores):
        return KeptScores(scores.classes[rows], scores.values[rows], scores.width)
    return scores[rows]


@dataclass(frozen=True)
class Changed:
    id: str
    label: int
    golden: int
    golden_score: float
    now: int
    now_score: float


@dataclass
class Comparison:
    golden_top1: float
    now_top1: float
    golden_top5: float
    now_top5: float
    agreement: float
    samples: int
    changed: list[Changed]
    max_score_diff: float
    max_score_diff_id: str
    tolerances: Tolerances
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    k: int = 5  # what "top-5" counts: the results' top-k, at most 5 (top_k 3: top-3)

    @property
    def failures(self) -> list[str]:
        """The levels that are outside tolerance, in the order a reader should look at them."""
        tol = self.tolerances
        out = []
        if self.missing or self.extra:
            out.append("samples")
        if abs(self.now_top1 - self.golden_top1) > tol.top1 + 1e-9:
            out.append("top1")
        if abs(self.now_top5 - self.golden_top5) > tol.top5 + 1e-9:
            out.append("top5")
        if self.agreement < tol.agreement - 1e-12:
            out.append("agreement")
        if self.max_score_diff > tol.score:
            out.append("score")
        return out

    @property
    def ok(self) -> bool:
        return not self.failures


def compare(golden: Results, now: Results, now_scores: AnyScores, tol: Tolerances) -> Comparison:
    """Non-finite scores are refused on either side (NaN compares as within tolerance)."""
    kept = now_scores.values if isinstance(now_scores, KeptScores) else now_scores
    require_finite(kept, now.ids if len(now.ids) == len(kept) else None)
    require_finite(now.topk_scores, now.ids if len(now.ids) == len(now.topk_scores) else None)
    bad = nonfinite_rows(golden.topk_scores)
    if len(bad):
        shown = ", ".join(golden.ids[i] for i in bad[:5])
        raise GoldenError(
            f"the golden's scores are not finite (NaN or ±Inf) for {len(bad)} samples: {shown}"
        )
    diffs = score_diffs(golden, now, now_scores)
    return comparison_of(golden, now, [diffs[s] for s in golden.ids if s in diffs], tol)


def score_diffs(golden: Results, now: Results, now_scores: AnyScores) -> dict[str, float]:
    """Per sample, the largest score difference at the golden's top-k: what a shard keeps so that
    the merge can rebuild :func:`compare`."""
    g, n = paired_rows(golden, now)
    if not len(g):
        return {}
    now_at_golden = take_scores(now_scores, n, golden.topk[g])
    diffs = np.abs(now_at_golden - golden.topk_scores[g]).max(axis=1)
    return {golden.ids[i]: float(d) for i, d in zip(g.tolist(), diffs)}


def paired_rows(golden: Results, now: Results) -> tuple[Indices, Indices]:
    """The rows of the samples in both, in the golden's order: (golden rows, now rows)."""
    index = {sample: i for i, sample in enumerate(now.ids)}
    shared = [i for i, sample in enumerate(golden.ids) if sample in index]
    g = np.asarray(shared, dtype=np.int64)
    return g, np.asarray([index[golden.ids[i]] for i in shared], dtype=np.int64)


def comparison_of(
    golden: Results, now: Results, diffs: Sequence[float], tol: Tolerances
) -> Comparison:
    """The one place a :class:`Comparison` is made, for a run and for the merge of its shards."""
    g, n = paired_rows(golden, now)
    if len(diffs) != len(g):
        raise ValueError(f"{len(diffs)} score differences for {len(g)} shared samples")
    now_set, golden_set = set(now.ids), set(golden.ids)
    missing = [sample for sample in golden.ids if sample not in now_set]
    extra = [sample for sample in now.ids if sample not in golden_set]
    g_top1 = golden.topk[g, 0] if len(g) else np.zeros(0, np.int64)
    n_top1 = now.topk[n, 0] if len(n) else np.zeros(0, np.int64)
    same = g_top1 == n_top1
    agreement = float(same.mean()) if len(same) else 0.0
    if len(g):
        worst = int(np.asarray(diffs, dtype=np.float64).argmax())
        max_diff, max_id = float(diffs[worst]), golden.ids[int(g[worst])]
    else:
        max_diff, max_id = float("inf"), ""
    changed = [
        Changed(
            id=golden.ids[int(gi)],
            label=int(golden.labels[gi]),
            golden=int(golden.topk[gi, 0]),
            golden_score=float(golden.topk_scores[gi, 0]),
            now=int(now.topk[ni, 0]),
            now_score=float(now.topk_scores[ni, 0]),
        )
        for gi, ni, ok in zip(g, n, same)
        if not ok
    ]
    return Comparison(
        golden_top1=golden.top1,
        now_top1=now.top1,
        golden_top5=golden.top5,
        now_top5=now.top5,
        agreement=agreement,
        samples=len(g),
        changed=changed,
        max_score_diff=max_diff,
        max_score_diff_id=max_id,
        tolerances=tol,
        missing=missing,
        extra=extra,
        # What "top-k" counts; with no sample on a side there is nothing it counts (5).
        k=min(5, now.topk.shape[1], golden.topk.shape[1])
        if len(now.ids) and len(golden.ids)
        else 5,
    )
