"""pytest glue for the failure modes: time limits, determinism items, and the golden store's
audit (paths claimed twice, goldens nothing uses). Registered by :mod:`pytest_mlrepro.plugin`.

The logic lives in core modules (:mod:`~pytest_mlrepro.plugin._limits`,
:mod:`~pytest_mlrepro.evaluation._determinism`, :mod:`~pytest_mlrepro.goldens._audit`); this
module only wires them to pytest's hooks.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Generator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from .. import goldens as golden_audit
from .. import goldens as golden_store
from ..errors import ManifestError
from ..manifest import Determinism, Manifest, is_manifest
from ._items import (
    ITEM_FACTORIES,
    AccuracyItem,
    ManifestErrorItem,
    ManifestFile,
    MlreproFailure,
    display_path,
    option_or_ini,
    settings_key,
)
from ._limits import ItemTimeout, time_limit

# The terminal's stderr, kept before pytest captures file descriptor 2: a process ended by the
# hard time limit says why there, not into a capture buffer that dies with it.
try:
    _TERMINAL_STDERR = os.dup(2)
except OSError:  # no stderr at all: the message goes wherever fd 2 goes then
    _TERMINAL_STDERR = 2

_conflict_key = pytest.StashKey[str]()
_audit_key = pytest.StashKey["_Audit"]()
WORKER_OUTPUT = "mlrepro_golden_audit"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mlrepro")
    group.addoption(
        "--mlrepro-determinism",
        action="store_true",
        dest="mlrepro_determinism",
        help="add a determinism item for every manifest (runs its evaluation twice), not only "
        "for manifests with a determinism: block",
    )
    group.addoption(
        "--mlrepro-timeout",
        dest="mlrepro_timeout",
        metavar="SECONDS",
        default=None,
        help="seconds an accuracy or determinism item may run (overrides the ini key "
        "mlrepro_timeout; a manifest's runtime.timeout_s still comes first)",
    )
    parser.addini(
        "mlrepro_timeout",
        default="0",
        help="seconds an accuracy or determinism item may run (per evaluation) when its "
        "manifest sets no runtime.timeout_s (default 0: no limit)",
    )


def pytest_configure(config: pytest.Config) -> None:
    value = str(option_or_ini(config, "mlrepro_timeout")).strip() or "0"
    try:
        seconds = float(value)
    except ValueError:
        raise pytest.UsageError(f"mlrepro_timeout: expected seconds, got {value!r}") from None
    if seconds < 0:
        raise pytest.UsageError(f"mlrepro_timeout: must not be negative, got {value!r}")
    config.stash[_audit_key] = _Audit(default_timeout=seconds)


class _Audit:
    """What this process collected: each manifest's golden, broken manifests, deselection."""

    def __init__(self, default_timeout: float) -> None:
        self.default_timeout = default_timeout
        self.claims: dict[Path, tuple[str, Path | None, str]] = {}  # file → (shown, golden, name)
        self.broken: set[Path] = set()
        self.deselected = 0
        self.from_workers: list[dict[str, Any]] = []


# --- determinism items --------------------------------------------------------------------------


def determinism_items(
    parent: ManifestFile, manifest: Manifest, devices: list[str]
) -> list[pytest.Item]:
    """One determinism item per device, for manifests with a ``determinism:`` block, or for all
    with ``--mlrepro-determinism``."""
    if manifest.determinism is None and not parent.config.getoption("mlrepro_determinism"):
        return []
    return [
        DeterminismItem.from_parent(
            parent, name=f"determinism[{device}]", manifest=manifest, device=device, records=False
        )
        for device in devices
    ]


class DeterminismItem(AccuracyItem):
    """Runs the evaluation ``determinism.runs`` times (the model loaded afresh each time) and
    requires every score to repeat exactly, or within ``determinism.tolerance``."""

    kind: ClassVar[str] = "determinism"

    @property
    def spec(self) -> Determinism:
        return self.manifest.determinism or Determinism()

    @property
    def timeout_factor(self) -> int:
        return self.spec.runs

    def runtest(self) -> None:
        from ..evaluation import compare_runs, controls_in_force, explain

        m, spec = self.manifest, self.spec
        shown = display_path(self.config, self.path)
        for key, value in (
            ("kind", "determinism"),
            ("manifest", m.name),
            ("device", self.device),
            ("framework", m.framework.name),
        ):
            self._prop(key, value)
        runs, _ = self._evaluate(spec.runs)
        first = runs[0]
        comparison = compare_runs(first.results.ids, [r.scores for r in runs], spec.tolerance)
        controls = controls_in_force(m, first.runner_info)
        for key, value in (
            ("samples", comparison.samples),
            ("top1", round(first.results.top1, 4)),
            ("top5", round(first.results.top5, 4)),
            ("runs", spec.runs),
            ("agreement", round(comparison.top1_agreement, 6)),
            ("max_score_diff", float(f"{comparison.max_abs_diff:.3g}")),
            ("controls", controls),
            ("timing.seconds", [round(r.seconds, 3) for r in runs]),
        ):
            self._prop(key, value)
        if comparison.ok:
            self._prop("verdict", "identical runs" if comparison.identical else "within tolerance")
            return
        self._prop("verdict", "nondeterministic")
        raise MlreproFailure(f"{shown} [{self.device}]: " + explain(comparison, controls))


