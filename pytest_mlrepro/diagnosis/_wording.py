"""How numbers, lists and manifest values read in a diagnosis."""

from __future__ import annotations

import math
from collections.abc import Sequence


def show_value(value: object) -> str:
    if isinstance(value, dict) and len(value) == 1:
        ((op, params),) = value.items()
        if isinstance(params, dict):
            inner = ", ".join(f"{k}: {show_value(v)}" for k, v in params.items() if v is not None)
            return f"{op}: {{{inner}}}"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return "[" + ", ".join(show_value(v) for v in value) + "]"
    if isinstance(value, str) and len(value) > 24 and all(c in "0123456789abcdef" for c in value):
        return value[:12] + "…"  # a sha256
    return repr(value) if isinstance(value, str) else str(value)


def short_number(value: float, digits: int = 2) -> str:
    if not math.isfinite(value):
        return "-"
    return "0" if value == 0 else f"{value:.{digits}g}"


def signed(k: int) -> str:
    """``+2``, ``−1`` (a minus sign, not a hyphen)."""
    return f"+{k}" if k > 0 else f"−{-k}"


def and_list(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def flip_expects(label: str) -> str:
    """What a flip says is expected: the part before 'instead of'."""
    return label.split(" instead of ")[0]
