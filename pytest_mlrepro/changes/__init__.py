"""Selection by what changed: the files a manifest depends on (:func:`dependencies`) and the files
git says changed since a ref (:func:`changed_files`); a manifest whose dependency changed is
selected (:func:`touched`)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ._dependencies import Dependency, dependencies
from ._git import ChangedFilesError, changed_files


def touched(deps: Iterable[Dependency], changed: Iterable[Path]) -> list[str]:
    """What of ``deps`` the ``changed`` files touch (their ``what``, once each, in order)."""
    changed = list(changed)
    return list(dict.fromkeys(d.what for d in deps if any(d.touched_by(c) for c in changed)))


__all__ = ["ChangedFilesError", "Dependency", "changed_files", "dependencies", "touched"]