ITEM_FACTORIES.append(determinism_items)


# --- time limits and refused items ---------------------------------------------------------------


def item_timeout(item: pytest.Item) -> float | None:
    """Seconds ``item`` may run: its manifest's ``runtime.timeout_s``, else the ini key
    ``mlrepro_timeout``, times the evaluations it makes; None for items of other plugins."""
    manifest = getattr(item, "manifest", None)
    if not isinstance(item, AccuracyItem) or not isinstance(manifest, Manifest):
        return None
    seconds = manifest.runtime.timeout_s or item.config.stash[_audit_key].default_timeout
    return seconds * getattr(item, "timeout_factor", 1) if seconds else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    conflict = item.stash.get(_conflict_key, None)
    if conflict is not None and isinstance(item, AccuracyItem):
        for key, value in (
            ("manifest", item.manifest.name),
            ("device", item.device),
            ("framework", item.manifest.framework.name),
            ("verdict", "golden shared"),
        ):
            item._prop(key, value)
        raise MlreproFailure(conflict)
    seconds = item_timeout(item)
    if not seconds:
        return (yield)
    manifest: Manifest = item.manifest  # type: ignore[attr-defined]
    if manifest.runtime.timeout_s:
        source = "runtime.timeout_s"
    elif item.config.getoption("mlrepro_timeout") is not None:
        source = "--mlrepro-timeout"
    else:
        source = "ini mlrepro_timeout"
    try:
        where = f"{display_path(item.config, item.path)}::{item.name}"
        with time_limit(seconds, where, report_fd=_TERMINAL_STDERR):
            return (yield)
    except ItemTimeout as exc:
        raise MlreproFailure(f"{exc} (the limit comes from {source})") from None


# --- the golden store's audit --------------------------------------------------------------------


def _record_manifest(
    parent: ManifestFile, manifest: Manifest, devices: list[str]
) -> list[pytest.Item]:
    """An item factory that makes no item: it notes the manifest's golden for the audit."""
    audit = parent.config.stash[_audit_key]
    shown = display_path(parent.config, parent.path)
    try:
        golden: Path | None = golden_store.golden_path(manifest, parent.config.stash[settings_key])
    except ManifestError:
        golden = None  # refused when the item runs
    audit.claims[parent.path] = (shown, golden, manifest.name)
    return []


ITEM_FACTORIES.insert(0, _record_manifest)


def pytest_itemcollected(item: pytest.Item) -> None:
    if isinstance(item, ManifestErrorItem):
        item.config.stash[_audit_key].broken.add(item.path)


def pytest_deselected(items: list[pytest.Item]) -> None:
    if items:
        items[0].config.stash[_audit_key].deselected += len(items)


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Refuse the accuracy items of manifests that share a golden file, before any runs."""
    audit = config.stash[_audit_key]
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
    """Every manifest (recognize.py's rule) the ini key mlrepro_manifests names, outside
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


def _local_report(session: pytest.Session) -> dict[str, Any]:
    """This process's share of the audit, as plain data (what an xdist worker sends back)."""
    config = session.config
    audit = config.stash[_audit_key]
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
        node.config.stash[_audit_key].from_workers.append(report)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if hasattr(config, "workeroutput"):
        config.workeroutput[WORKER_OUTPUT] = _local_report(session)
    elif not hasattr(config, "workerinput") and not config.pluginmanager.has_plugin("dsession"):
        config.stash[_audit_key].from_workers.append(_local_report(session))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """List goldens that no manifest uses, when manifests were collected, all of them (not with
    -k, -m, node ids or a subset of the manifests); under xdist on the controller only."""
    if hasattr(config, "workerinput") or config.option.collectonly:
        return
    reports = config.stash[_audit_key].from_workers
    collected = any(r["names"] or r["broken"] for r in reports)  # no manifest: not in use here
    if not collected or not all(r["complete"] for r in reports):
        return
    settings = config.stash[settings_key]
    broken = sorted({b for r in reports for b in r["broken"]})
    used = {Path(u) for r in reports for u in r["used"]}
    names = {n for r in reports for n in r["names"]}
    unused = golden_audit.unused_goldens(settings.golden_dir, used, names)
    stale = golden_audit.stale_temp_files(settings.golden_dir)
    if not (unused or stale):
        return
    terminalreporter.section("mlrepro goldens")
    write = terminalreporter.write_line
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
