"""The frameworks' objects set aside from the garbage collector for the run (``gc.freeze``).

Why: importing TensorFlow, torch and ONNX Runtime leaves about half a million Python objects
that live as long as the process (module globals, op registries, type tables), and every full
collection walks all of them: 0.17-0.22 s each on the development machine, a dozen in a main
job (three among the items, one at the session's end, five in pytest's own check for unraisable
exceptions and three as the interpreter exits; docs/measurements.md, "The main job at its bound:
third pass"). Frozen once they are imported, they are skipped by every collection; objects made
later are collected as before.

A guest's manners:

* only a run that imports a framework for its items freezes anything (:func:`set_aside`, called
  after the preload): a run with no manifest never gets there;
* the young generations are collected first, so that the import's own garbage is not kept with
  the frameworks;
* a process whose objects someone else froze (the host's ``gc.freeze()``) is left as it is: the
  one ``gc.unfreeze()`` could not tell theirs from ours;
* what this run froze is unfrozen by the last of the run's cleanups (:func:`register`, from the
  entry point's ``pytest_cmdline_main``, before any plugin's ``pytest_configure`` registers its
  own: pytest runs cleanups last-registered first), after pytest's own collections, so that a
  process that goes on after ``pytest.main()`` (an IDE, a pytester run) has its collector back
  as it was. An object alive at the freeze that died in a reference cycle during the run is
  collected after that instead of during it;
* as the interpreter exits (:func:`_set_aside_at_exit`), the garbage is collected once, its
  finalizers run, and what is alive is set aside again: the interpreter's own last collections
  then skip the frameworks' objects.
"""

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
    modules down), the garbage collected as it would have been, finalizers run, and then what
    is alive set aside again, so that the interpreter's own last collections (two or three as it
    clears the modules, 0.2-0.3 s each with the frameworks loaded) skip it. Measured: the exit
    of the main job 1.28 s with the frameworks unfrozen, 0.33 s frozen."""

    def at_exit() -> None:
        if not gc.get_freeze_count():  # a host's own freeze, or another run's: left as it is
            gc.collect()
            gc.freeze()

    atexit.register(at_exit)


def _thaw(config: pytest.Config) -> None:
    if config.stash.get(_frozen_key, False):
        gc.unfreeze()
        config.stash[_frozen_key] = False
