"""Which operators got slower: a per-operator time profile of the model call, kept with the latency
golden, and its comparison with today's."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ..runners import ProfiledCalls, ProfileUnavailable
from ._timing import ms

PROFILE_CALLS = 15
"""Profiled calls: each operator's time is its median over them."""
PROFILE_WARMUP = 3
"""Calls run before them (a new session's first calls allocate)."""
COVERED = 0.8
"""The operators listed: the fewest that account for this share of the added time..."""
MAX_LISTED = 10
"""...and at most this many."""
EVEN_SLOWED = 0.6
"""A slowdown is spread "evenly" when the operators that slowed (by at least half the overall
relative slowdown) hold at least this share of the golden's operator time...
(On the example's EfficientNet-Lite0, one intra-op thread instead of two measured on a loaded
2-core machine: 49 of 53 operators slower, those that slowed holding 68% of the time, the
fewest covering 75% of the added time 49%; docs/latency.md.)"""
EVEN_SPREAD = 0.3
"""...the fewest operators that account for SPREAD_OF of the added time hold at least this
share of the golden's operator time (one operator 3× slower: its own share)..."""
SPREAD_OF = 0.75
EVEN_NEW = 0.25
"""...and operators the golden did not run account for less than this share of the added
time."""
MATCHED = 0.5
"""Operators are compared node by node when the nodes run now under the golden's names hold at
least this share of the golden's operator time; else (another graph optimisation renames and
merges nodes) op type by op type."""

QUANTISED = frozenset(
    {
        "QuantizeLinear",
        "DequantizeLinear",
        "DynamicQuantizeLinear",
        "DynamicQuantizeMatMul",
        "MatMulIntegerToFloat",
        "QGemm",
        "QAttention",
        "QOrderedMatMul",
    }
)
"""Quantised op types beyond the ``QLinear*`` and ``*Integer`` ones (and torch's
``quantized::``)."""
FUSED = frozenset(
    {
        "Attention",
        "BiasGelu",
        "BiasSoftmax",
        "EmbedLayerNormalization",
        "FastGelu",
        "MultiHeadAttention",
        "NhwcFusedConv",
        "QuickGelu",
        "SkipLayerNormalization",
    }
)
"""ONNX Runtime's fused op types beyond the ``Fused*`` ones (FusedConv, FusedMatMul,
FusedGemm)."""


def quantised(kind: str) -> bool:
    return (
        kind.startswith(("QLinear", "quantized::")) or kind.endswith("Integer") or kind in QUANTISED
    )


def fused(kind: str) -> bool:
    return kind.startswith("Fused") or kind in FUSED


# --- the profile ------------------------------------------------------------------------------


@dataclass(frozen=True)
class OperatorTime:
    """One operator's median time per call."""

    name: str  # the node (ONNX Runtime), the op type (torch)
    kind: str  # its op type
    provider: str | None  # the kernel's execution provider, where the runtime names one
    ms: float


@dataclass(frozen=True)
class OperatorProfile:
    """A model call's per-operator times (sorted by name), as a runtime's profiler gave them."""

    runtime: str
    source: str
    calls: int
    call_ms: float  # the whole call's median while profiled (the profiler's overhead included)
    operators: tuple[OperatorTime, ...]

    @property
    def operators_ms(self) -> float:
        return sum(o.ms for o in self.operators)


@dataclass(frozen=True)
class NoProfile:
    """Why there is no operator profile (``runtime``: the framework's name)."""

    runtime: str
    why: str


def take_profile(runner: Any, model_input: Any, runtime: str) -> OperatorProfile | NoProfile:
    """Each operator's median time, or why there is none."""
    times = getattr(runner, "operator_times", None)
    if times is None or model_input is None:
        return NoProfile(runtime, "its Python API gives no per-operator times")
    try:
        profiled: ProfiledCalls = times(model_input, PROFILE_CALLS, PROFILE_WARMUP)
    except ProfileUnavailable as exc:
        return NoProfile(runtime, str(exc))
    return OperatorProfile(
        runtime=runtime,
        source=profiled.source,
        calls=len(profiled.call_seconds),
        call_ms=ms(float(np.median(profiled.call_seconds))),
        operators=tuple(
            OperatorTime(o.name, o.kind, o.provider, ms(float(np.median(o.seconds))))
            for o in sorted(profiled.operators, key=lambda o: o.name)
        ),
    )


