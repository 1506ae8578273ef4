"""Which YAML files are mlrepro manifests: the one rule, shared by collection and the golden audit.

The plugin loads in every pytest run of an environment it is installed in, so a ``manifests/``
folder of Kubernetes, Hydra, DVC, MLflow or Kubeflow YAML must stay someone else's. A file is a
manifest when

1. its path matches a pattern of the ini key ``mlrepro_manifests`` (``manifests/*.yaml`` ...),
2. it is a regular file (one over ``MAX_BYTES``, the manifest loader's own limit, is judged by
   its head: below), and
3. its content has a manifest's *shape*: parsed as YAML (safely: the bounded parser of
   ``_yaml.py``, plain data only, nothing constructed or run), its top level is a mapping in which
   at least ``MIN_SHAPES`` of these sections look as only a manifest's do (``SHAPES``):

   * ``model``: a mapping with ``format`` and ``file`` or ``weights``;
   * ``inputs``: a list whose first item is a mapping with ``preprocess``;
   * ``dataset``: a mapping with ``checksums``;
   * ``framework``: a mapping whose ``name`` is one of the frameworks the plugin runs.

The shape is read from the parsed value, so the YAML style does not matter: block or flow style,
JSON, a long leading comment, UTF-8 with a byte order mark, UTF-16 or UTF-32. A real manifest has
all four, so one or two misspelt or damaged sections still leave it claimed (and then reported
with file, line and field). A Hydra or DVC config with ``model:`` and ``dataset:`` sections has
neither ``model.format`` with a file nor ``dataset.checksums``; Kubernetes, Hugging Face cards,
MLflow ``MLmodel`` and Kubeflow files have none of these sections.

A regular file over ``MAX_BYTES`` is claimed when its first ``PEEK_BYTES`` have the
manifest's section keys at column 0: loading refuses it by its size, so a manifest never goes
silently unrun for being too large.

A file that does not parse as one YAML document (a syntax error, a tag that would construct an
object, several documents) has no shape to read: it is claimed when its top level, read as text,
has at least ``MIN_KEYS`` of the manifest's section keys at column 0 (``MANIFEST_KEYS``), so that
a manifest with a syntax error is reported instead of silently never run.

Cost: the recogniser sees every ``.yaml``/``.yml`` file the patterns name in projects that may
not use the plugin. Before any parse, the decoded text must contain at least ``MIN_SHAPES`` of
the section names as words (``model``, ``inputs``, ``dataset``, ``framework``): a manifest
always does, whatever its style, and most foreign YAML is then left after a substring search.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from ._files import FileTooLarge, open_regular, read_bounded
from ._names import FRAMEWORKS, matches_patterns
from ._yaml import MAX_BYTES, decode, load_yaml
from .errors import ManifestError

PEEK_BYTES = 64 * 1024
"""How much of an unparseable candidate the text fallback reads (top-level keys come early)."""
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


def top_level_keys(head: bytes) -> set[str]:
    """The keys written at column 0 of ``head`` (comments and list items never match)."""
    return {m.group(1).decode("ascii") for m in _TOP_KEY.finditer(head)}


def has_manifest_keys(head: bytes) -> bool:
    return len(top_level_keys(head) & MANIFEST_KEYS) >= MIN_KEYS


# What only a manifest's section looks like, per section (the module docstring's list).
SHAPES: dict[str, Callable[[object], bool]] = {
    "model": lambda v: isinstance(v, Mapping) and "format" in v and ("file" in v or "weights" in v),
    "inputs": lambda v: (
        isinstance(v, list) and len(v) > 0 and isinstance(v[0], Mapping) and "preprocess" in v[0]
    ),
    "dataset": lambda v: isinstance(v, Mapping) and "checksums" in v,
    "framework": lambda v: isinstance(v, Mapping) and v.get("name") in FRAMEWORKS,
}


def has_manifest_shape(data: object) -> bool:
    """Whether the parsed YAML value ``data`` has at least ``MIN_SHAPES`` manifest sections."""
    if not isinstance(data, Mapping):
        return False
    return sum(1 for key, shaped in SHAPES.items() if shaped(data.get(key))) >= MIN_SHAPES


def looks_like_manifest(content: bytes, file: str = "<manifest>") -> bool:
    """The content rule (module docstring, points 3 and the fallback) on a file's bytes."""
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
    return has_manifest_shape(data)


def is_manifest(path: Path, root: Path, patterns: Iterable[str]) -> bool:
    """The rule (module docstring). A file that cannot be read or is not a regular file (a FIFO
    would block the run) is not claimed (pytest reports nothing for it either); one over
    ``MAX_BYTES`` is judged by its head (:func:`_oversized_manifest`), never read whole."""
    if not matches_patterns(path, root, patterns):
        return False
    try:
        content = read_bounded(path, MAX_BYTES, follow_symlinks=True)
    except FileTooLarge:
        return _oversized_manifest(path)
    except OSError:  # not a regular file (a FIFO would block the run), or unreadable
        return False
    return content is not None and looks_like_manifest(content, str(path))


def _oversized_manifest(path: Path) -> bool:
    """A regular file too large to load whose head has a manifest's top-level keys is claimed:
    loading then refuses it with its size and the limit, instead of the manifest silently never
    running. A FIFO, device or unreadable file is not claimed (and not read)."""
    try:
        with open(open_regular(path), "rb") as fh:
            head = fh.read(PEEK_BYTES)
    except OSError:  # NotARegularFile included
        return False
    return has_manifest_keys(head)
