"""Progress of a long evaluation, shown the way pytest shows its own: on the terminal only."""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    import pytest

MIN_INTERVAL_S = 0.5


class TerminalProgress:
    """A ``Progress`` callable (evaluation/_evaluate.py) for one item; use as a context manager."""

    def __init__(self, config: pytest.Config, total: int) -> None:
        self.config = config
        self.total = total
        self.shown = 0  # characters of progress on the terminal line now
        self.last = 0.0
        self.stream = self._terminal(config)

    @staticmethod
    def _terminal(config: pytest.Config) -> TextIO | None:  # None: progress not shown
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or not reporter.isatty or hasattr(config, "workerinput"):
            return None
        if config.pluginmanager.has_plugin("dsession"):  # the xdist controller
            return None
        # The stream pytest's terminal writer writes to (it has no public name for it).
        return config.get_terminal_writer()._file

    def __enter__(self) -> TerminalProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        self._show("")

    def __call__(self, done: int) -> None:
        now = time.monotonic()
        if self.stream is None or (now - self.last < MIN_INTERVAL_S and done < self.total):
            return
        self.last = now
        self._show(f" {done}/{self.total} samples")

    def _show(self, text: str) -> None:
        """Replace what is shown with ``text``, leaving the cursor where pytest left it."""
        if self.stream is None or not (text or self.shown):
            return
        writer = self.config.get_terminal_writer()
        if text and writer.width_of_current_line + len(text) >= writer.fullwidth:
            text = ""  # no room: show nothing rather than wrap
        width = max(len(text), self.shown)
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            # Written past pytest's writer (it counts columns for "[ 50%]"): text, then back.
            self.stream.write(text.ljust(width) + "\b" * width)
            self.stream.flush()
        self.shown = len(text)
