"""pytest glue for time limits: an accuracy or determinism item runs under its manifest's
``runtime.timeout_s``, else ``--mlrepro-timeout`` / the ini key ``mlrepro_timeout`` (the limit
itself, soft then hard: :mod:`._limits`)."""

from __future__ import annotations

from collections.abc import Generator

import pytest

from ._items import AccuracyItem, MlreproFailure, display_path
from ._limits import ItemTimeout, time_limit
from ._session import option_or_ini, session_of


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mlrepro")
    group.addoption(
        "--mlrepro-timeout",
        dest="mlrepro_timeout",
        metavar="SECONDS",
        default=None,
        help="seconds an accuracy or determinism item may run (overrides the ini key "
        "mlrepro_timeout; a manifest's runtime.timeout_s still comes first)",
    )
    parser.addini(
        "mlrepro_timeout",
        default="0",
        help="seconds an accuracy or determinism item may run (per evaluation) when its "
        "manifest sets no runtime.timeout_s (default 0: no limit)",
    )


def pytest_configure(config: pytest.Config) -> None:
    value = str(option_or_ini(config, "mlrepro_timeout")).strip() or "0"
    try:
        seconds = float(value)
    except ValueError:
        raise pytest.UsageError(f"mlrepro_timeout: expected seconds, got {value!r}") from None
    if seconds < 0:
        raise pytest.UsageError(f"mlrepro_timeout: must not be negative, got {value!r}")
    session_of(config).default_timeout = seconds


def item_timeout(item: pytest.Item) -> float | None:
    """Seconds ``item`` may run: its manifest's ``runtime.timeout_s``, else the ini key
    ``mlrepro_timeout``, times the evaluations it makes; None for items of other plugins."""
    if not isinstance(item, AccuracyItem):
        return None
    seconds = item.manifest.runtime.timeout_s or session_of(item.config).default_timeout
    return seconds * item.timeout_factor if seconds else None


def _source(item: AccuracyItem) -> str:
    """Where the limit came from, for the failure message."""
    if item.manifest.runtime.timeout_s:
        return "runtime.timeout_s"
    if item.config.getoption("mlrepro_timeout") is not None:
        return "--mlrepro-timeout"
    return "ini mlrepro_timeout"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    seconds = item_timeout(item)
    if not seconds or not isinstance(item, AccuracyItem):
        return (yield)
    source = _source(item)
    try:
        where = f"{display_path(item.config, item.path)}::{item.name}"
        report_fd = session_of(item.config).terminal_stderr()
        with time_limit(seconds, where, report_fd=report_fd):
            return (yield)
    except ItemTimeout as exc:
        raise MlreproFailure(f"{exc} (the limit comes from {source})") from None
