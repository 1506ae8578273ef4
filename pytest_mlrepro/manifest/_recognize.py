"""Which YAML files are mlrepro manifests: the one rule, shared by collection and the golden audit.

The plugin loads in every pytest run of an environment it is installed in, so a ``manifests/``
folder of Kubernetes, Helm or CI YAML must stay someone else's. A file is a manifest when

1. its path matches a pattern of the ini key ``mlrepro_manifests`` (``manifests/*.yaml`` ...), and
2. its top level (the first ``PEEK_BYTES``) has at least ``MIN_KEYS`` of the keys that only a
   manifest has (``MANIFEST_KEYS``: ``framework``, ``model``, ``inputs``, ``dataset``, ...).

The peek reads keys at column 0 as text: no YAML is parsed, nothing is executed, and a manifest
with a syntax error or a misspelt key is still claimed (then reported with its file, line and
field); a real manifest has at least four of these keys, so two misspellings still leave it
claimed. Kubernetes YAML (``apiVersion``, ``kind``, ``metadata``, ``spec``) has none of them.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from pathlib import Path

PEEK_BYTES = 64 * 1024
"""How much of a candidate file the peek reads (a manifest's top-level keys come early)."""
MIN_KEYS = 2
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


def top_level_keys(head: bytes) -> set[str]:
    """The keys written at column 0 of ``head`` (comments and list items never match)."""
    return {m.group(1).decode("ascii") for m in _TOP_KEY.finditer(head)}


def has_manifest_keys(head: bytes) -> bool:
    return len(top_level_keys(head) & MANIFEST_KEYS) >= MIN_KEYS


def matches_patterns(path: Path, root: Path, patterns: Iterable[str]) -> bool:
    """Whether ``path`` is a ``.yaml``/``.yml`` file named by one of the glob ``patterns``
    (relative to ``root``)."""
    if path.suffix not in (".yaml", ".yml"):
        return False
    try:
        relative = path.relative_to(root).as_posix()
    except ValueError:
        relative = path.as_posix()
    return any(fnmatch.fnmatch(relative, str(p)) for p in patterns)


def is_manifest(path: Path, root: Path, patterns: Iterable[str]) -> bool:
    """The rule (module docstring): named by the patterns, and its top level looks like a
    manifest. An unreadable file is not claimed (pytest reports nothing for it either)."""
    if not matches_patterns(path, root, patterns):
        return False
    try:
        with open(path, "rb") as fh:
            head = fh.read(PEEK_BYTES)
    except OSError:
        return False
    return has_manifest_keys(head)


__all__ = ["MANIFEST_KEYS", "MIN_KEYS", "PEEK_BYTES", "is_manifest", "top_level_keys"]
