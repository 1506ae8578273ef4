"""The latency goldens, one file per hardware key; a key without one is compared with its nearest
(a thread count or framework upgrade that slows the model is a regression)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import GoldenError
from ..fingerprint import HardwareKey, environment
from ..manifest import Manifest
from ..settings import Settings, shown_path
from ._store import read_document, schema_validator, title_of
from ._writer import Based, golden_lock, replace_locked

FORMAT = 1
"""The latency golden's format."""


def latency_dir(settings: Settings, manifest: Manifest) -> Path:
    return settings.golden_dir / "latency" / manifest.name


def golden_file(settings: Settings, manifest: Manifest, key: HardwareKey) -> Path:
    return latency_dir(settings, manifest) / f"{key.slug}.json"


@dataclass(frozen=True)
class Distribution:
    """A recorded distribution: full-sample statistics and a sketch of the samples (seconds)."""

    stats: dict[str, float]  # seconds (rounds as a float)
    samples: np.ndarray

    def get(self, statistic: str) -> float:
        return float(self.stats[statistic])


@dataclass(frozen=True)
class Baseline:
    """A golden entry to compare with: one batch size of one hardware key's file."""

    path: Path
    slug: str
    key: dict[str, Any]
    exact: bool  # recorded for this very key (else: the same machine, other settings)
    recorded: str
    settings: dict[str, Any]
    contention: float | None
    reference: dict[str, Any]
    reference_samples: np.ndarray
    reference_blocks: np.ndarray  # block medians (seconds): the host's speed at recording
    measurements: dict[str, Distribution]
    entry: dict[str, Any]


def _distribution(raw: Mapping[str, Any], where: str) -> Distribution:
    stats = raw["stats"]
    samples = raw["samples_ms"]
    if not isinstance(stats, dict) or not isinstance(samples, list) or not samples:
        raise ValueError(f"{where}: expected 'stats' and a non-empty 'samples_ms'")
    seconds = {
        k: float(v) * (1 if k in ("rounds", "iqr_outliers", "stddev_outliers") else 1e-3)
        for k, v in stats.items()
    }
    values = np.asarray([float(v) for v in samples]) * 1e-3
    if not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError(f"{where}: samples must be finite and non-negative")
    return Distribution(stats=seconds, samples=values)


def _blocks(raw: Mapping[str, Any], where: str) -> None:
    blocks = raw.get("blocks_ms")
    if blocks is None:
        return
    if not isinstance(blocks, list) or not blocks:
        raise ValueError(f"{where}: 'blocks_ms' must be a non-empty list")
    values = np.asarray([float(v) for v in blocks])
    if not np.all(np.isfinite(values)) or np.any(values <= 0):
        raise ValueError(f"{where}: 'blocks_ms' must be finite and positive")


def read_golden(path: Path) -> dict[str, Any] | None:
    """The latency golden at ``path``, validated (None: no file)."""
    found = read_golden_document(path)
    return None if found is None else found[0]


def read_golden_document(path: Path) -> tuple[dict[str, Any], str] | None:
    """:func:`read_golden` and the sha256 of the bytes read (what a write based on it compares)."""
    found = read_document(path, "latency golden", None)
    if found is None:
        return None
    data, digest = found
    try:
        if (
            not isinstance(data, dict)
            or data.get("format") != FORMAT
            or data.get("kind") != ("latency")
        ):
            raise ValueError(f'expected a mapping with "format": {FORMAT}, "kind": "latency"')
        if not isinstance(data["key"], dict) or not isinstance(data["batches"], dict):
            raise ValueError("'key' and 'batches' must be mappings")
        for batch, entry in data["batches"].items():
            int(batch)
            for name, raw in entry["measurements"].items():
                _distribution(raw, f"batch {batch} {name}")
            _distribution(entry["reference"], f"batch {batch} reference")
            _blocks(entry["reference"], f"batch {batch} reference")
            if "profile" in entry:
                _check_profile(entry["profile"], f"batch {batch} profile")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        error = GoldenError(
            f"{path}: not a valid latency golden ({type(exc).__name__}: {exc}); fix it or "
            "record it again with --mlrepro-update"
        )
        error.digest = digest
        raise error from None
    return data, digest


def _check_profile(raw: Any, where: str) -> None:
    """ValueError naming the first field of an operator profile that breaks the schema."""
    validator = schema_validator("LatencyProfile")
    error = validator.first_error(raw)
    if error is not None:
        field = "".join(f".{p}" for p in error.path)
        raise ValueError(f"{where}{field}: expected {title_of(validator.schema, error)}")


