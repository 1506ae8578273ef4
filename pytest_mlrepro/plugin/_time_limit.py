"""Time limits: an accuracy or determinism item runs under its manifest's ``runtime.timeout_s``,
else ``--mlrepro-timeout`` / the ini key ``mlrepro_timeout`` (the limit itself, soft then hard:
:mod:`._limits`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from ._base import MlreproFailure, display_path, options, terminal_stderr
from ._item import EvaluatingItem
from ._limits import ItemTimeout, time_limit


@contextlib.contextmanager
def limited(item: pytest.Item) -> Iterator[None]:
    """Run an evaluating item's call under its time limit (none for other items): its
    manifest's ``runtime.timeout_s``, else the run's, times the evaluations it makes. Past it,
    the item fails saying where the limit came from."""
    if not isinstance(item, EvaluatingItem):
        yield
        return
    own = item.manifest.runtime.timeout_s
    seconds = (own or options(item.config).timeout) * item.timeout_factor
    if not seconds:
        yield
        return
    if own:
        source = "runtime.timeout_s"
    elif item.config.getoption("mlrepro_timeout") is not None:
        source = "--mlrepro-timeout"
    else:
        source = "ini mlrepro_timeout"
    try:
        where = f"{display_path(item.config, item.path)}::{item.name}"
        with time_limit(seconds, where, report_fd=terminal_stderr(item.config)):
            yield
    except ItemTimeout as exc:
        item.set_verdict("timeout")  # the summary table's row says so
        raise MlreproFailure(f"{exc} (the limit comes from {source})") from None
