"""The per-item time limit: the soft limit interrupts Python code and disarms, never in the middle
of an import; off the main thread only the watchdog can stop an item."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from pytest_mlrepro.plugin._limits import ItemTimeout, time_limit


def test_the_soft_limit_interrupts_python_code_and_then_disarms() -> None:
    start = time.monotonic()
    with (
        pytest.raises(ItemTimeout, match=r"the item did not finish within its time limit of 0.2 s"),
        time_limit(0.2, "the item"),
    ):
        while True:
            time.sleep(0.01)
    assert time.monotonic() - start < 60  # it fired: the loop never ends otherwise
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.default_int_handler, None)
    with time_limit(5, "quick"):  # finished in time: nothing raised, nothing left armed
        pass
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_the_soft_limit_waits_for_an_import_to_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An import interrupted half-way would leave a broken module for every later item."""
    (tmp_path / "slow_module_for_limits.py").write_text(
        "import time\nfor _ in range(40):\n    time.sleep(0.01)\nDONE = True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ItemTimeout), time_limit(0.1, "importing"):
        import slow_module_for_limits  # type: ignore[import-not-found]  # noqa: F401  (0.4 s: the limit falls inside)

        while True:
            time.sleep(0.01)
    import sys

    assert sys.modules["slow_module_for_limits"].DONE is True


def test_off_the_main_thread_only_the_watchdog_can_stop_it() -> None:
    """Signals reach the main thread only: elsewhere the limit is the hard one (which ends the
    process, so it is only armed and cancelled here)."""
    seen: list[BaseException] = []

    def body() -> None:
        try:
            with time_limit(60, "threaded"):
                time.sleep(0.05)
        except BaseException as exc:  # pragma: no cover - would be a bug
            seen.append(exc)

    worker = threading.Thread(target=body)
    worker.start()
    worker.join(10)
    assert not worker.is_alive() and seen == []
