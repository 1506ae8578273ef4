"""pytest glue for the golden store's audit: shared goldens refused, unused ones listed."""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

import pytest

from .. import goldens as golden_audit
from ..manifest import is_manifest
from ._accuracy import AccuracyItem
from ._base import GoldenAudit, display_path, settings_key, state_of

WORKER_OUTPUT = "mlrepro_golden_audit"


def mark_shared_goldens(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse the accuracy items of manifests that share a golden file, before any runs."""
    audit = state_of(config).audit
    claims = [(shown, golden) for shown, golden, _ in audit.claims.values() if golden is not None]
    conflicts = golden_audit.golden_conflicts(claims)
    if not conflicts:
        return
    by_manifest = {
        shown: (path, [o for o in owners if o != shown])
        for path, owners in conflicts.items()
        for shown in owners
    }
    for item in items:
        shown = display_path(config, item.path)
        if isinstance(item, AccuracyItem) and shown in by_manifest:
            path, others = by_manifest[shown]
            item.shared_golden = golden_audit.conflict_message(
                shown, display_path(config, path), others
            )


def _manifest_files(config: pytest.Config) -> set[Path]:
    """Every manifest the ini key mlrepro_manifests names, outside pytest's norecursedirs."""
    skip = [str(p) for p in config.getini("norecursedirs")]
    patterns = config.getini("mlrepro_manifests")
    found: set[Path] = set()
    for pattern in patterns:
        for path in config.rootpath.glob(str(pattern)):
            parts = path.relative_to(config.rootpath).parts[:-1]
            if any(fnmatch.fnmatch(part, s) for part in parts for s in skip):
                continue
            if path.is_file() and is_manifest(path, config.rootpath, patterns):
                found.add(path.resolve())
    return found


def _local_report(session: pytest.Session, audit: GoldenAudit) -> dict[str, Any]:
    """This process's share of the audit, as plain data (what an xdist worker sends back)."""
    config = session.config
    collected = {p.resolve() for p in audit.claims} | {p.resolve() for p in audit.broken}
    complete = (
        audit.deselected == 0
        and not any("::" in str(arg) for arg in config.args)
        and _manifest_files(config) <= collected
    )
    return {
        "complete": complete,
        "broken": sorted(display_path(config, p) for p in audit.broken),
        "used": sorted(str(g) for _, g, _ in audit.claims.values() if g is not None),
        "names": sorted({name for _, _, name in audit.claims.values()}),
    }


def gather_worker_audit(node: Any) -> None:
    output = getattr(node, "workeroutput", None) or {}
    report = output.get(WORKER_OUTPUT)
    if report is not None:
        state_of(node.config).audit.from_workers.append(report)


def share_audit(session: pytest.Session, audit: GoldenAudit) -> None:
    """An xdist worker's share to the controller; a run without xdist keeps its own (the
    controller collects nothing)."""
    config = session.config
    if hasattr(config, "workeroutput"):
        config.workeroutput[WORKER_OUTPUT] = _local_report(session, audit)
    elif not hasattr(config, "workerinput") and not config.pluginmanager.has_plugin("dsession"):
        audit.from_workers.append(_local_report(session, audit))


def audit_findings(
    config: pytest.Config, audit: GoldenAudit
) -> tuple[list[str], list[str], list[str]]:
    """(unused goldens, manifests that failed to load, interrupted writes' temporary files), when
    every manifest was collected (not with -k, -m, node ids or a subset); nothing otherwise."""
    if config.option.collectonly:
        return [], [], []
    reports = audit.from_workers
    collected = any(r["names"] or r["broken"] for r in reports)  # no manifest: not in use here
    if not collected or not all(r["complete"] for r in reports):
        return [], [], []
    settings = config.stash[settings_key]
    broken = sorted({b for r in reports for b in r["broken"]})
    used = {Path(u) for r in reports for u in r["used"]}
    names = {n for r in reports for n in r["names"]}
    unused = golden_audit.unused_goldens(settings.golden_dir, used, names)
    stale = golden_audit.stale_temp_files(settings.golden_dir)
    return (
        [f"{display_path(config, p)}{'/' if p.is_dir() else ''}" for p in unused],
        broken,
        [display_path(config, p) for p in stale],
    )
