"""The one rule for text from data on a terminal: control characters are shown, never obeyed,
since names from files others wrote could retitle a window or hide lines in a CI log."""

from __future__ import annotations

import hashlib
import re

# C0 (U+0000-U+001F), DEL, C1 (U+0080-U+009F); the bidi embeddings, overrides and isolates, and
# the line and paragraph separators (which reorder or break what a terminal or log viewer shows).
_OTHERS = "\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_ANY = re.compile(f"[\x00-\x1f{_OTHERS}]")
_BUT_LINE_FEEDS = re.compile(f"[\x00-\x09\x0b-\x1f{_OTHERS}]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """Every control character, line breaks included, written as a visible escape."""
    return _ANY.sub(_escape, text)


def visible_lines(text: str) -> str:
    """Line feeds kept, every other control character escaped."""
    return _BUT_LINE_FEEDS.sub(_escape, text)


DISPLAY_LIMIT = 100
"""The most characters of a name (machine, manifest, device) a page or table shows: as long as
a manifest's name may be."""


def shortened(text: str, limit: int = DISPLAY_LIMIT) -> str:
    """Start, ellipsis and digest past ``limit`` (``ci-…#3f2a9c1e``): two long names sharing their
    start stay two."""
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{text[: limit - 10]}…#{digest}"


def described(value: object, limit: int = 80) -> str:
    """``an int (42)``: the ``repr`` cut at ``limit`` and shown visibly (not if it raises)."""
    kind = type(value).__name__
    article = "an" if kind[:1].lower() in "aeiou" else "a"
    try:
        text = repr(value)
    except Exception:  # a user's __repr__ may raise anything: the type alone is said then
        return f"{article} {kind}"
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return f"{article} {kind} ({visible(text)})"