def profile_json(profile: OperatorProfile) -> dict[str, Any]:
    """The golden's ``profile`` (``golden.schema.json#/$defs/LatencyProfile``)."""
    return {
        "runtime": profile.runtime,
        "source": profile.source,
        "calls": profile.calls,
        "call_ms": profile.call_ms,
        "operators_ms": ms(profile.operators_ms * 1e-3),
        "operators": [
            dataclasses.asdict(o) for o in sorted(profile.operators, key=lambda o: o.name)
        ],
    }


def profile_from_json(raw: Mapping[str, Any]) -> OperatorProfile:
    return OperatorProfile(
        runtime=str(raw["runtime"]),
        source=str(raw["source"]),
        calls=int(raw["calls"]),
        call_ms=float(raw["call_ms"]),
        operators=tuple(
            OperatorTime(str(o["name"]), str(o["kind"]), o.get("provider"), float(o["ms"]))
            for o in sorted(raw["operators"], key=lambda o: str(o["name"]))
        ),
    )


# --- the comparison ---------------------------------------------------------------------------

Change = Literal[
    "quantised → float",
    "float → quantised",
    "fused → unfused",
    "unfused → fused",
    "another provider",
    "another op type",
]
Pattern = Literal["evenly", "concentrated", "none"]


@dataclass(frozen=True)
class OperatorShift:
    """Time per call, golden and now (None: not run there), and its share of the added time."""

    name: str
    kind: str
    golden_ms: float | None
    now_ms: float | None
    added_ms: float
    share: float


@dataclass(frozen=True)
class KindShift:
    """An op type's time per call and node count, golden and now, and its share of the time."""

    kind: str
    golden_ms: float
    now_ms: float
    golden_nodes: int
    now_nodes: int
    added_ms: float
    share: float


@dataclass(frozen=True)
class KindChange:
    """A node run under the same name as in the golden, as another op type or provider."""

    name: str
    golden_kind: str
    now_kind: str
    golden_provider: str | None
    now_provider: str | None
    change: Change


@dataclass(frozen=True)
class ProfileComparison:
    """Golden profile vs today's, as facts (module docstring). Times in ms per call."""

    runtime: str
    golden_ms: float  # the operators' time
    now_ms: float
    golden_call_ms: float
    now_call_ms: float
    added_ms: float  # the sum of every increase (per node, or per op type: ``by_node``)
    by_node: bool
    matched: float  # share of the golden's operator time on nodes run now under their name
    pattern: Pattern
    covered: float  # the listed operators' share of the added time together
    top3: float  # the share of the 3 largest
    slowed: float  # share of the golden's time on operators that slowed (EVEN_SLOWED)
    spread: float  # share of the golden's time on the fewest covering SPREAD_OF of the added
    new_share: float  # share of the added time on operators the golden did not run
    ratios: tuple[float, float, float]  # per-operator now/golden: weighted quartiles
    golden_nodes: int
    now_nodes: int
    unfused: bool  # fused ops split apart
    dequantised: bool  # quantised ops now float
    operators: tuple[OperatorShift, ...]  # the fewest covering COVERED of it, largest first
    kinds: tuple[KindShift, ...]  # every op type whose time grew, largest first
    new_kinds: tuple[KindShift, ...]  # op types run now that the golden never ran
    gone_kinds: tuple[KindShift, ...]  # op types the golden ran that are not run now
    changes: tuple[KindChange, ...]


def _weighted_quantiles(
    values: Sequence[float], weights: Sequence[float], qs: Sequence[float]
) -> list[float]:
    if not values or sum(weights) <= 0:
        return [float("nan")] * len(qs)
    order = np.argsort(values)
    v = np.asarray(values, float)[order]
    w = np.asarray(weights, float)[order]
    cumulative = (np.cumsum(w) - 0.5 * w) / w.sum()
    return [float(np.interp(q, cumulative, v)) for q in qs]


