"""The determinism check's failure in words: how the runs differ and which controls to set."""

from __future__ import annotations

from ..errors import MlreproError, NonFiniteOutputs
from ..evaluation import DeterminismOutcome
from ._accuracy import STRICT_NOTE


def determinism_stopped_text(exc: MlreproError, where: str, strict_failure: bool) -> str:
    """An error that stopped a determinism item: the model's non-finite outputs said of the item
    (``where``), a missing piece with why it fails (``strict_failure``: --mlrepro-strict)."""
    if isinstance(exc, NonFiniteOutputs):
        return f"{where}: {exc.message}"
    return str(exc) + (STRICT_NOTE if strict_failure else "")


def determinism_text(outcome: DeterminismOutcome) -> str:
    c = outcome.comparison
    shown = ", ".join(f"{k}={v}" for k, v in sorted(outcome.controls.items()))
    lines = [
        f"{c.runs} runs of the same evaluation differ: largest score difference "
        f"{c.max_abs_diff:.3g} (sample {c.worst_sample}), tolerance {c.tolerance:g}",
        f"  {len(c.differing_samples)}/{c.samples} samples differ, "
        f"{len(c.top1_changed)} changed their top-1 class"
        + (f" (e.g. {', '.join(c.top1_changed[:3])})" if c.top1_changed else ""),
        f"  controls in force: {shown}",
        "  to make runs repeatable set, under runtime:, intra_op_threads: 1, seed, "
        "deterministic_ops: true (and graph_optimization for ONNX Runtime); or declare the "
        "variation you accept as determinism.tolerance",
    ]
    return "\n".join(lines)
