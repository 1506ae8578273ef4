"""The golden store: one reviewable JSON file per model, written atomically, never half-written.

Layout of a golden (keys sorted, one sample per line so that a diff shows which samples moved)::

    {
      "data": {"<sample id>": "<sha256>", ...}, optional: the data it was measured on, one file
                                       a line (the labels are in "samples")
      "environment": {...},            where it was recorded
      "format": 1,
      "manifest": {...},               the manifest as recorded, every default filled in
      "metrics": {"samples": N, "top1": .., "top5": ..},
      "name": "...",
      "probes": {...},                 optional: per-step fingerprints of a few probe samples
      "samples": [
        ["<sample id>", <label>, [<top-k classes>], [<their scores>]],
        ...
      ]
    }
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ._files import atomic_write_bytes, remove_stale_temp_files
from .errors import GoldenError, ManifestError
from .metrics import Results
from .settings import OutsideProject, Settings, resolve_inside
from .spec import Manifest, parse_manifest

FORMAT = 1
SCORE_DIGITS = 6  # significant digits kept per score: far below any tolerance, stable text


@dataclass(frozen=True)
class Golden:
    name: str
    manifest: dict[str, Any]
    environment: dict[str, Any]
    results: Results
    # Per-step fingerprints of a few probe samples, for diagnosis (probes.py); None in goldens
    # recorded before they existed, which still load.
    probes: dict[str, Any] | None = None
    # {sample id: sha256} of the files the results were measured on (with the labels in
    # ``results``, the identity of the data); None in goldens recorded before it existed.
    data: dict[str, str] | None = None

    @property
    def metrics(self) -> dict[str, Any]:
        return {
            "samples": len(self.results.ids),
            "top1": round(self.results.top1, 4),
            "top5": round(self.results.top5, 4),
        }


def golden_path(manifest: Manifest, settings: Settings) -> Path:
    """The manifest's ``golden:`` (from the project root), else ``<golden dir>/<name>.json``."""
    if manifest.golden is None:
        return settings.golden_dir / f"{manifest.name}.json"
    try:
        return resolve_inside(settings.root, manifest.golden, settings)
    except OutsideProject as exc:
        raise manifest.error(("golden",), str(exc)) from None


def _round(value: float) -> float:
    return float(f"{value:.{SCORE_DIGITS}g}")


def rounded_scores(scores: np.ndarray) -> np.ndarray:
    """Scores as the golden keeps them, so that a fresh run and its golden are compared alike."""
    return np.vectorize(_round, otypes=[np.float64])(scores) if scores.size else scores


def dumps(golden: Golden) -> str:
    head = {
        "format": FORMAT,
        "name": golden.name,
        "manifest": golden.manifest,
        "environment": golden.environment,
        "metrics": golden.metrics,
    }
    if golden.data is not None:
        head["data"] = golden.data  # a flat mapping: one file a line, sorted
    text = json.dumps(head, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    r = golden.results
    rows = [
        json.dumps(
            [sample, int(label), [int(c) for c in classes], [_round(float(s)) for s in scores]],
            ensure_ascii=False,
            allow_nan=False,
        )
        for sample, label, classes, scores in zip(r.ids, r.labels, r.topk, r.topk_scores)
    ]
    body = ",\n    ".join(rows)
    probes = "" if golden.probes is None else f',\n  "probes": {_dump_probes(golden.probes)}'
    return text[:-2] + probes + f',\n  "samples": [\n    {body}\n  ]\n}}\n'


def _dump_probes(probes: dict[str, Any]) -> str:
    """The probes block: keys sorted, one fingerprint (probe × step) per line."""
    parts = []
    for key in sorted(probes):
        value = probes[key]
        if key == "fingerprints" and isinstance(value, list):
            lines = ",\n      ".join(
                json.dumps(row, sort_keys=True, ensure_ascii=False, allow_nan=False)
                for row in value
            )
            rendered = f"[\n      {lines}\n    ]" if value else "[]"
        else:
            rendered = json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=False)
        parts.append(f"    {json.dumps(key)}: {rendered}")
    return "{\n" + ",\n".join(parts) + "\n  }"


