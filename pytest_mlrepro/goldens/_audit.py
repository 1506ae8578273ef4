"""Checks over the golden store as a whole: shared goldens, unused ones and killed writers'
temporary files."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from .._files import STALE_AFTER_S
from .._files import stale_temp_files as _stale_for


def golden_conflicts(claims: Iterable[tuple[str, Path]]) -> dict[Path, list[str]]:
    """Each golden path claimed by more than one manifest, with the manifests (sorted)."""
    owners: dict[Path, set[str]] = {}
    for manifest, path in claims:
        owners.setdefault(path, set()).add(manifest)
    return {path: sorted(names) for path, names in owners.items() if len(names) > 1}


def conflict_message(manifest: str, path: str, others: Iterable[str]) -> str:
    listed = ", ".join(others)
    return (
        f"{manifest}: its golden {path} is also the golden of {listed}: two manifests "
        "cannot share one golden file (each run would compare against, and --mlrepro-update "
        "overwrite, the other's results); give each manifest its own 'name' or 'golden' path. "
        "Nothing was run or written."
    )


def unused_goldens(
    golden_dir: Path, used: Iterable[Path], latency_names: Iterable[str] = ()
) -> list[Path]:
    """Hidden files are never goldens."""
    if not golden_dir.is_dir():
        return []
    wanted = {p.resolve() for p in used}
    unused = [
        p
        for p in sorted(golden_dir.glob("*.json"))
        if not p.name.startswith(".") and p.is_file() and p.resolve() not in wanted
    ]
    latency = golden_dir / "latency"
    if latency.is_dir():
        names = set(latency_names)
        unused += [
            p
            for p in sorted(latency.iterdir())
            if p.is_dir() and not p.name.startswith(".") and p.name not in names
        ]
    return unused


def stale_temp_files(golden_dir: Path, older_than: float = STALE_AFTER_S) -> list[Path]:
    """Temporary files in ``golden_dir`` that killed writers left (no live writer holds them)."""
    if not golden_dir.is_dir():
        return []
    targets = {
        golden_dir / p.name[1:].rsplit(".", 2)[0]
        for p in golden_dir.glob(".*.tmp")
        if p.name.count(".") >= 3
    }
    return sorted({s for target in targets for s in _stale_for(target, older_than)})