def _by_kind(ops: Iterable[OperatorTime]) -> dict[str, tuple[float, int]]:
    out: dict[str, tuple[float, int]] = {}
    for o in ops:
        ms, count = out.get(o.kind, (0.0, 0))
        out[o.kind] = (ms + o.ms, count + 1)
    return out


def _change(g: OperatorTime, n: OperatorTime) -> Change:
    if quantised(g.kind) != quantised(n.kind):
        return "quantised → float" if quantised(g.kind) else "float → quantised"
    if fused(g.kind) != fused(n.kind):
        return "fused → unfused" if fused(g.kind) else "unfused → fused"
    return "another op type" if g.kind != n.kind else "another provider"


def compare_profiles(golden: OperatorProfile, now: OperatorProfile) -> ProfileComparison:
    """Where the added time went between ``golden`` and ``now`` (module docstring)."""
    g = {o.name: o for o in golden.operators}
    n = {o.name: o for o in now.operators}
    golden_ms, now_ms = golden.operators_ms, now.operators_ms
    matched = sum(o.ms for name, o in g.items() if name in n) / golden_ms if golden_ms else 0.0
    by_node = matched >= MATCHED
    g_kinds, n_kinds = _by_kind(golden.operators), _by_kind(now.operators)
    if by_node:
        kind_of = {o.name: o.kind for o in (*golden.operators, *now.operators)}  # now's where both
        g_ms, n_ms = ({o.name: o.ms for o in p.operators} for p in (golden, now))
    else:  # renamed and merged nodes: op type by op type
        kind_of = {k: k for k in (*g_kinds, *n_kinds)}
        g_ms, n_ms = ({k: t for k, (t, _) in kinds.items()} for kinds in (g_kinds, n_kinds))
    # Each unit (node or op type): its kind, golden ms and now ms (None: not run there).
    pairs = {u: (kind_of[u], g_ms.get(u), n_ms.get(u)) for u in sorted(kind_of)}
    deltas = {u: (now or 0.0) - (golden or 0.0) for u, (_, golden, now) in pairs.items()}
    added = sum(d for d in deltas.values() if d > 0)
    shifts = sorted(
        (
            OperatorShift(u, kind, golden, now, deltas[u], deltas[u] / added)
            for u, (kind, golden, now) in pairs.items()
            if deltas[u] > 0
        ),
        key=lambda s: (-s.added_ms, s.name),
    )
    listed: list[OperatorShift] = []
    for s in shifts:
        if len(listed) >= MAX_LISTED or sum(x.share for x in listed) >= COVERED:
            break
        listed.append(s)
    both = [(gm, nm) for _, gm, nm in pairs.values() if gm is not None and nm is not None]
    weights = [gm for gm, _ in both]
    ratios = [nm / gm if gm > 0 else 1.0 for gm, nm in both]
    total = sum(weights)
    overall = sum(nm for _, nm in both) / total if total > 0 else 1.0
    threshold = 1 + max(overall - 1, 0.0) / 2
    slowed_ms = sum(w for w, r in zip(weights, ratios) if r >= threshold and overall > 1)
    slowed = slowed_ms / total if total > 0 else 0.0
    new_share = sum(s.share for s in shifts if s.golden_ms is None)
    covering, held = 0.0, 0.0
    for s in shifts:
        if covering >= SPREAD_OF:
            break
        covering, held = covering + s.share, held + (s.golden_ms or 0.0)
    spread = held / total if total > 0 else 0.0
    even = slowed >= EVEN_SLOWED and spread >= EVEN_SPREAD and new_share < EVEN_NEW
    pattern: Pattern = "none" if added <= 0 else "evenly" if even else "concentrated"
    kind_deltas = {
        k: n_kinds.get(k, (0.0, 0))[0] - g_kinds.get(k, (0.0, 0))[0]
        for k in set(g_kinds) | set(n_kinds)
    }
    kind_added = sum(d for d in kind_deltas.values() if d > 0)
    every_kind = []
    for k, d in kind_deltas.items():
        (gm, gc), (nm, nc) = g_kinds.get(k, (0.0, 0)), n_kinds.get(k, (0.0, 0))
        every_kind.append(KindShift(k, gm, nm, gc, nc, d, d / kind_added if d > 0 else 0.0))
    kinds = sorted((k for k in every_kind if k.added_ms > 0), key=lambda k: (-k.added_ms, k.kind))
    new_kinds = sorted(
        (k for k in every_kind if not k.golden_nodes), key=lambda k: (-k.now_ms, k.kind)
    )
    gone = sorted((k for k in every_kind if not k.now_nodes), key=lambda k: (-k.golden_ms, k.kind))
    changes = tuple(
        KindChange(name, g[name].kind, n[name].kind, g[name].provider, n[name].provider,
                   _change(g[name], n[name]))
        for name in sorted(set(g) & set(n))
        if (g[name].kind, g[name].provider) != (n[name].kind, n[name].provider)
    )  # fmt: skip
    g_nodes, n_nodes = len(golden.operators), len(now.operators)
    q1, median, q3 = _weighted_quantiles(ratios, weights, (0.25, 0.5, 0.75))
    return ProfileComparison(
        runtime=now.runtime,
        golden_ms=golden_ms,
        now_ms=now_ms,
        golden_call_ms=golden.call_ms,
        now_call_ms=now.call_ms,
        added_ms=added,
        by_node=by_node,
        matched=matched,
        operators=tuple(listed),
        covered=sum(s.share for s in listed),
        top3=sum(s.share for s in shifts[:3]),
        slowed=slowed,
        spread=spread,
        new_share=new_share,
        ratios=(q1, median, q3),
        pattern=pattern,
        kinds=tuple(kinds),
        new_kinds=tuple(new_kinds),
        gone_kinds=tuple(gone),
        golden_nodes=g_nodes,
        now_nodes=n_nodes,
        unfused=(n_nodes > g_nodes and bool(new_kinds))
        or any(c.change == "fused → unfused" for c in changes),
        dequantised=sum(quantised(o.kind) for o in now.operators)
        < sum(quantised(o.kind) for o in golden.operators),
        changes=changes,
    )


