"""Per-operator times from each runtime's own profiler, as plain data for ``latency._profile``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

KERNEL_SUFFIX = "_kernel_time"
"""ONNX Runtime's suffix of a node's kernel event (``<node>_fence_before`` and ``_after`` are
synchronisation, not the operator)."""


@dataclass(frozen=True)
class OperatorCalls:
    """One operator's seconds in each profiled call, in call order (0: it did not run)."""

    name: str  # the node's name (ONNX Runtime), the op's (torch: one entry per op type)
    kind: str  # op type: Conv, FusedConv, QLinearConv, aten::conv2d
    provider: str | None  # ONNX Runtime's execution provider; None where the runtime says none
    seconds: tuple[float, ...]


@dataclass(frozen=True)
class ProfiledCalls:
    """Model calls as a runtime's profiler saw them: each call's duration, each operator's."""

    source: str  # the profiler, in a few words
    call_seconds: tuple[float, ...]
    operators: tuple[OperatorCalls, ...]


class ProfileUnavailable(Exception):
    """The runtime's profiler could not profile this model (the message says why)."""


def ort_operator_calls(events: Iterable[Mapping[str, Any]], skip: int) -> ProfiledCalls:
    """The calls of an ONNX Runtime profile's events after ``skip`` warm-ups: each node's kernel
    time summed in the ``model_run`` whose interval holds its start."""
    runs: list[tuple[int, int]] = []
    nodes: list[tuple[int, str, str, str | None, int]] = []
    for e in events:
        name, ts, dur = str(e.get("name", "")), e.get("ts"), e.get("dur")
        if not isinstance(ts, int) or not isinstance(dur, int):
            continue
        if e.get("cat") == "Session" and name == "model_run":
            runs.append((ts, ts + dur))
        elif e.get("cat") == "Node" and name.endswith(KERNEL_SUFFIX):
            args = e.get("args") or {}
            provider, kind = args.get("provider"), str(args.get("op_name", "?"))
            node = name[: -len(KERNEL_SUFFIX)] or f"{kind}_{args.get('node_index', '?')}"
            nodes.append((ts, node, kind, None if provider is None else str(provider), dur))
    runs.sort()
    kept = runs[skip:]
    if not kept:
        raise ProfileUnavailable("the profile holds no model run after the warm-up")
    per_node: dict[str, list[float]] = {}
    kinds: dict[str, tuple[str, str | None]] = {}
    for ts, name, kind, provider, dur in nodes:
        index = next((i for i, (a, b) in enumerate(kept) if a <= ts <= b), None)
        if index is None:
            continue  # a warm-up call's
        times = per_node.setdefault(name, [0.0] * len(kept))
        times[index] += dur * 1e-6  # microseconds
        kinds.setdefault(name, (kind, provider))
    return ProfiledCalls(
        source="onnxruntime profiler (SessionOptions.enable_profiling): kernel time per node",
        call_seconds=tuple((b - a) * 1e-6 for a, b in kept),
        operators=tuple(
            OperatorCalls(name, *kinds[name], tuple(per_node[name])) for name in sorted(per_node)
        ),
    )
