"""The plugin's entry point (``pytest11``): options, ini keys, markers, hook spec, collector;
the engine (numpy and the core included) is imported only when a run needs it."""

from __future__ import annotations

import importlib
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .._names import matches_patterns
from . import _heap, _hookspecs, _junit, _selectors
from ._options import LOCK_INPUT, add_options, given, register_markers

if TYPE_CHECKING:
    from ._base import options as options
    from ._base import settings_key as settings_key
    from ._session import MlreproSession
else:

    def __getattr__(name: str) -> Any:
        """The engine's ``options`` and ``settings_key`` (the command line's), imported on use."""
        if name in ("options", "settings_key"):
            from . import _base

            return getattr(_base, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


ENGINE = "pytest_mlrepro.plugin._session"  # registered with pytest when a run needs it
# The manifest recogniser (it parses YAML): imported when the patterns first name a file.
RECOGNIZER = "pytest_mlrepro._recognize"
LAZY_PLUGIN = "mlrepro-lazy"

_lock_dir_key = pytest.StashKey[Path]()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(_hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    # Before any plugin's pytest_configure registers its cleanups: this one then runs last.
    _heap.register(config)
    # The run's paths before pytest-picked's pytest_configure replaces them (_selectors).
    _selectors.remember_args(config)


def pytest_configure(config: pytest.Config) -> None:
    register_markers(config)
    _junit.register(config)
    follows_picked = _selectors.register(config)
    loader = EngineLoader(config)
    config.pluginmanager.register(loader, LAZY_PLUGIN)
    if follows_picked or given(config):
        loader.engine()


class EngineLoader:
    """Loads the engine the first time this run needs it, and hands it what came before."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._session: MlreproSession | None = None

    def engine(self) -> MlreproSession:
        if self._session is None:
            self.config.pluginmanager.import_plugin(ENGINE)
            module: Any = self.config.pluginmanager.get_plugin(ENGINE)
            self._session = module.session_of(self.config)
        return self._session

    def pytest_collect_file(
        self, file_path: Path, parent: pytest.Collector
    ) -> pytest.Collector | None:
        """The one collector: an unnamed file costs a pattern match; a manifest goes on."""
        patterns = self.config.getini("mlrepro_manifests")
        if not matches_patterns(file_path, self.config.rootpath, patterns):
            return None
        recognizer: Any = importlib.import_module(RECOGNIZER)
        if not recognizer.is_manifest(file_path, self.config.rootpath, patterns):
            return None
        return self.engine().collect_file(file_path, parent)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """An xdist controller collects nothing: a worker's report of our item loads the engine,
        which gets this report (the hook call in progress does not include it)."""
        if self._session is None and _of_the_plugin(report):
            self.engine().pytest_runtest_logreport(report)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """A worker's share of the golden audit, when it collected manifests."""
        output = getattr(node, "workeroutput", None) or {}
        if self._session is None and any(key.startswith("mlrepro") for key in output):
            self.engine().pytest_testnodedown(node, error)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        """Controller side (xdist): every worker gets the path of the session's latency lock."""
        if _lock_dir_key not in self.config.stash:
            self.config.stash[_lock_dir_key] = Path(tempfile.mkdtemp(prefix="mlrepro-xdist-"))
        node.workerinput[LOCK_INPUT] = str(self.config.stash[_lock_dir_key] / "latency.lock")

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        lock_dir = config.stash.get(_lock_dir_key, None)
        if lock_dir is not None:
            shutil.rmtree(lock_dir, ignore_errors=True)


def _of_the_plugin(report: pytest.TestReport) -> bool:
    """Whether a report is of our item (``mlrepro.*`` properties or ``mlrepro_*`` attributes)."""
    if any(str(key).startswith("mlrepro.") for key, _ in report.user_properties):
        return True
    return any(name.startswith("mlrepro_") for name in vars(report))