@dataclass(frozen=True)
class OperatorFindings:
    """The comparison of the golden's profile with today's, or which one is missing and why."""

    runtime: str
    comparison: ProfileComparison | None = None
    missing: Literal["", "golden", "now"] = ""
    why: str = ""


def operator_findings(
    golden: Mapping[str, Any] | None, now: OperatorProfile | NoProfile
) -> OperatorFindings:
    """The findings from the golden entry's ``profile`` (None: it has none) and today's."""
    if isinstance(now, NoProfile):
        return OperatorFindings(now.runtime, missing="now", why=now.why)
    if golden is None:
        return OperatorFindings(now.runtime, missing="golden")
    return OperatorFindings(now.runtime, compare_profiles(profile_from_json(golden), now))


# Node counts, and the call times the profiles keep to 6 digits already: as they are.
_AS_THEY_ARE = ("golden_call_ms", "now_call_ms", "golden_nodes", "now_nodes")
_SHARES = ("matched", "covered", "top3", "slowed", "spread", "new_share", "share", "ratios")


def _rounded(value: Any, name: str = "") -> Any:
    """Shares and ratios to 4 significant digits, times to 6, a non-finite number as None."""
    if isinstance(value, (list, tuple)):
        return [_rounded(v, name) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v, k) for k, v in value.items()}
    if isinstance(value, bool) or not isinstance(value, (int, float)) or name in _AS_THEY_ARE:
        return value
    return float(f"{value:.{4 if name in _SHARES else 6}g}") if np.isfinite(value) else None


def findings_json(findings: OperatorFindings) -> dict[str, Any]:
    """The results row's ``operators`` (``results.Operators``)."""
    out: dict[str, Any] = {"runtime": findings.runtime, "compared": findings.comparison is not None}
    if findings.comparison is None:
        return {**out, "missing": findings.missing, "why": findings.why}
    return {**out, **_rounded(dataclasses.asdict(findings.comparison))}
