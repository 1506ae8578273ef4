"""``--mlrepro-changed [REF]``: keep the manifest items that depend on a file changed since REF."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..changes import ChangedFilesError, changed_files, dependencies, touched
from ..manifest import Manifest
from ._base import option_or_ini, settings_key
from ._collect import is_mlrepro_item

_changed_key = pytest.StashKey[tuple[str, frozenset[Path]]]()
_told_key = pytest.StashKey[list[str]]()
_dropped_key = pytest.StashKey[bool]()


def read_changes(config: pytest.Config) -> None:
    """The files changed since the ref, asked of git once at the start: git's refusal (no work
    tree, an unknown ref) is a usage error before anything runs."""
    ref = str(option_or_ini(config, "mlrepro_changed") or "").strip()
    if not ref:
        return
    try:
        files = changed_files(config.rootpath, ref)
    except ChangedFilesError as exc:
        hint = ""
        if (config.invocation_params.dir / ref).exists():
            hint = f" ({ref!r} is a path: give the ref as --mlrepro-changed=REF, before paths)"
        raise pytest.UsageError(f"--mlrepro-changed {ref}: {exc}{hint}") from None
    config.stash[_changed_key] = (ref, files)


def select_changed(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the manifest items touched by a change (or whose reference manifest is)."""
    asked = config.stash.get(_changed_key, None)
    if asked is None:
        return
    ref, changed = asked
    settings = config.stash[settings_key]
    why: dict[Path, list[str]] = {}  # manifest file → what of it changed ([]: nothing)
    names: dict[str, Path] = {}
    for item in items:
        manifest = getattr(item, "manifest", None)
        if is_mlrepro_item(item) and isinstance(manifest, Manifest) and item.path not in why:
            why[item.path] = touched(dependencies(manifest, settings), changed)
            names[manifest.name] = item.path
    for item in items:  # a manifest checked against a changed reference manifest is run too
        manifest = getattr(item, "manifest", None)
        spec = manifest.reference_spec if isinstance(manifest, Manifest) else None
        if spec is not None and not why.get(item.path):
            other = names.get(spec.manifest) or names.get(Path(spec.manifest).stem)
            if other is not None and why.get(other):
                why[item.path] = [f"reference {spec.manifest}"]
    keep = [i for i in items if not is_mlrepro_item(i) or why.get(i.path, True)]
    dropped = [i for i in items if is_mlrepro_item(i) and not why.get(i.path, True)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
        config.stash[_dropped_key] = True
    root = config.rootpath
    lines = [
        f"mlrepro: changed since {ref}: {len([w for w in why.values() if w])} of {len(why)} "
        "manifests"
    ]
    for path, what in why.items():
        if what:
            shown = path.relative_to(root) if path.is_relative_to(root) else path
            lines.append(f"  {shown}: {', '.join(what)}")
    config.stash[_told_key] = lines


WORKER_OUTPUT = "mlrepro_changed_deselected"  # a worker's word that it deselected items


def share_changed(session: pytest.Session) -> None:
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output[WORKER_OUTPUT] = session.config.stash.get(_dropped_key, False)


def gather_changed(node: object) -> None:
    output = getattr(node, "workeroutput", None) or {}
    config = getattr(node, "config", None)
    if output.get(WORKER_OUTPUT) and isinstance(config, pytest.Config):
        config.stash[_dropped_key] = True


def nothing_changed_is_ok(session: pytest.Session) -> None:
    """A run whose every item was deselected as unchanged passed (not pytest's exit 5: a CI job
    of "what this change touches" would fail on a change that touches no model)."""
    deselected = session.config.stash.get(_dropped_key, False)
    if deselected and session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK


def changed_lines(config: pytest.Config) -> list[str]:  # after "collected N items"
    return config.stash.get(_told_key, [])
