"""Label offsets, class-index maps, score transforms and class permutations, named from the
golden's recorded top-k and this run's with no model run; each check gives its facts, or None."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np

from ..data import ResolvedDataset
from ..evaluation import Evaluation, run_model
from ..goldens import Comparison, Golden, Results
from ..manifest import Manifest
from ._manifest_diff import Change

# A map names the cause only when it brings back nearly every prediction (a few may sit on the
# classes it cannot carry: the last class pushed out of a sliced head) and the predictions as
# they are match rarely: no chance agreement of a near-random model is taken for a map.
_RESTORES = 0.9
INDEX_MAP = "class index map"  # the cause (label offset: a shift, a class added or dropped)
_AS_IS = 0.5


@dataclass(frozen=True)
class ClassMap:
    """A map from the golden's class indices to this run's that restores ``hits`` of
    ``checked`` predictions (``as_is`` of ``total`` match without it)."""

    kind: str  # "shift", "index" or "count"
    hits: int
    checked: int
    as_is: int
    total: int
    k: int = 0  # the shift (kind shift, count: 0 for a class at the end)
    moved: tuple[tuple[int, int], ...] = ()  # (golden's, this run's) classes that moved (index)
    seen: int = 0  # classes seen (index)
    classes: tuple[int, int] = (0, 0)  # (this run's, the golden's) class counts (count)

    @property
    def cause(self) -> str:
        return INDEX_MAP if self.kind == "index" else "label offset"


def shared_rows(golden: Results, now: Results) -> tuple[Results, Results]:
    """The results of the samples both have, in the golden's order: (golden's, this run's)."""
    present = set(now.ids)
    shared = [sample for sample in golden.ids if sample in present]
    return golden.subset(shared), now.subset(shared)


def _pairs(golden: Results, now: Results) -> tuple[np.ndarray, np.ndarray]:
    """As :func:`shared_rows`, top-k classes only, cut to the shorter k."""
    g, n = shared_rows(golden, now)
    k = min(g.topk.shape[1], n.topk.shape[1])
    return g.topk[:, :k], n.topk[:, :k]


def constant_shift(golden: Results, now: Results, classes: int) -> ClassMap | None:
    """Every prediction is the golden's class + k (modulo ``classes``), k ≠ 0."""
    g, n = _pairs(golden, now)
    total = len(g)
    if total < 4 or classes < 2:  # too few to tell a shift from chance
        return None
    offsets = (n[:, 0] - g[:, 0]) % classes
    as_is = int(np.count_nonzero(offsets == 0))
    found = Counter(offsets.tolist()).most_common(1)
    if not found or found[0][0] == 0:
        return None
    k_mod, hits = found[0]
    if hits < _RESTORES * total or as_is > _AS_IS * total:
        return None
    k = int(k_mod) - classes if k_mod > classes // 2 else int(k_mod)  # signed
    # The rest of the top-k moved alike (a shift of the head, not of one class).
    rest = (n[:, 1:] - g[:, 1:]) % classes
    if rest.size and np.count_nonzero(rest == k_mod) < _RESTORES * 0.8 * rest.size:
        return None
    return ClassMap("shift", hits, total, as_is, total, k)


def index_map(golden: Results, now: Results) -> ClassMap | None:
    """A consistent class-index map (another class order) that is not a constant shift: each
    sample's top-1 mapped back through the map the *other* samples' rank-aligned top-k give."""
    g, n = _pairs(golden, now)
    total = len(g)
    if total < 4:
        return None
    counts: dict[int, Counter[int]] = defaultdict(Counter)
    for row_g, row_n in zip(g.tolist(), n.tolist()):
        for old, new in zip(row_g, row_n):
            counts[old][new] += 1
    as_is = int(np.count_nonzero(g[:, 0] == n[:, 0]))
    if as_is > _AS_IS * total:
        return None
    hits = confirmable = 0
    for row_g, row_n in zip(g.tolist(), n.tolist()):
        own = Counter(new for old, new in zip(row_g, row_n) if old == row_g[0])
        others = counts[row_g[0]] - own  # what the other samples say class row_g[0] became
        if not others:
            continue  # a class no other sample ranks: the map cannot be checked on it
        confirmable += 1
        if others.most_common(1)[0][0] == row_n[0]:
            hits += 1
    # Checked on enough samples (one image per class leaves some classes unranked elsewhere),
    # and right on nearly all of them.
    if confirmable < max(4, total // 3) or hits < _RESTORES * confirmable:
        return None
    # A map is one to one: a model that collapsed onto a few classes maps many onto one.
    sources, targets = len(set(g[:, 0].tolist())), len(set(n[:, 0].tolist()))
    if targets < _RESTORES * sources:
        return None
    mapping = {old: c.most_common(1)[0][0] for old, c in counts.items()}
    moved = tuple(sorted((old, new) for old, new in mapping.items() if old != new))
    return ClassMap("index", hits, confirmable, as_is, total, moved=moved, seen=len(mapping))


def class_count_map(
    golden: Results, now: Results, recorded: int, classes_now: int
) -> ClassMap | None:
    """One class more or fewer than the golden's (1001 ↔ 1000): added or dropped at the front
    (a background class: every index moved by one) or at the end (indices kept)."""
    if abs(classes_now - recorded) != 1:
        return None
    g, n = _pairs(golden, now)
    total = len(g)
    if total < 4:
        return None
    more = classes_now > recorded
    best: tuple[int, int] | None = None
    for k in (1, 0) if more else (-1, 0):
        hits = int(np.count_nonzero(n[:, 0] - g[:, 0] == k))
        if hits >= _RESTORES * total and (best is None or hits > best[1]):
            best = (k, hits)
    if best is None:
        return None
    k, hits = best
    as_is = int(np.count_nonzero(n[:, 0] == g[:, 0]))
    return ClassMap("count", hits, total, as_is, total, k, classes=(classes_now, recorded))


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
    """The golden's top-k scores back, in order, on classes mapped one to one on every sample."""
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
    """Every shared sample ranks its classes as the golden did, only the scores moved; else None."""
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
    """Whether raw outputs (before the manifest's softmax) are probabilities; False if unknown."""
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
