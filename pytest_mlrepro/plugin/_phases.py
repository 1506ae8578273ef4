"""What wraps an item's call: its per-phase account (``timing.phases``) and its time limit (soft
then hard: :mod:`._limits`); and the session's one-time costs (frameworks imported)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from .. import _phases
from ..results import PhaseTimes, Timing
from ._base import MlreproFailure, display_path, options, state_of, terminal_stderr
from ._item import EvaluatingItem, ManifestItem
from ._limits import ItemTimeout, time_limit


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


@contextlib.contextmanager
def limited(item: pytest.Item) -> Iterator[None]:
    """An evaluating item's call under its manifest's ``runtime.timeout_s``, else the run's, times
    its evaluations; past it, the item fails saying where the limit came from."""
    if not isinstance(item, EvaluatingItem):
        yield
        return
    own = item.manifest.runtime.timeout_s
    seconds = (own or options(item.config).timeout) * item.timeout_factor
    if not seconds:
        yield
        return
    given = item.config.getoption("mlrepro_timeout") is not None
    source = "runtime.timeout_s" if own else "--mlrepro-timeout" if given else "ini mlrepro_timeout"
    try:
        where = f"{display_path(item.config, item.path)}::{item.name}"
        with time_limit(seconds, where, report_fd=terminal_stderr(item.config)):
            yield
    except ItemTimeout as exc:
        item.set_verdict("timeout")  # the summary table's row says so
        raise MlreproFailure(f"{exc} (the limit comes from {source})") from None
