"""pytest glue for the golden store's audit: manifests that share a golden file are refused
before anything runs, and goldens that no manifest uses are listed at the end (the logic lives in
:mod:`pytest_mlrepro.goldens`; the state in the session's :class:`~._session.GoldenAudit`)."""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

import pytest

from .. import goldens as golden_audit
from ..manifest import is_manifest
from ._determinism import DeterminismItem
from ._items import AccuracyItem, ManifestErrorItem, MlreproFailure, display_path, settings_key
from ._session import GoldenAudit, session_of

_conflict_key = pytest.StashKey[str]()
WORKER_OUTPUT = "mlrepro_golden_audit"


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    """An item whose golden another manifest claims too fails before it runs."""
    conflict = item.stash.get(_conflict_key, None)
    if conflict is not None and isinstance(item, AccuracyItem):
        for key, value in (
            ("manifest", item.manifest.name),
            ("device", item.device),
            ("framework", item.manifest.framework.name),
            ("verdict", "golden shared"),
        ):
            item.add_property(key, value)
        raise MlreproFailure(conflict)


def pytest_itemcollected(item: pytest.Item) -> None:
    if isinstance(item, ManifestErrorItem):
        session_of(item.config).audit.broken.add(item.path)


def pytest_deselected(items: list[pytest.Item]) -> None:
    if items:
        session_of(items[0].config).audit.deselected += len(items)


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Refuse the accuracy items of manifests that share a golden file, before any runs."""
    audit = session_of(config).audit
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
        if isinstance(item, AccuracyItem) and not isinstance(item, DeterminismItem):
            shown = display_path(config, item.path)
            if shown in by_manifest:
                path, others = by_manifest[shown]
                message = golden_audit.conflict_message(shown, display_path(config, path), others)
                item.stash[_conflict_key] = message


def _manifest_files(config: pytest.Config) -> set[Path]:
    """Every manifest (manifest/_recognize.py's rule) the ini key mlrepro_manifests names, outside
    pytest's norecursedirs."""
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


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """Controller side (xdist): gather each worker's audit."""
    output = getattr(node, "workeroutput", None) or {}
    report = output.get(WORKER_OUTPUT)
    if report is not None:
        session_of(node.config).audit.from_workers.append(report)


def share_audit(session: pytest.Session, audit: GoldenAudit) -> None:
    """At the end of the session: an xdist worker sends its share of the audit to the
    controller; a run without xdist keeps its own (the controller collects nothing)."""
    config = session.config
    if hasattr(config, "workeroutput"):
        config.workeroutput[WORKER_OUTPUT] = _local_report(session, audit)
    elif not hasattr(config, "workerinput") and not config.pluginmanager.has_plugin("dsession"):
        audit.from_workers.append(_local_report(session, audit))


def audit_section(config: pytest.Config, audit: GoldenAudit) -> list[str]:
    """Goldens that no manifest uses, when manifests were collected, all of them (not with -k,
    -m, node ids or a subset of the manifests); no lines otherwise."""
    if config.option.collectonly:
        return []
    reports = audit.from_workers
    collected = any(r["names"] or r["broken"] for r in reports)  # no manifest: not in use here
    if not collected or not all(r["complete"] for r in reports):
        return []
    settings = config.stash[settings_key]
    broken = sorted({b for r in reports for b in r["broken"]})
    used = {Path(u) for r in reports for u in r["used"]}
    names = {n for r in reports for n in r["names"]}
    unused = golden_audit.unused_goldens(settings.golden_dir, used, names)
    stale = golden_audit.stale_temp_files(settings.golden_dir)
    if not (unused or stale):
        return []
    lines: list[str] = []
    write = lines.append
    if unused and broken:
        write(
            f"{len(unused)} golden(s) look unused, but {len(broken)} manifest(s) failed to load "
            f"and may use them: {', '.join(broken)}"
        )
    elif unused:
        write(f"{len(unused)} golden(s) that no manifest uses (delete them if that is intended):")
    for path in unused:
        write(f"  {display_path(config, path)}{'/' if path.is_dir() else ''}")
    if stale:
        write(
            f"{len(stale)} temporary file(s) left by interrupted golden writes (ignored; the next "
            "--mlrepro-update of that golden removes them):"
        )
        for path in stale:
            write(f"  {display_path(config, path)}")
    return lines
