"""Per-item time limits: a model that hangs is stopped and fails its item, not the session."""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType

# What signal.signal returns: a function, SIG_DFL/SIG_IGN, or None (not set from Python).
SignalHandler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None
HARD_KILL_GRACE_S = 10.0  # the least time after the soft limit before the watchdog ends it
HARD_KILL_EXIT_CODE = 70
IMPORT_RETRY_S = 0.05  # when the soft limit falls inside an import, tried again this much later


class ItemTimeout(BaseException):
    """The item ran past its time limit."""


def _importing(frame: FrameType | None) -> bool:
    """Whether the interrupted code is inside an import (importlib's frames on the stack)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _hard_kill(seconds: float, what: str, report_fd: int) -> None:
    message = (
        f"\npytest-mlrepro: {what} is still running {seconds:g} s after its time limit "
        "and did not stop when interrupted: ending this process (stacks follow)\n"
    )
    with contextlib.suppress(Exception):
        os.write(report_fd, message.encode())
        faulthandler.dump_traceback(file=report_fd, all_threads=True)
    os._exit(HARD_KILL_EXIT_CODE)


@contextlib.contextmanager
def time_limit(seconds: float | None, what: str, report_fd: int = 2) -> Iterator[None]:
    """A soft limit of ``seconds`` (``ItemTimeout``), and a hard one (the process ends, writing why
    and every stack to ``report_fd``) half the limit later, at least ``HARD_KILL_GRACE_S``."""
    if not seconds or seconds <= 0:
        yield
        return
    grace = max(HARD_KILL_GRACE_S, seconds / 2)
    soft = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    watchdog = threading.Timer(
        seconds + grace if soft else seconds,
        _hard_kill,
        args=(grace if soft else 0.0, what, report_fd),
    )
    watchdog.daemon = True
    watchdog.start()
    try:
        with _soft_limit(seconds, what) if soft else contextlib.nullcontext():
            yield
    finally:
        watchdog.cancel()


class _OuterTimer:
    """A ``SIGALRM`` timer someone else (pytest-timeout) had armed when ours started: it still
    fires on time."""

    def __init__(self, handler: SignalHandler, remaining: float, interval: float) -> None:
        self.handler = handler
        self.deadline = time.monotonic() + remaining if remaining > 0 else None
        self.interval = interval

    def due(self) -> bool:
        return self.deadline is not None and time.monotonic() >= self.deadline

    def fire(self, signum: int, frame: FrameType | None) -> None:
        self.deadline = None
        if callable(self.handler):
            self.handler(signum, frame)
        elif self.handler == signal.SIG_DFL:  # what the signal would have done: end the process
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.raise_signal(signal.SIGALRM)

    def restore(self) -> None:
        signal.signal(signal.SIGALRM, self.handler if self.handler is not None else signal.SIG_DFL)
        if self.deadline is not None:
            left = max(self.deadline - time.monotonic(), 1e-6)  # overdue: fire at once
            signal.setitimer(signal.ITIMER_REAL, left, self.interval)


def _arm(*deadlines: float | None) -> None:
    """The process's one ``ITIMER_REAL`` set to the nearest of ``deadlines`` (monotonic)."""
    pending = [d for d in deadlines if d is not None]
    if pending:
        signal.setitimer(signal.ITIMER_REAL, max(min(pending) - time.monotonic(), 1e-6))


@contextlib.contextmanager
def _soft_limit(seconds: float, what: str) -> Iterator[None]:
    """``ItemTimeout`` after ``seconds``, sharing ``ITIMER_REAL`` with a timer already armed: the
    nearer deadline arms it, and the other timer gets its handler and time left back after."""
    ours = time.monotonic() + seconds

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        if outer.due():
            _arm(ours)
            outer.fire(signum, frame)
            return
        if time.monotonic() < ours:  # woken early (an outer deadline that moved): wait on
            _arm(ours, outer.deadline)
            return
        if _importing(frame):
            # An import cut short leaves a half-initialised module behind for every later item
            # of the process: let the import finish, and stop the item right after it.
            signal.setitimer(signal.ITIMER_REAL, IMPORT_RETRY_S)
            return
        raise ItemTimeout(f"{what} did not finish within its time limit of {seconds:g} s: stopped")

    handler = signal.signal(signal.SIGALRM, on_alarm)
    remaining, interval = signal.setitimer(signal.ITIMER_REAL, 0)
    outer = _OuterTimer(handler, remaining, interval)
    _arm(ours, outer.deadline)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        outer.restore()
