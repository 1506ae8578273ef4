"""The frameworks' objects set aside from the garbage collector for the run (``gc.freeze``): the
half million objects TensorFlow, torch and ONNX Runtime leave cost every full collection 0.2 s
(docs/measurements.md). Only a run that imported them freezes; a host's own freeze is left be,
and the last cleanup of the run unfreezes."""

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
    """Freeze the objects alive now (the frameworks just imported among them), unless another
    party froze objects already or the run did not register the undoing."""
    if config.stash.get(_frozen_key, True) or gc.get_freeze_count():
        return
    gc.collect(1)
    gc.freeze()
    config.stash[_frozen_key] = True
    _set_aside_at_exit()


@functools.cache
def _set_aside_at_exit() -> None:
    """Once per process that froze: at the interpreter's exit (atexit runs before it tears the
    modules down), the garbage collected as it would have been, finalizers run, and then what is
    alive set aside again, so that the interpreter's own last collections (two or three as it
    clears the modules, 0.2-0.3 s each with the frameworks loaded) skip it."""

    def at_exit() -> None:
        if not gc.get_freeze_count():  # a host's own freeze, or another run's: left as it is
            gc.collect()
            gc.freeze()

    atexit.register(at_exit)


def _thaw(config: pytest.Config) -> None:
    if config.stash.get(_frozen_key, False):
        gc.unfreeze()
        config.stash[_frozen_key] = False
