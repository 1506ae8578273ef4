"""Layer fingerprints, one compact row per layer output over a few probes; with identical
preprocessing, the first layer differing beyond ``TOLERANCE`` is where the computation changed."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ..data import Sample
from ..manifest import Manifest

FORMAT = 1
LAYER_PROBES = 2  # step probes whose layer outputs a golden keeps
# Relative difference of a layer's statistics that counts as "differs": far above what another
# CPU's float rounding gives (~1e-6), far below a changed weight, a quantisation or a swap.
TOLERANCE = 1e-3


def _stat(value: float) -> float:
    return float(f"{value:.5g}")


def fingerprint(array: np.ndarray, dtype: str | None = None) -> list[Any]:
    """``[shape, dtype, mean, std, max |x|, hash]`` of one layer's output on the probes;
    ``dtype``: the dtype the model stores it in, when the values were dequantised."""
    values = np.asarray(array)
    as_float = values.astype(np.float64, copy=False)
    finite = as_float[np.isfinite(as_float)]
    finite = finite if finite.size else np.zeros(1)  # no finite value: every statistic 0
    mean, std, peak = float(finite.mean()), float(finite.std()), float(np.abs(finite).max())
    digest = hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest()[:8]
    stored = dtype or str(values.dtype)
    return [list(values.shape), stored, _stat(mean), _stat(std), _stat(peak), digest]


def trace(runner: Any, manifest: Manifest, samples: Sequence[Sample]) -> list[list[Any]] | None:
    """One row per layer, ``[name, op, *fingerprint]``, in the model's order; None when the
    runner cannot show its layers (no ``layer_outputs``, or it failed)."""
    capture = getattr(runner, "layer_outputs", None)
    if capture is None or not samples:
        return None
    try:
        outputs = capture(np.stack([manifest.pipeline(s.read(), s.id) for s in samples]))
    except Exception:  # a bonus for diagnosis: never costs the golden or the verdict
        return None
    if not outputs:
        return None
    # (name, op, value[, stored dtype[, quantisation scale]]): the dtype when the runner
    # dequantised the value, the scale when the tensor is quantised (kept as a ninth field).
    return [
        [str(o[0]), str(o[1]), *fingerprint(o[2], o[3] if len(o) > 3 else None)]
        + ([_stat(float(o[4]))] if len(o) > 4 and o[4] is not None else [])
        for o in outputs
    ]


def record(
    runner: Any, manifest: Manifest, samples: Sequence[Sample], ids: Sequence[str]
) -> dict[str, Any] | None:
    """The golden's ``probes.layers`` block for the samples ``ids`` (the first step probes)."""
    by_id = {s.id: s for s in samples}
    chosen = [by_id[i] for i in ids if i in by_id][:LAYER_PROBES]
    rows = trace(runner, manifest, chosen)
    if rows is None:
        return None
    return {"format": FORMAT, "samples": [s.id for s in chosen], "rows": rows}


# --- comparison -----------------------------------------------------------------------------


@dataclass(frozen=True)
class LayerDiff:
    """One aligned layer: the golden's row and this run's, and how far apart."""

    index: int  # position in this run's model
    name: str
    op: str
    golden: list[Any]
    now: list[Any]
    delta: float  # largest statistic difference, relative to the golden's std (inf: shape)


def _delta(g: Sequence[Any], n: Sequence[Any]) -> float:
    if g[2] != n[2]:
        return math.inf
    scale = max(float(g[5]), 1e-12)
    return max(abs(float(g[i]) - float(n[i])) for i in (4, 5, 6)) / scale


@dataclass(frozen=True)
class Precision:
    """Precision changes: quantisation ops (now, golden's, kinds), lower-precision outputs (dtype,
    now, golden's), moved quantisation scales (tensor, golden's, now)."""

    quant: tuple[int, int, str] | None = None
    dtypes: tuple[tuple[str, int, int], ...] = ()
    scales: tuple[tuple[str, float, float], ...] = ()


# Why a layer report compares nothing: the layer probes are not in this run's data set, the
# runner cannot trace this model, no alignment of the layers holds.
LayerNote = Literal["absent", "untraceable", "unaligned"]


