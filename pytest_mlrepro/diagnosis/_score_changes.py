"""Drifts that keep every ranking: the scores transformed (a softmax applied twice, a
temperature), or the output classes permuted. Each check gives the sentence that names it, or
None."""

from __future__ import annotations

import numpy as np

from ..data import ResolvedDataset
from ..evaluation import Evaluation, run_model
from ..goldens import Comparison, Golden, Results
from ..manifest import Manifest
from ._class_maps import shared_rows
from ._manifest_diff import Change
from ._wording import short_number


def class_permutation(golden: Results, evaluation: Evaluation, score_tol: float) -> str | None:
    """When the model's output classes were exchanged: every shared sample's recorded top-k
    scores come back, in order, on other classes, and those classes map one to one (a
    permutation, the same on every sample). The sentence that names it, or None."""
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
        f"): on all {len(g.ids)} samples the golden's top-{k} scores come back on the "
        f"exchanged classes (max diff {short_number(float(diffs.max()))})"
    )


def score_transform(
    manifest: Manifest,
    golden: Golden,
    comparison: Comparison,
    evaluation: Evaluation,
    changes: list[Change],
) -> str | None:
    """When every shared sample ranks its classes as the golden did (its recorded top-k, in
    order) and only the scores moved: the sentence that says so and why; else None."""
    g, now = shared_rows(golden.results, evaluation.results)
    if not g.ids or comparison.changed or "score" not in comparison.failures:
        return None
    k = min(g.topk.shape[1], now.topk.shape[1])
    if not np.array_equal(g.topk[:, :k], now.topk[:, :k]):
        return None
    lead = (
        f"the ranking is identical to the golden's on every sample (top-{k} classes in the "
        f"same order on all {len(g.ids)}), only the scores moved (max diff "
        f"{short_number(comparison.max_score_diff)} on {comparison.max_score_diff_id})"
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
