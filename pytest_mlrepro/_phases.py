"""Where an item's time goes: phases with wall and CPU time, marked ambiently with
``with phase("model"):`` deep in layers; what no layer marks is ``other``."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

PHASES = (
    "framework import",
    "model verify",
    "model load",
    "data verify",
    "shared preprocessing",
    "preprocessing",
    "model",
    "comparison",
    "diagnosis",
    "writing",
    "other",
)
"""Every phase an account can hold, in the order an item goes through them (``shared
preprocessing``: paid once, by the first item of those sharing it)."""

OTHER = "other"


@dataclass
class PhaseClock:
    """The phases of one call (see the module docstring); started when made."""

    wall: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    current: str = OTHER
    thread: int = field(default_factory=threading.get_ident)
    _wall0: float = field(init=False)
    _cpu0: float = field(init=False)

    def __post_init__(self) -> None:
        self._wall0, self._cpu0 = time.perf_counter(), time.process_time()

    def switch(self, name: str) -> str:
        """Returns the phase that was current."""
        if name not in PHASES:
            raise ValueError(f"unknown phase {name!r} (one of {', '.join(PHASES)})")
        wall, cpu = time.perf_counter(), time.process_time()
        before = self.current
        self.wall[before] = self.wall.get(before, 0.0) + (wall - self._wall0)
        self.cpu[before] = self.cpu.get(before, 0.0) + (cpu - self._cpu0)
        self._wall0, self._cpu0, self.current = wall, cpu, name
        return before

    def stop(self) -> dict[str, dict[str, float]]:
        """``{phase: {"wall": s, "cpu": s}}``, phases that took no time left out."""
        self.switch(self.current)
        return {
            name: {"wall": round(self.wall[name], 4), "cpu": round(self.cpu.get(name, 0.0), 4)}
            for name in PHASES
            if self.wall.get(name, 0.0) > 0.0
        }


_running: PhaseClock | None = None


def start() -> PhaseClock:
    """Start the clock of a call in this thread (one at a time: a new one replaces the last)."""
    global _running
    _running = PhaseClock()
    return _running


def stop(clock: PhaseClock) -> dict[str, dict[str, float]]:
    global _running
    if _running is clock:
        _running = None
    return clock.stop()


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Nested: the inner phase wins; nothing without a running clock or off the clock's thread."""
    clock = _running
    if clock is None or clock.thread != threading.get_ident():
        yield
        return
    before = clock.switch(name)
    try:
        yield
    finally:
        clock.switch(before)


def total(account: dict[str, dict[str, float]], what: str = "wall") -> float:
    """The sum of an account's phases (``wall`` or ``cpu`` seconds)."""
    return sum(times[what] for times in account.values())
