"""The manifest: its schema (loaded with the line of every field), recognition of manifest files,
and the JSON Schema export."""

from __future__ import annotations

from .._names import DEVICES, FRAMEWORKS
from .._recognize import is_manifest
from ._spec import (
    STATISTICS,
    TF_FORMATS,
    Dataset,
    Determinism,
    FileRef,
    Input,
    Latency,
    Manifest,
    Reference,
    Tolerances,
    load_manifest,
    name_problem,
    parse_manifest,
)

__all__ = [
    "DEVICES",
    "FRAMEWORKS",
    "STATISTICS",
    "TF_FORMATS",
    "Dataset",
    "Determinism",
    "FileRef",
    "Input",
    "Latency",
    "Manifest",
    "Reference",
    "Tolerances",
    "is_manifest",
    "load_manifest",
    "name_problem",
    "parse_manifest",
]
