"""Collection: a manifest's items, made by every ``pytest_mlrepro_make_items``, with markers; a
manifest that does not load is one error item, which fails with file, line and field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .. import goldens as golden_store
from ..errors import ManifestError
from ..manifest import DEVICES, Manifest, load_manifest
from ..results import Row, row_json
from ..runners import cuda_present, frameworks_of, import_frameworks
from ._base import ROW_ATTR, MlreproFailure, display_path, settings_key, state_of
from ._heap import set_aside
from ._junit import junit_view
from ._options import KINDS, MARKER


def devices_for(manifest: Manifest, config: pytest.Config) -> list[str]:
    choice = str(config.getoption("mlrepro_device") or "auto")
    if choice == "auto":
        present: list[str] = [d for d in manifest.runtime.devices if d == "cpu" or cuda_present()]
        # A cuda-only manifest on a machine without a GPU gets its item, which then skips.
        return present or list(manifest.runtime.devices)
    wanted = [d.strip() for d in choice.split(",") if d.strip()]
    return [d for d in manifest.runtime.devices if d in wanted]


def markers_for(item: pytest.Item, manifest: Manifest | None) -> list[str]:
    """``mlrepro`` on every item; its kind, framework and device where it has them."""
    names = [MARKER]
    kind = getattr(item, "kind", None)
    if kind in KINDS:
        names.append(f"{MARKER}_{kind}")
    if manifest is not None:
        names.append(f"{MARKER}_{manifest.framework.name}")
    device = getattr(item, "device", None)
    if device in DEVICES:
        names.append(f"{MARKER}_{device}")
    return names


def is_mlrepro_item(item: pytest.Item) -> bool:
    """Whether ``item`` is of a manifest (whichever plugin's kind it is)."""
    return isinstance(item.parent, ManifestFile)


class ManifestErrorItem(pytest.Item):
    def __init__(self, *, error: ManifestError, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error = error

    def runtest(self) -> None:
        raise MlreproFailure(str(self.error))

    def report_attributes(self, when: str) -> dict[str, Any]:
        """The call's row (``ManifestItem.report_attributes``)."""
        if when != "call":
            return {}
        invalid = Row(self.nodeid, "failed", manifest=self.error.file, verdict="invalid manifest")
        row = row_json(invalid)
        self.user_properties.extend(junit_view(row))
        return {ROW_ATTR: row}

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        return str(excinfo.value)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, (self.error.line or 1) - 1, f"{self.name} (invalid manifest)"


class ManifestFile(pytest.File):
    def collect(self) -> list[pytest.Item]:
        shown = display_path(self.config, self.path)
        settings = self.config.stash[settings_key]
        manifest: Manifest | None = None
        try:
            loaded = load_manifest(self.path, display=shown)
            # An invalid golden: path (outside the accuracy namespace) is an invalid manifest.
            golden = golden_store.golden_path(loaded, settings)
        except ManifestError as exc:
            items: list[pytest.Item] = [
                ManifestErrorItem.from_parent(self, name="manifest", error=exc)
            ]
        else:
            manifest = loaded
            # The golden store's audit: this manifest's golden is in use, whatever items it gets.
            state_of(self.config).audit.claims[self.path] = (shown, golden, manifest.name)
            made = self.config.hook.pytest_mlrepro_make_items(
                parent=self, manifest=manifest, devices=devices_for(manifest, self.config)
            )
            items = sorted((item for items in made for item in items), key=_kind_order)
        for item in items:  # the one place items get their markers, whichever factory made them
            for name in markers_for(item, manifest):
                item.add_marker(name)
        return items


def preload_frameworks(session: pytest.Session) -> None:
    """The frameworks the selected items need, imported at collection's end: before any item's
    time limit starts, and charged to no item's duration (pytest-split, ``--durations``)."""
    # Items of every kind (other plugins' too) that carry their manifest.
    found = (getattr(item, "manifest", None) for item in session.items)
    names = frameworks_of(m for m in found if isinstance(m, Manifest))
    if names:
        import_frameworks(names)
        set_aside(session.config)


def _kind_order(item: pytest.Item) -> int:
    """Items by kind: accuracy, latency, determinism, then the kinds of other plugins."""
    kind = getattr(item, "kind", None)
    return KINDS.index(kind) if kind in KINDS else len(KINDS)
