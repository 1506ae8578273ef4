"""How a manifest value reads where a pitfall flip names it (``crop: {fraction: 0.875}``)."""

from __future__ import annotations


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
