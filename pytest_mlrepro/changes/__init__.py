"""Selection by what changed: a manifest is selected when a file it depends on is among those git
says changed since a ref."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ._dependencies import Dependency, dependencies
from ._git import ChangedFilesError, changed_files


def touched(deps: Iterable[Dependency], changed: Iterable[Path]) -> list[str]:
    """What of ``deps`` the ``changed`` files touch (their ``what``, once each, in order)."""
    changed = list(changed)
    return list(dict.fromkeys(d.what for d in deps if any(d.touched_by(c) for c in changed)))


__all__ = ["ChangedFilesError", "changed_files", "dependencies", "touched"]
