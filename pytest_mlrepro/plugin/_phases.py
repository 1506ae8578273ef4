"""The per-phase account of each item's call (``timing.phases``: :mod:`pytest_mlrepro._phases`)
and of the session's one-time costs (the frameworks imported at collection's end), which the
results file, the ``-v`` summary and the HTML report show."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from .. import _phases
from ..results import PhaseTimes, Timing
from ._base import state_of
from ._item import ManifestItem


@contextlib.contextmanager
def accounted(item: pytest.Item) -> Iterator[None]:
    """Run a manifest item's call under a phase clock; its account becomes the item's
    ``timing.phases`` property, however the call ends (a failure's time is spent too)."""
    if not isinstance(item, ManifestItem):
        yield
        return
    clock = _phases.start()
    try:
        yield
    finally:
        phases = {k: PhaseTimes(**v) for k, v in _phases.stop(clock).items()}
        row = item.row or item.row_head()
        item.row = replace(row, timing=replace(row.timing or Timing(), phases=phases))


@contextlib.contextmanager
def one_time(config: pytest.Config, name: str) -> Iterator[None]:
    """Account a cost the session pays once for every item (``name``, a phase) in the run's
    state: the results file's ``one_time`` (this process's; an xdist worker's stay its own)."""
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        yield
    finally:
        spent = state_of(config).one_time.setdefault(name, {"wall": 0.0, "cpu": 0.0})
        spent["wall"] = round(spent["wall"] + time.perf_counter() - wall, 4)
        spent["cpu"] = round(spent["cpu"] + time.process_time() - cpu, 4)
