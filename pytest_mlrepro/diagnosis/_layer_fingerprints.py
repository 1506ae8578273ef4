"""Layer fingerprints, the model-side twin of the step fingerprints: one compact row per layer
output over a few probes (kilobytes, not tensors); on a drift with identical preprocessing, the
first layer whose statistics differ beyond ``TOLERANCE`` is where the computation changed."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._visible import visible
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
    rows = []
    for o in outputs:
        row = [str(o[0]), str(o[1]), *fingerprint(o[2], o[3] if len(o) > 3 else None)]
        if len(o) > 4 and o[4] is not None:
            row.append(_stat(float(o[4])))
        rows.append(row)
    return rows


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

    def text(self) -> str:
        g, n = self.golden, self.now
        if g[2] != n[2]:
            return f"shape {g[2]} → {n[2]}"
        dtype = f"{g[3]} → {n[3]}, " if g[3] != n[3] else ""
        return (
            f"{dtype}max |x| {g[6]:.4g} → {n[6]:.4g}, mean {g[4]:.4g} → {n[4]:.4g}, std "
            f"{g[5]:.4g} → {n[5]:.4g}: {rel(self.delta)} the golden's std"
        )


def rel(delta: float) -> str:
    """A difference relative to the golden's std: ``0.5×``, ``∞``."""
    return "∞" if not math.isfinite(delta) else f"{delta:.2g}×"


def _delta(g: Sequence[Any], n: Sequence[Any]) -> float:
    if g[2] != n[2]:
        return math.inf
    scale = max(float(g[5]), 1e-12)
    return max(abs(float(g[i]) - float(n[i])) for i in (4, 5, 6)) / scale


@dataclass
class LayerReport:
    """The model compared layer by layer; ``first`` the first layer that differs."""

    probes: int = 0
    layers: int = 0
    alignment: str = ""  # "by name", "by position and shape", or why none holds
    diffs: list[LayerDiff] = field(default_factory=list)
    first: LayerDiff | None = None
    note: str = ""
    error: str = ""  # why the layers could not be traced
    precision: str = ""  # how the model's precision changed, when it did (see _precision)

    def lead(self) -> str:
        """The clause a lead sentence adds: where the model's outputs first differ, and whether
        the difference grows from there to the last layer."""
        f = self.first
        if f is None:
            return ""
        text = (
            f"the first layer whose output differs is {visible(f.op)} {f.name!r} "
            f"(layer {f.index + 1} of {self.layers}: {f.text()})"
        )
        after = [d for d in self.diffs if d.index > f.index]
        if not after:
            return text
        last = after[-1]
        verb = "grows" if last.delta > f.delta else "shrinks" if last.delta < f.delta else "stays"
        at = visible(last.name)
        return text + f", and the difference {verb} to {rel(last.delta)} at the last layer ({at})"


def _align(golden: list[list[Any]], now: list[list[Any]]) -> tuple[list[tuple[int, int]], str]:
    """(golden index, now index) pairs, and how they were found."""
    g_names = [str(r[0]) for r in golden]
    n_index = {str(r[0]): i for i, r in enumerate(now)}
    if len(set(g_names)) == len(g_names) and all(name in n_index for name in g_names):
        return [(i, n_index[name]) for i, name in enumerate(g_names)], "by name"
    if len(golden) == len(now) and all(g[2] == n[2] for g, n in zip(golden, now)):
        return [(i, i) for i in range(len(now))], "by position and shape (the names differ)"
    return [], (
        f"no alignment holds: the golden's model has {len(golden)} layers, this one {len(now)}, "
        "and their names and shapes do not match in order"
    )


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


def _precision(golden: list[list[Any]], now: list[list[Any]]) -> str:
    """How the model's precision changed between the two traces: quantise/dequantise ops
    added, or layer outputs in a lower-precision dtype; "" when neither."""
    parts = []
    g_ops = [str(r[1]) for r in golden if str(r[1]) in _QUANT_OPS]
    n_ops = [str(r[1]) for r in now if str(r[1]) in _QUANT_OPS]
    if len(n_ops) > len(g_ops):
        kinds = ", ".join(sorted(set(n_ops)))
        parts.append(
            f"the new model has {len(n_ops)} quantisation ops ({kinds}) where the golden's had "
            f"{len(g_ops)}"
        )
    for dtype in _LOW_PRECISION:
        g = sum(1 for r in golden if r[3] == dtype)
        n = sum(1 for r in now if r[3] == dtype)
        if n > g:
            parts.append(f"{n} layer outputs are {dtype} where the golden's had {g}")
    # The same quantised tensor (by name) with another scale.
    scales = {str(r[0]): r[8] for r in golden if len(r) > 8}
    moved = [
        f"{r[0]} {scales[str(r[0])]:g} → {r[8]:g}"
        for r in now
        if len(r) > 8 and str(r[0]) in scales and scales[str(r[0])] != r[8]
    ]
    if moved:
        parts.append(f"the quantisation scale changed: {', '.join(moved[:3])}")
    return "; ".join(parts)


def compare(
    block: Any, runner: Any, manifest: Manifest, samples: Sequence[Sample]
) -> LayerReport | None:
    """This run's layers against the golden's ``probes.layers`` block; None when the golden
    keeps none (recorded before they existed, or a runner that cannot show them)."""
    if not isinstance(block, Mapping) or block.get("format") != FORMAT:
        return None
    golden = block.get("rows")
    ids = block.get("samples")
    if not isinstance(golden, list) or not isinstance(ids, list) or not golden:
        return None
    by_id = {s.id: s for s in samples}
    chosen = [by_id[i] for i in ids if i in by_id]
    if len(chosen) != len(ids):
        return LayerReport(note="the golden's layer probes are not in this run's data set")
    now = trace(runner, manifest, chosen)
    if now is None:
        return LayerReport(note="this model's layers cannot be traced with this runner")
    pairs, how = _align(golden, now)
    report = LayerReport(probes=len(chosen), layers=len(now), alignment=how)
    report.precision = _precision(golden, now)
    if not pairs:
        report.note = how
        return report
    for gi, ni in sorted(pairs, key=lambda p: p[1]):
        g, n = golden[gi], now[ni]
        report.diffs.append(LayerDiff(ni, str(n[0]), str(n[1]), g, n, _delta(g, n)))
    report.first = next((d for d in report.diffs if d.delta > TOLERANCE), None)
    return report