def _baseline(path: Path, data: dict[str, Any], batch: int, exact: bool) -> Baseline:
    entry = data["batches"][str(batch)]
    workload = entry["reference"].get("workload", {})
    # Every batch size's reference in the file: they were measured on the same machine in the
    # same recording session, and one short measurement alone can be a lucky one (seen here: 7.8
    # against 12.4 ms p50 between two batch sizes recorded a minute apart on an idle machine),
    # which would then excuse a real slowdown as "the machine is slower now".
    same = [
        other["reference"]
        for other in data["batches"].values()
        if other["reference"].get("workload", {}) == workload
    ]
    pooled = [_distribution(ref, "reference").samples for ref in same]
    # Blocks: the medians of the reference blocks interleaved with the recording's rounds. A
    # golden recorded before them has none, and its reference is not comparable anyway (its
    # description has no timing method: latency.reference_comparison).
    blocks = [value * 1e-3 for ref in same for value in ref.get("blocks_ms", [])]
    return Baseline(
        path=path,
        slug=str(data.get("slug", path.stem)),
        key=data["key"],
        exact=exact,
        recorded=str(entry.get("recorded", "")),
        settings=dict(entry.get("settings", {})),
        contention=entry.get("contention"),
        reference=dict(workload),
        reference_samples=np.concatenate(pooled),
        reference_blocks=np.asarray(blocks, dtype=np.float64),
        measurements={
            name: _distribution(raw, name) for name, raw in entry["measurements"].items()
        },
        entry=entry,
    )


def find_baseline(
    settings: Settings, manifest: Manifest, key: HardwareKey, batch: int
) -> Baseline | None:
    """Else the same machine and device's golden with the fewest differing key fields (the latest
    on a tie); GoldenError only for this key's own file."""
    own = golden_file(settings, manifest, key)
    data = read_golden(own)
    if data is not None and str(batch) in data["batches"]:
        return _baseline(own, data, batch, exact=True)
    candidates: list[tuple[int, str, Path, dict[str, Any]]] = []
    folder = latency_dir(settings, manifest)
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if path == own:
            continue
        try:
            other = read_golden(path)
        except GoldenError:
            continue
        if other is None or str(batch) not in other["batches"]:
            continue
        if not key.same_hardware(other["key"]):
            continue
        recorded = str(other["batches"][str(batch)].get("recorded", ""))
        candidates.append((len(key.differences(other["key"])), recorded, path, other))
    if not candidates:
        return None
    # Fewest differences, then the latest recorded; on a tie the first path (they are sorted).
    _, _, path, other = max(candidates, key=lambda c: (-c[0], c[1]))
    return _baseline(path, other, batch, exact=False)


_SAMPLE_LIST = re.compile(r'("samples_ms": )(\[[^\]]*\])')


def dumps(data: dict[str, Any]) -> str:
    """Reviewable JSON: sorted keys, two-space indent, each sample list on one line."""
    text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    return _SAMPLE_LIST.sub(lambda m: m[1] + json.dumps(json.loads(m[2])), text) + "\n"


def record(
    settings: Settings,
    manifest: Manifest,
    key: HardwareKey,
    batch: int,
    entry: dict[str, Any],
    runner_info: dict[str, Any],
) -> Path:
    """Read, modified and replaced atomically under the golden's lock."""
    path = golden_file(settings, manifest, key)
    # Read-modify-write under the golden's lock, written the one way (goldens/_writer.py): the
    # read is inside the lock, so no other writer's entry is lost.
    with golden_lock(settings, path, "latency golden"):
        try:
            found = read_golden_document(path)
            based_on = Based(None if found is None else found[1])
            data = None if found is None else found[0]
        except GoldenError as exc:  # only --mlrepro-update gets here: it replaces a broken file
            based_on, data = Based(exc.digest), None
        if data is None:
            data = {"format": FORMAT, "kind": "latency", "batches": {}}
        data.update(
            name=manifest.name,
            key=key.fields,
            slug=key.slug,
            environment=environment({k: v for k, v in runner_info.items() if k != "device"}),
        )
        data["batches"][str(batch)] = entry
        replace_locked(
            path, dumps(data).encode("utf-8"), settings, based_on, what="latency golden",
            rerun=f"pytest {shown_path(manifest.path, settings.root)} --mlrepro-update",
        )  # fmt: skip
    return path


def add_profile(
    settings: Settings,
    manifest: Manifest,
    key: HardwareKey,
    batch: int,
    profile: dict[str, Any],
    read: Mapping[str, Any],
) -> Path:
    """Every other byte as it was; GoldenError if the entry changed since ``read``."""
    path = golden_file(settings, manifest, key)
    # The one writer (goldens/_writer.py): confined, locked, and based on what was read under
    # the lock, which must still hold the entry the run judged against.
    with golden_lock(settings, path, "latency golden"):
        found = read_golden_document(path)
        entry = None if found is None else found[0]["batches"].get(str(batch))
        if found is None or entry is None or entry != read or "profile" in entry:
            raise GoldenError(
                f"{path}: changed since this run read it (another process wrote it); nothing added"
            )
        data, digest = found
        entry["profile"] = profile
        replace_locked(
            path, dumps(data).encode("utf-8"), settings, Based(digest), what="latency golden",
            rerun=f"pytest {shown_path(manifest.path, settings.root)} --mlrepro-enrich",
        )  # fmt: skip
    return path
