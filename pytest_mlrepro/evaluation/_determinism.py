"""Determinism: the controls a manifest sets (the runners apply and record them), and the
comparison of repeated runs, sample by sample."""

from __future__ import annotations

import random
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..manifest import Manifest

# Runner ``info`` keys that are determinism controls (the rest describes the machine or model).
CONTROL_KEYS = (
    "intra_op_threads",
    "inter_op_threads",
    "graph_optimization_level",
    "deterministic_algorithms",
    "deterministic_compute",
    "cudnn_deterministic",
    "cudnn_benchmark",
    "tf_deterministic_ops",
    "seed",
)


def seed_everything(seed: int | None) -> None:
    """Seed ``random``, NumPy and the frameworks already imported; ``None``: leave them."""
    if seed is None:
        return
    random.seed(seed)
    np.random.seed(seed)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)
    tf = sys.modules.get("tensorflow")
    if tf is not None and hasattr(tf, "random"):
        tf.random.set_seed(seed)


def controls_in_force(manifest: Manifest, runner_info: Mapping[str, Any]) -> dict[str, Any]:
    """The determinism controls that held for a run: what the runner recorded, plus the seed."""
    controls = {key: runner_info[key] for key in CONTROL_KEYS if key in runner_info}
    controls.setdefault("seed", manifest.runtime.seed)
    controls["deterministic_ops"] = manifest.runtime.deterministic_ops
    return controls


@dataclass(frozen=True)
class RunComparison:
    """How repeated runs of the same evaluation differ."""

    runs: int
    samples: int
    max_abs_diff: float  # over every score of every sample, against the first run
    worst_sample: str  # the sample with the largest difference ("" when identical)
    differing_samples: list[str]  # samples with any score different from the first run's
    top1_changed: list[str]  # samples whose top-1 class differs between runs
    tolerance: float

    @property
    def identical(self) -> bool:
        return not self.differing_samples

    @property
    def ok(self) -> bool:
        return self.max_abs_diff <= self.tolerance and (self.tolerance > 0 or self.identical)

    @property
    def status(self) -> Literal["passed", "failed"]:
        return "passed" if self.ok else "failed"

    @property
    def top1_agreement(self) -> float:
        return 1.0 - len(self.top1_changed) / self.samples if self.samples else 1.0


class RunsComparer:
    """:func:`compare_runs` a batch at a time, keeping a few numbers per sample, not the scores."""

    def __init__(self, ids: Sequence[str], runs: int, tolerance: float = 0.0) -> None:
        self.ids = ids
        self.runs = runs
        self.tolerance = tolerance
        self.worst = np.zeros(len(ids))
        self.differs = np.zeros(len(ids), dtype=bool)
        self.top1_changed = np.zeros(len(ids), dtype=bool)

    def update(self, start: int, first: np.ndarray, other: np.ndarray) -> None:
        first = np.asarray(first, dtype=np.float64)
        other = np.asarray(other, dtype=np.float64)
        if other.shape != first.shape:
            raise ValueError(f"runs produced different shapes: {first.shape} and {other.shape}")
        rows = slice(start, start + first.shape[0])
        same = (first == other) | (np.isnan(first) & np.isnan(other))
        self.differs[rows] |= ~same.all(axis=1)
        diff = np.where(same, 0.0, np.abs(first - other))
        diff = np.where(np.isnan(diff), np.inf, diff)
        if diff.size:
            self.worst[rows] = np.maximum(self.worst[rows], diff.max(axis=1))
            self.top1_changed[rows] |= first.argmax(axis=1) != other.argmax(axis=1)

    def comparison(self) -> RunComparison:
        worst = int(self.worst.argmax()) if self.worst.size else 0
        max_diff = float(self.worst[worst]) if self.worst.size else 0.0
        return RunComparison(
            runs=self.runs,
            samples=len(self.ids),
            max_abs_diff=max_diff,
            worst_sample=self.ids[worst] if max_diff > 0 or self.differs.any() else "",
            differing_samples=[self.ids[int(i)] for i in np.flatnonzero(self.differs)],
            top1_changed=[self.ids[int(i)] for i in np.flatnonzero(self.top1_changed)],
            tolerance=self.tolerance,
        )


def compare_runs(
    ids: Sequence[str], scores: Sequence[np.ndarray], tolerance: float = 0.0
) -> RunComparison:
    """Compare the (samples × classes) score matrices of repeated runs with the first one."""
    first = np.asarray(scores[0], dtype=np.float64)
    comparer = RunsComparer(ids, len(scores), tolerance)
    for other in scores[1:]:
        comparer.update(0, first, other)
    return comparer.comparison()
