"""Under pytest-xdist, a latency item must not be timed while items in other workers load the same
cores."""

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
    """A writer-preferring readers-writer lock between the processes of one session, on two
    files: ``turnstile`` (held by a waiting or measuring writer, so that no new reader enters)
    and ``main`` (readers share it, a writer holds it alone)."""

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
    """The lock of file ``path``, held alone (exclusive) or shared, while the body runs."""
    fcntl = fcntl_module()
    with open(path, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def use_lock(config: pytest.Config, latency_items: bool) -> None:
    """Worker side: lock only in sessions that have latency items (others pay nothing)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or not latency_items:
        return
    path = workerinput.get(LOCK_INPUT)
    if path:
        config.stash[_lock_key] = SessionLock(Path(path))


def session_lock(config: pytest.Config) -> SessionLock | None:
    """The session's lock, on an xdist worker of a session with latency items; else None."""
    return config.stash.get(_lock_key, None)


def exclusive(config: pytest.Config) -> contextlib.AbstractContextManager[None]:
    """Nothing else runs in the session meanwhile (a latency item measuring)."""
    lock = session_lock(config)
    return contextlib.nullcontext() if lock is None else lock.exclusive()
