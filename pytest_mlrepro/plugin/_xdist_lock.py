"""Under pytest-xdist, a latency item is not timed while other workers' items load the cores."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from .._files import fcntl_module
from ._options import LOCK_INPUT

XDIST_GROUP = "mlrepro-latency"

_lock_key = pytest.StashKey["SessionLock | None"]()


class SessionLock:
    """A writer-preferring readers-writer lock between a session's processes: ``turnstile`` (held
    by a waiting or measuring writer: no new reader enters), ``main`` (readers share it)."""

    def __init__(self, path: Path) -> None:
        self.main = path
        self.turnstile = path.with_name(path.name + ".turnstile")

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with _held(self.turnstile, alone=True):
            pass  # waits while a latency item waits to measure or measures
        with _held(self.main, alone=False):
            yield

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with _held(self.turnstile, alone=True), _held(self.main, alone=True):
            yield


@contextlib.contextmanager
def _held(path: Path, alone: bool) -> Iterator[None]:
    fcntl = fcntl_module()
    with open(path, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def use_lock(config: pytest.Config, latency_items: bool) -> None:
    """Worker side: lock only in sessions with latency items (others pay nothing)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or not latency_items:
        return
    path = workerinput.get(LOCK_INPUT)
    if path:
        config.stash[_lock_key] = SessionLock(Path(path))


def session_lock(config: pytest.Config) -> SessionLock | None:
    return config.stash.get(_lock_key, None)


def exclusive(config: pytest.Config) -> contextlib.AbstractContextManager[None]:
    """Nothing else runs in the session meanwhile (a latency item measures)."""
    lock = session_lock(config)
    return contextlib.nullcontext() if lock is None else lock.exclusive()
