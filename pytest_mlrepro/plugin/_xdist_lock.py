"""Under pytest-xdist, a latency item must not be timed while items in other workers load the same
cores. Every worker of a session that has latency items shares one lock file (its path comes from
the controller: the entry point's ``pytest_configure_node``): each other item holds it shared
while it runs, a latency item holds it exclusively while it measures (writer-preferring: a
waiting latency item stops new items from starting, so it never starves). Under
``--dist loadgroup`` latency items form the group ``mlrepro-latency`` (``_item.item_nodeid``), so
that it sends them all to one worker.
"""

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
        fcntl = fcntl_module()
        with open(self.turnstile, "a+b") as gate:
            fcntl.flock(gate.fileno(), fcntl.LOCK_EX)
            fcntl.flock(gate.fileno(), fcntl.LOCK_UN)
        with open(self.main, "a+b") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_SH)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        fcntl = fcntl_module()
        with open(self.turnstile, "a+b") as gate, open(self.main, "a+b") as fh:
            fcntl.flock(gate.fileno(), fcntl.LOCK_EX)
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
                try:
                    yield
                finally:
                    fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
            finally:
                fcntl.flock(gate.fileno(), fcntl.LOCK_UN)


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


@contextlib.contextmanager
def exclusive(config: pytest.Config) -> Iterator[None]:
    """Nothing else runs in the session meanwhile (a latency item measuring)."""
    lock = session_lock(config)
    if lock is None:
        yield
        return
    with lock.exclusive():
        yield
