"""Time limits: an accuracy or determinism item runs under its manifest's ``runtime.timeout_s``,
else ``--mlrepro-timeout`` / the ini key ``mlrepro_timeout`` (the limit itself, soft then hard:
:mod:`._limits`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from ._base import MlreproFailure, display_path, state_of, terminal_stderr
from ._item import EvaluatingItem
from ._limits import ItemTimeout, time_limit


def item_timeout(item: pytest.Item) -> float | None:
    """Seconds ``item`` may run: its manifest's ``runtime.timeout_s``, else the ini key
    ``mlrepro_timeout``, times the evaluations it makes; None for items without a limit."""
    if not isinstance(item, EvaluatingItem):
        return None
    seconds = item.manifest.runtime.timeout_s or state_of(item.config).default_timeout
    return seconds * item.timeout_factor if seconds else None


def _source(item: EvaluatingItem) -> str:
    """Where the limit came from, for the failure message."""
    if item.manifest.runtime.timeout_s:
        return "runtime.timeout_s"
    if item.config.getoption("mlrepro_timeout") is not None:
        return "--mlrepro-timeout"
    return "ini mlrepro_timeout"


@contextlib.contextmanager
def limited(item: pytest.Item) -> Iterator[None]:
    """Run the item's call under its time limit (none for other items): past it, the item fails
    saying where the limit came from."""
    seconds = item_timeout(item)
    if not seconds or not isinstance(item, EvaluatingItem):
        yield
        return
    source = _source(item)
    try:
        where = f"{display_path(item.config, item.path)}::{item.name}"
        with time_limit(seconds, where, report_fd=terminal_stderr(item.config)):
            yield
    except ItemTimeout as exc:
        raise MlreproFailure(f"{exc} (the limit comes from {source})") from None
