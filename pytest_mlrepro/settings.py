"""Where things live: project root, goldens, cache, data mirrors. Built by the plugin from ini keys
and options, or directly by library users."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path


def default_cache_dir() -> Path:
    explicit = os.environ.get("MLREPRO_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mlrepro"


def mirrors_from_env() -> tuple[Path, ...]:
    value = os.environ.get("MLREPRO_DATA", "")
    return tuple(Path(p).expanduser() for p in value.split(os.pathsep) if p)


@dataclass(frozen=True)
class Settings:
    root: Path
    golden_dir: Path
    cache_dir: Path = field(default_factory=default_cache_dir)
    data_mirrors: tuple[Path, ...] = ()
    allowed_roots: tuple[Path, ...] = ()
    allow_download: bool = True
    # The golden directory as given (symlinks not resolved) when it was given inside the project:
    # a link there (or in a folder above it) must not take goldens outside (golden_dir_confined).
    # None when it was given outside on purpose, or the settings were made without for_project.
    golden_dir_given: Path | None = None

    @classmethod
    def for_project(
        cls,
        root: Path,
        *,
        golden_dir: str = "golden",
        cache_dir: Path | None = None,
        data_mirrors: Sequence[Path] = (),
        allowed_roots: Sequence[Path] = (),
        allow_download: bool = True,
    ) -> Settings:
        given = Path(os.path.normpath(root.absolute() / golden_dir))
        inside = given.is_relative_to(Path(os.path.normpath(root.absolute())))
        root = root.resolve()
        return cls(
            root=root,
            golden_dir=(root / golden_dir).resolve(),
            golden_dir_given=given if inside else None,
            cache_dir=(cache_dir or default_cache_dir()).resolve(),
            data_mirrors=tuple(dict.fromkeys(p.resolve() for p in data_mirrors)),
            allowed_roots=tuple(p.resolve() for p in allowed_roots),
            allow_download=allow_download,
        )


def golden_dir_escape(settings: Settings) -> str | None:
    """Why goldens must not be written there (None: they may): a link takes a folder given
    inside the project outside every allowed root."""
    given = settings.golden_dir_given
    resolved = settings.golden_dir
    if given is None or any(
        resolved.is_relative_to(root) for root in (settings.root, *settings.allowed_roots)
    ):
        return None
    return (
        f"the golden directory {given} leads (through a symbolic link) to {resolved}, outside "
        f"the project ({settings.root})"
    )


def shown_path(path: Path, *bases: Path) -> str:
    """``path`` as a message shows it: relative to the first of ``bases`` it lies in, else whole."""
    for base in bases:
        if path.is_relative_to(base):
            return path.relative_to(base).as_posix()
    return str(path)


class OutsideProject(ValueError):
    """A manifest path resolves (symlinks followed) outside every allowed root."""


def resolve_within(base: Path, relative: str, roots: Sequence[Path]) -> Path | None:
    """None outside every one of ``roots``: the one confinement rule for manifest paths."""
    candidate = (base / relative).resolve()
    return candidate if any(candidate.is_relative_to(root) for root in roots) else None


def resolve_inside(base: Path, relative: str, settings: Settings) -> Path:
    """Refused outside the project root and every root in ``mlrepro_allowed_roots``."""
    inside = resolve_within(base, relative, (settings.root, *settings.allowed_roots))
    if inside is None:
        raise OutsideProject(
            f"{relative!r} resolves to {(base / relative).resolve()}, outside the project "
            f"({settings.root}); allow it with the ini key mlrepro_allowed_roots"
        )
    return inside
