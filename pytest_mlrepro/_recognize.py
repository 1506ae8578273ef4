"""Which YAML files are mlrepro manifests: Kubernetes or Hydra YAML must stay someone else's, a
manifest with a syntax error must still be claimed (docs/options.md)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from ._files import FileTooLarge, open_regular, read_bounded
from ._names import FRAMEWORKS, matches_patterns
from ._yaml import MAX_BYTES, decode, load_yaml
from .errors import ManifestError

PEEK_BYTES = 64 * 1024  # what the text fallback reads (top-level keys come early)
MIN_KEYS = 2
MIN_SHAPES = 2
MANIFEST_KEYS = frozenset(
    {
        "framework",
        "model",
        "inputs",
        "dataset",
        "postprocess",
        "tolerances",
        "runtime",
        "latency",
        "determinism",
        "reference",
    }
)
"""Top-level keys of the manifest schema that generic YAML does not use (not ``name``,
``version`` or ``description``)."""

# A mapping key at column 0 (plain or quoted), followed by a colon.
_TOP_KEY = re.compile(rb"""^["']?([A-Za-z_][A-Za-z0-9_-]*)["']?[ \t]*:""", re.MULTILINE)


def has_manifest_keys(head: bytes) -> bool:
    """Comments and list items never match."""
    keys = {m.group(1).decode("ascii") for m in _TOP_KEY.finditer(head)}
    return len(keys & MANIFEST_KEYS) >= MIN_KEYS


# What only a manifest's section looks like, per section.
SHAPES: dict[str, Callable[[object], bool]] = {
    "model": lambda v: isinstance(v, Mapping) and "format" in v and ("file" in v or "weights" in v),
    "inputs": lambda v: (
        isinstance(v, list) and len(v) > 0 and isinstance(v[0], Mapping) and "preprocess" in v[0]
    ),
    "dataset": lambda v: isinstance(v, Mapping) and "checksums" in v,
    "framework": lambda v: isinstance(v, Mapping) and v.get("name") in FRAMEWORKS,
}


def looks_like_manifest(content: bytes, file: str = "<manifest>") -> bool:
    """``MIN_SHAPES`` sections shaped as a manifest's; without YAML, its top-level keys."""
    try:
        text = decode(content, file)
    except ManifestError:
        return has_manifest_keys(content[:PEEK_BYTES])
    # The cheap pre-filter: every manifest names at least MIN_SHAPES sections as words.
    if sum(1 for section in SHAPES if section in text) < MIN_SHAPES:
        return False
    try:
        data, _ = load_yaml(text, file)
    except ManifestError:
        return has_manifest_keys(text[:PEEK_BYTES].encode("utf-8", "replace"))
    if not isinstance(data, Mapping):
        return False
    return sum(1 for key, shaped in SHAPES.items() if shaped(data.get(key))) >= MIN_SHAPES


def is_manifest(path: Path, root: Path, patterns: Iterable[str]) -> bool:
    """An unreadable or irregular file is not claimed; a large one is judged by its head."""
    if not matches_patterns(path, root, patterns):
        return False
    try:
        content = read_bounded(path, MAX_BYTES, follow_symlinks=True)
    except FileTooLarge:
        # Claimed if its head has a manifest's top-level keys: loading then refuses it by its
        # size, instead of the manifest silently never running.
        try:
            with open(open_regular(path), "rb") as fh:
                return has_manifest_keys(fh.read(PEEK_BYTES))
        except OSError:  # NotARegularFile included
            return False
    except OSError:  # not a regular file (a FIFO would block the run), or unreadable
        return False
    return content is not None and looks_like_manifest(content, str(path))
