"""What changed between the manifest a golden was recorded with and this one, each change filed by
area (preprocessing, model, runtime, neutral) and a preprocessing change by pitfall category."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from .._schema import Context, convert_dataclass
from ..errors import ManifestError
from ..pipeline import STEPS, Step
from . import _pitfalls as pitfalls
from . import _step_fingerprints as probe_store

# Manifest fields whose change cannot move a model's outputs (they change how it runs or what
# is checked, not what is computed).
_NEUTRAL = (
    "description",
    "version",
    "name",
    "golden",
    "tolerances",
    "latency",
    "diagnosis",
    "runtime.batch_size",
    "runtime.intra_op_threads",
    "runtime.inter_op_threads",
    "runtime.devices",
    "dataset.limit",
)


@dataclass(frozen=True)
class Change:
    """One difference between the recorded manifest and this one."""

    path: str
    old: object  # a manifest value (plain data), or ABSENT
    new: object
    area: str  # preprocess | model | runtime | neutral | other
    category: str | None = None  # the pitfall category of a preprocessing change
    moved: str | None = None  # the op of a step that moved (old and new are positions)


class Absent:
    def __repr__(self) -> str:
        return "(absent)"


ABSENT: Final = Absent()


def _area(path: str) -> str:
    if any(path == p or path.startswith(p + ".") or path.startswith(p + "[") for p in _NEUTRAL):
        return "neutral"
    if ".preprocess" in path:
        return "preprocess"
    if path.startswith("model") or path.startswith("framework"):
        return "model"
    if path.startswith("runtime"):
        return "runtime"
    return "other"


def manifest_diff(recorded: Mapping[str, Any], now: Mapping[str, Any]) -> list[Change]:
    """Field by field differences of two normalised manifests; preprocessing steps are aligned
    by op, so a removed crop reads as one removed step, not as every later step changed."""
    changes: list[Change] = []
    _diff(recorded, now, "", changes)
    return changes


def _diff(old: object, new: object, path: str, out: list[Change]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if (
                key == "preprocess"
                and isinstance(old.get(key), list)
                and isinstance(new.get(key), list)
            ):
                _diff_steps(old[key], new[key], sub, out)
            else:
                _diff(old.get(key, ABSENT), new.get(key, ABSENT), sub, out)
        return
    if (
        isinstance(old, list)
        and isinstance(new, list)
        and len(old) == len(new)
        and any(isinstance(v, dict) for v in old + new)
    ):
        for index, (a, b) in enumerate(zip(old, new)):
            _diff(a, b, f"{path}[{index}]", out)
        return
    if old != new and not (old is ABSENT and new is None):
        out.append(Change(path, old, new, _area(path)))


def _op_of(step: object) -> str:
    return next(iter(step)) if isinstance(step, dict) and len(step) == 1 else "?"


def _diff_steps(old: list[Any], new: list[Any], path: str, out: list[Change]) -> None:
    pairs = probe_store.align_steps([_op_of(s) for s in old], [_op_of(s) for s in new])
    both = [(n, o) for n, o in pairs if n is not None and o is not None]
    for now_index, old_index in pairs:
        if now_index is not None and old_index is not None:
            a, b = old[old_index], new[now_index]
            op, where = _op_of(b), f"{path}[{now_index}]"
            if any((n - now_index) * (o - old_index) < 0 for n, o in both):
                moved = op in ("cast", "scale", "normalize")
                category = pitfalls.NORM_ORDER if moved else pitfalls.category_of_change(op, None)
                out.append(Change(where, old_index, now_index, "preprocess", category, op))
            if a == b:
                continue
            pa, pb = a.get(op, {}), b.get(op, {})
            if isinstance(pa, dict) and isinstance(pb, dict):
                for key in sorted(set(pa) | set(pb)):
                    was, is_now = pa.get(key, ABSENT), pb.get(key, ABSENT)
                    if was != is_now:
                        category = pitfalls.category_of_change(op, key)
                        out.append(
                            Change(f"{where}.{op}.{key}", was, is_now, "preprocess", category)
                        )
            continue
        # A step on one side only: removed (at its old position) or added (at its new one).
        removed = now_index is None
        index = old_index if removed else now_index
        step = old[old_index or 0] if removed else new[now_index or 0]
        was, now = (step, ABSENT) if removed else (ABSENT, step)
        category = pitfalls.category_of_change(_op_of(step), None)
        out.append(Change(f"{path}[{index}]", was, now, "preprocess", category))


def recorded_steps(recorded: Mapping[str, Any]) -> tuple[Step, ...] | None:
    """The golden's recorded steps; None if they no longer parse (an unregistered custom step)."""
    try:
        raw = recorded["inputs"][0]["preprocess"]
        ctx = Context("golden.manifest", {})  # (its errors are caught: None)
        steps = []
        for index, item in enumerate(raw):
            ((op, params),) = item.items()
            steps.append(convert_dataclass(STEPS[op], params, ("preprocess", index, op), ctx))
        return tuple(steps)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, ManifestError):
        return None
