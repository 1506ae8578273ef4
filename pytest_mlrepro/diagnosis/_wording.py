"""How numbers, lists and manifest values read in a diagnosis."""

from __future__ import annotations

import math
from collections.abc import Sequence


def _show(value: object) -> str:
    if isinstance(value, dict) and len(value) == 1:
        ((op, params),) = value.items()
        if isinstance(params, dict):
            inner = ", ".join(f"{k}: {_show(v)}" for k, v in params.items() if v is not None)
            return f"{op}: {{{inner}}}"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    if isinstance(value, str) and len(value) > 24 and all(c in "0123456789abcdef" for c in value):
        return value[:12] + "…"  # a sha256
    return repr(value) if isinstance(value, str) else str(value)


def _num(value: float) -> str:
    if not math.isfinite(value):
        return "-"
    return "0" if value == 0 else f"{value:.2g}"


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _expected(label: str) -> str:
    """What a flip says is expected: the part before 'instead of'."""
    return label.split(" instead of ")[0]
