"""The frameworks' objects set aside from the garbage collector (``gc.freeze``): their half million
objects cost every full collection 0.2 s (docs/measurements.md). A host's own freeze is left be."""

from __future__ import annotations

import atexit
import functools
import gc

import pytest

_frozen_key = pytest.StashKey[bool]()


def register(config: pytest.Config) -> None:
    """Undo :func:`set_aside` as the run's last cleanup; call before ``pytest_configure``."""
    config.stash[_frozen_key] = False
    config.add_cleanup(lambda: _thaw(config))


def set_aside(config: pytest.Config) -> None:
    """Freeze what is alive now, unless someone froze already or the undoing is not registered."""
    if config.stash.get(_frozen_key, True) or gc.get_freeze_count():
        return
    gc.collect(1)
    gc.freeze()
    config.stash[_frozen_key] = True
    _set_aside_at_exit()


@functools.cache
def _set_aside_at_exit() -> None:
    """At exit (before the modules are torn down), collect as the run would have, then set aside
    what is alive: the interpreter's last collections (0.2-0.3 s each) skip it."""

    def at_exit() -> None:
        if not gc.get_freeze_count():  # a host's own freeze, or another run's: left as it is
            gc.collect()
            gc.freeze()

    atexit.register(at_exit)


def _thaw(config: pytest.Config) -> None:
    if config.stash.get(_frozen_key, False):
        gc.unfreeze()
        config.stash[_frozen_key] = False
