"""What a manifest may name and where manifests may be, apart from the manifest package because
the pytest entry point needs them in every run without importing the core."""

from __future__ import annotations

import fnmatch
import shlex
from collections.abc import Iterable
from pathlib import Path

FRAMEWORKS = ("onnxruntime", "torch", "tensorflow", "tflite")
DEVICES = ("cpu", "cuda")

DEFAULT_PATTERNS = (
    "manifests/*.yaml",
    "manifests/*.yml",
    "*/manifests/*.yaml",
    "*/manifests/*.yml",
)
"""The ini key ``mlrepro_manifests``'s default: where a project keeps its manifests."""


def matches_patterns(path: Path, root: Path, patterns: Iterable[str]) -> bool:
    if path.suffix not in (".yaml", ".yml"):
        return False
    try:
        relative = path.relative_to(root).as_posix()
    except ValueError:
        relative = path.as_posix()
    return any(fnmatch.fnmatch(relative, str(p)) for p in patterns)


def record_command(target: str, *options: str) -> str:
    """Quoted for a POSIX shell; here, so that the core's messages build it as the report does."""
    return " ".join(["pytest", shlex.quote(target), "--mlrepro-update", *options])


def enrich_command(target: str, *options: str) -> str:
    return " ".join(["pytest", shlex.quote(target), "--mlrepro-enrich", *options])