def write(path: Path, golden: Golden) -> None:
    """Replace the golden at ``path`` atomically (readers see the old file or the new one), first
    removing temporary files that killed writers left beside it."""
    remove_stale_temp_files(path)
    atomic_write_bytes(path, dumps(golden).encode("utf-8"))


def manifest_is_current(recorded: dict[str, Any], manifest: Manifest) -> bool:
    """Whether the manifest a golden recorded is ``manifest`` as it is now. Keys the recording
    lacks (options added to pytest-mlrepro since) count as their defaults, so that a new option
    does not rewrite every golden; a recording that no longer validates is not current."""
    now = manifest.normalized()
    if recorded == now:
        return True
    try:
        then = parse_manifest(recorded, "(recorded manifest)", {})
    except ManifestError:
        return False
    return then.normalized() == now


def read_json(path: Path, what: str = "golden") -> Any:
    """The JSON document at ``path``; None if there is no file; GoldenError (naming the line of a
    syntax error) if it cannot be read or parsed. Shared by every kind of golden file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise GoldenError(f"{path}: cannot read the {what}: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise GoldenError(
            f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); fix it or record "
            "it again with --mlrepro-update"
        ) from None


def read(path: Path) -> Golden | None:
    """The golden at ``path``; None if there is none; GoldenError if the file is not a golden."""
    data = read_json(path)
    if data is None:
        return None
    try:
        return _parse(data)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise GoldenError(
            f"{path}: not a valid golden ({type(exc).__name__}: {exc}); fix it or "
            "record it again with --mlrepro-update"
        ) from None


def _parse(data: Any) -> Golden:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f'expected a mapping with "format": {FORMAT}')
    rows = data["samples"]
    if not isinstance(rows, list) or not rows:
        raise ValueError("'samples' must be a non-empty list")
    ids, labels, classes, scores = [], [], [], []
    width = None
    for i, row in enumerate(rows):
        sample, label, top, score = row
        if not isinstance(sample, str) or not isinstance(label, int):
            raise ValueError(f"sample {i}: expected [id, label, [classes], [scores]]")
        if width is None:
            width = len(top)
        if len(top) != width or len(score) != width or width == 0:
            raise ValueError(f"sample {i} ({sample}): top-k lists of different lengths")
        ids.append(sample)
        labels.append(label)
        classes.append([int(c) for c in top])
        scores.append([float(s) for s in score])
    if len(set(ids)) != len(ids):
        raise ValueError("a sample id appears twice")
    results = Results(
        ids=tuple(ids),
        labels=np.asarray(labels, np.int64),
        topk=np.asarray(classes, np.int64),
        topk_scores=np.asarray(scores),
    )
    manifest, environment = data["manifest"], data["environment"]
    if not isinstance(manifest, dict) or not isinstance(environment, dict):
        raise ValueError("'manifest' and 'environment' must be mappings")
    probes = data.get("probes")
    if probes is not None and not isinstance(probes, dict):
        raise ValueError("'probes' must be a mapping")
    return Golden(
        name=str(data["name"]),
        manifest=manifest,
        environment=environment,
        results=results,
        probes=probes,
        data=_parse_data(data.get("data")),
    )


_SHA256 = re.compile(r"[0-9a-f]{64}")


def _parse_data(block: Any) -> dict[str, str] | None:
    """The optional ``data`` block: a sha256 (lowercase hex) per file. A sample without one (or
    a file without its sample) is only not compared (``data_identity.py``)."""
    if block is None:
        return None
    if not isinstance(block, dict):
        raise ValueError("'data' must be a mapping of sample id to sha256")
    for sample, digest in block.items():
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            raise ValueError(f"data: {sample!r}: expected a sha256 (64 hex digits), got {digest!r}")
    return dict(block)
