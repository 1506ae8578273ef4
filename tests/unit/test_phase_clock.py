"""The phase clock (``pytest_mlrepro._phases``): the time between two marks belongs to the phase
marked, nested phases charge the inner one, and the phases partition the clock's span. Driven by
fake clocks: no timing here."""

from __future__ import annotations

import itertools
import threading

import pytest

from pytest_mlrepro import _phases
from pytest_mlrepro._phases import phase, total


@pytest.fixture
def ticks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wall time advances 1 s per reading, CPU time 2 s (two busy threads)."""
    wall, cpu = itertools.count(0.0, 1.0), itertools.count(0.0, 2.0)
    monkeypatch.setattr(_phases.time, "perf_counter", lambda: next(wall))
    monkeypatch.setattr(_phases.time, "process_time", lambda: next(cpu))


def test_phases_partition_the_span_nested_phases_charge_the_inner_one(ticks: None) -> None:
    clock = _phases.start()  # reads at 0
    with phase("model load"), phase("model verify"):  # 1, 2
        pass  # 3
    # 4: back to other
    with phase("model"):  # 5
        pass  # 6
    account = _phases.stop(clock)  # 7
    assert account == {
        "model verify": {"wall": 1.0, "cpu": 2.0},  # 2..3
        "model load": {"wall": 2.0, "cpu": 4.0},  # 1..2 and 3..4
        "model": {"wall": 1.0, "cpu": 2.0},  # 5..6
        "other": {"wall": 3.0, "cpu": 6.0},  # 0..1, 4..5 and 6..7
    }
    assert list(account) == [p for p in _phases.PHASES if p in account]  # in phase order
    assert total(account) == 7.0 and total(account, "cpu") == 14.0


def test_without_a_clock_or_in_another_thread_marks_count_nothing(ticks: None) -> None:
    with phase("model"):  # no clock running: nothing happens
        pass
    clock = _phases.start()

    def elsewhere() -> None:
        with phase("preprocessing"):
            pass

    worker = threading.Thread(target=elsewhere)
    worker.start()
    worker.join()
    account = _phases.stop(clock)
    assert set(account) == {"other"}
    with phase("model"):  # stopped: nothing either
        pass
    assert clock.wall.keys() == {"other"}


def test_an_unknown_phase_is_refused() -> None:
    clock = _phases.start()
    try:
        with pytest.raises(ValueError, match="unknown phase 'warp'"), phase("warp"):
            pass
    finally:
        _phases.stop(clock)