@dataclass
class LayerReport:
    """The model compared layer by layer; ``first`` the first layer that differs."""

    probes: int = 0
    layers: int = 0
    golden_layers: int = 0
    alignment: Literal["name", "position", "none"] = "none"
    diffs: list[LayerDiff] = field(default_factory=list)
    first: LayerDiff | None = None
    note: LayerNote | None = None
    error: str = ""  # why the layers could not be traced
    precision: Precision | None = None  # how the model's precision changed, when it did

    def grows(self) -> LayerDiff | None:
        """The last layer that differs after the first, if any."""
        f = self.first
        after = [d for d in self.diffs if f is not None and d.index > f.index]
        return after[-1] if after else None


def _align(
    golden: list[list[Any]], now: list[list[Any]]
) -> tuple[list[tuple[int, int]], Literal["name", "position", "none"]]:
    """(golden index, now index) pairs, and how they were found."""
    g_names = [str(r[0]) for r in golden]
    n_index = {str(r[0]): i for i, r in enumerate(now)}
    if len(set(g_names)) == len(g_names) and all(name in n_index for name in g_names):
        return [(i, n_index[name]) for i, name in enumerate(g_names)], "name"
    if len(golden) == len(now) and all(g[2] == n[2] for g, n in zip(golden, now)):
        return [(i, i) for i in range(len(now))], "position"
    return [], "none"


# Ops that quantise or compute on quantised tensors (ONNX names; TFLite's are the same words).
_QUANT_OPS = frozenset(
    {
        "QuantizeLinear",
        "DequantizeLinear",
        "DynamicQuantizeLinear",
        "QLinearConv",
        "QLinearMatMul",
        "QLinearAdd",
        "ConvInteger",
        "MatMulInteger",
        "QUANTIZE",
        "DEQUANTIZE",
    }
)
_LOW_PRECISION = ("float16", "bfloat16", "int8", "uint8")


def _precision(golden: list[list[Any]], now: list[list[Any]]) -> Precision | None:
    """How the model's precision changed between the two traces; None when it did not."""
    g_ops = [str(r[1]) for r in golden if str(r[1]) in _QUANT_OPS]
    n_ops = [str(r[1]) for r in now if str(r[1]) in _QUANT_OPS]
    quant = (len(n_ops), len(g_ops), ", ".join(sorted(set(n_ops))))
    counts = [
        (d, sum(1 for r in now if r[3] == d), sum(1 for r in golden if r[3] == d))
        for d in _LOW_PRECISION
    ]
    # The same quantised tensor (by name) with another scale.
    scales = {str(r[0]): r[8] for r in golden if len(r) > 8}
    moved = tuple(
        (str(r[0]), float(scales[str(r[0])]), float(r[8]))
        for r in now
        if len(r) > 8 and str(r[0]) in scales and scales[str(r[0])] != r[8]
    )
    found = Precision(
        quant if quant[0] > quant[1] else None, tuple(c for c in counts if c[1] > c[2]), moved[:3]
    )
    return found if found != Precision() else None


def compare(
    block: Any, runner: Any, manifest: Manifest, samples: Sequence[Sample]
) -> LayerReport | None:
    """This run's layers against the golden's ``probes.layers``; None when the golden keeps none."""
    if not isinstance(block, Mapping) or block.get("format") != FORMAT:
        return None
    golden = block.get("rows")
    ids = block.get("samples")
    if not isinstance(golden, list) or not isinstance(ids, list) or not golden:
        return None
    by_id = {s.id: s for s in samples}
    chosen = [by_id[i] for i in ids if i in by_id]
    if len(chosen) != len(ids):
        return LayerReport(note="absent")
    now = trace(runner, manifest, chosen)
    if now is None:
        return LayerReport(note="untraceable")
    pairs, how = _align(golden, now)
    report = LayerReport(len(chosen), len(now), len(golden), how, precision=_precision(golden, now))
    if not pairs:
        report.note = "unaligned"
        return report
    for gi, ni in sorted(pairs, key=lambda p: p[1]):
        g, n = golden[gi], now[ni]
        report.diffs.append(LayerDiff(ni, str(n[0]), str(n[1]), g, n, _delta(g, n)))
    report.first = next((d for d in report.diffs if d.delta > TOLERANCE), None)
    return report
