"""What changed in a git work tree since a ref, as absolute resolved paths to compare with a
manifest's references."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ..errors import MlreproError

GIT_TIMEOUT_S = 60  # a hang detector: a diff of a large history takes seconds, not minutes


class ChangedFilesError(MlreproError):
    """git cannot say what changed: no git, not a work tree, or a ref it does not know."""


def _git(folder: Path, *args: str) -> str:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        raise ChangedFilesError("git is not installed (it says what changed)") from None
    except subprocess.TimeoutExpired:
        raise ChangedFilesError(f"git {args[0]} took over {GIT_TIMEOUT_S} s") from None
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["failed"])[0]
        raise ChangedFilesError(f"git {' '.join(args[:2])}: {said}")
    return done.stdout


def changed_files(folder: Path, ref: str) -> frozenset[Path]:
    """Committed since ``ref``, edited (staged or not), deleted, renamed (both names) or
    untracked (not ignored)."""
    if ref.startswith("-"):
        raise ChangedFilesError(f"{ref!r} is no git ref")
    top = Path(_git(folder, "rev-parse", "--show-toplevel").strip())
    _git(top, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    # --no-renames: a renamed file is its old and its new name, each a change.
    names = _git(top, "diff", "--name-only", "--no-renames", "-z", ref, "--").split("\0")
    untracked = _git(top, "ls-files", "--others", "--exclude-standard", "--full-name", "-z")
    names += untracked.split("\0")
    return frozenset((top / name).resolve() for name in names if name)
