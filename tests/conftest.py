"""The test suite's tiers and shared fixtures.

Tiers: ``python -m pytest tests -n auto`` runs the fast tier (everything not marked ``slow``; the
tests are independent of one another and of the worker they run on, so xdist spreads them);
``python -m pytest tests -m "slow or hypothesis" --hypothesis-profile deep`` runs the slow tier
(real models over the 1000-image sample, the stress and kill tests, the ``-n 2`` runs of tests
whose subject is not xdist) and the Hypothesis tests at depth. An explicit ``-m`` replaces the
default ``not slow``.

Fixtures: a tiny synthetic project (tests/integration/). Images and models are made once per
session; each test gets its own copy in ``pytester.path`` and runs pytest on it serially (in
process, see ``helpers.Project.run``) and with pytest-xdist (``-n 2``, in a subprocess).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

# The shared helpers (helpers.py, diag_helpers.py, tf_helpers.py) live here, beside the tier
# folders: importable as top-level modules from every tier, however pytest was started. They are
# imported one way only, ``from helpers import ...`` (each refuses to load as ``tests.helpers``:
# a second name would be a second module object).
sys.path.insert(0, str(Path(__file__).resolve().parent))

# The package under test is this checkout's, in the subprocesses the tests start too (pytester's
# runpytest_subprocess, the -n 2 runs): an editable install elsewhere (another worktree, a CI
# clone) would otherwise be the one imported there, and test other code than the tests beside it.
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(Path(__file__).resolve().parent.parent), *filter(None, [os.environ.get("PYTHONPATH")])]
)

from helpers import (
    CHILD_TIMEOUT_S,
    LOOSE,
    QUIET,
    XDIST,
    BareProject,
    Project,
    freeze_loaded_objects,
    keep_installed_modules,
    made_once,
    make_assets,
    make_project,
    make_torchscript,
    manifest_text,
    restore_kept_modules,
)
from machines import MACHINES, identity, write_cpuinfo

from pytest_mlrepro.fingerprint import CPUINFO_ENV

# Extension modules that cannot be imported twice in one process (onnx's nanobind enums abort the
# interpreter on a second registration; torch registers its operator libraries once). pytester
# drops every module a test or an in-process run imported; imported before the first test that
# uses pytester (_frameworks_before_pytester), these stay loaded across runs. The torch runner
# too: it reads torch's default thread count on import. Not imported here: collecting a unit-test
# file must not pay for the frameworks. jsonschema too (a results file read back in a run): its
# format checkers import six, whose ``six.moves`` a meta-path importer serves that a six dropped
# and imported again no longer finds (ModuleNotFoundError: six.moves, in dateutil, later).
NATIVE_MODULES = ("onnx", "onnxruntime", "torch", "pytest_mlrepro.runners.torch", "jsonschema")

# Hypothesis profiles. ``ci`` (the default) runs every property test with its usual number of
# examples (``helpers.examples`` scales explicit counts); ``deep`` runs five times as many, for the
# slow tier. Chosen with ``--hypothesis-profile NAME`` or MLREPRO_HYPOTHESIS_PROFILE. Neither has a
# deadline: a test's verdict never depends on the machine's load. Registered (importing
# Hypothesis) only when a run asks for a profile or collects a file that uses Hypothesis.
PROFILE_ENV = "MLREPRO_HYPOTHESIS_PROFILE"


_PROFILES: dict[str, bool] = {"registered": False}


def _register_hypothesis_profiles(load: str | None) -> None:
    """Register the profiles once; load ``load`` (None: leave that to Hypothesis's plugin, which
    loads the one ``--hypothesis-profile`` names)."""
    from hypothesis import settings

    if not _PROFILES["registered"]:
        settings.register_profile("ci", max_examples=100, deadline=None)
        settings.register_profile("deep", max_examples=500, deadline=None)
        _PROFILES["registered"] = True
        if load is not None:
            settings.load_profile(load)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--as-machine",
        choices=sorted(MACHINES),
        default=None,
        help="run the suite as if on this fixed machine (tests/machines.py): the plugin reads "
        "its /proc/cpuinfo text instead of the host's",
    )


@pytest.hookimpl(tryfirst=True)  # before Hypothesis's own plugin loads the profile asked for
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "about_xdist: the test's subject is pytest-xdist: its -n 2 run stays in the fast tier",
    )
    if not config.option.markexpr:  # the fast tier unless a marker expression was given
        config.option.markexpr = "not slow"
    _inner_configs_skip_the_gc_passes(config)
    _run_as_machine(config)
    if config.getoption("hypothesis_profile", None):
        _register_hypothesis_profiles(load=None)
    elif os.environ.get(PROFILE_ENV):
        _register_hypothesis_profiles(load=os.environ[PROFILE_ENV])


def pytest_collection_finish(session: pytest.Session) -> None:
    """Where no collected module uses Hypothesis (a unit-test file of its own, say), its plugin
    is dropped for the rest of the run: it has nothing to report, and its terminal summary would
    import all of Hypothesis (most of a second) just to find that out."""
    if "hypothesis" not in sys.modules:
        plugin = session.config.pluginmanager.get_plugin("hypothesispytest")
        if plugin is not None:
            session.config.pluginmanager.unregister(plugin)


def _run_as_machine(config: pytest.Config) -> None:
    """``--as-machine NAME``: this process and those it starts (pytester's subprocesses, the
    xdist workers) read machine NAME's cpuinfo text as this machine's."""
    name = config.getoption("as_machine", None)
    if name is None:
        return
    folder = Path(tempfile.mkdtemp(prefix="mlrepro-machine-"))
    previous = os.environ.get(CPUINFO_ENV)
    os.environ[CPUINFO_ENV] = str(write_cpuinfo(name, folder))

    def restore() -> None:
        if previous is None:
            os.environ.pop(CPUINFO_ENV, None)
        else:
            os.environ[CPUINFO_ENV] = previous
        shutil.rmtree(folder, ignore_errors=True)

    config.add_cleanup(restore)


def pytest_collectstart(collector: pytest.Collector) -> None:
    """A test module that uses Hypothesis gets the ``ci`` profile (or the one asked for) before it
    is imported: its ``@settings`` take their defaults from the profile loaded then. (Collectors
    start only for the files a run selects.)"""
    if (
        not _PROFILES["registered"]
        and isinstance(collector, pytest.Module)
        and "hypothesis" in collector.path.read_text(encoding="utf-8", errors="replace")
    ):
        _register_hypothesis_profiles(load="ci")


def _inner_configs_skip_the_gc_passes(outer: pytest.Config) -> None:
    """The configurations a test makes in this process (``pytester.parseconfigure``, the
    ``mlrepro`` command run in-process, which starts ``pytest.main``) end without pytest's five
    ``gc.collect()`` passes, as ``pytester.inline_run`` already does for its runs: with torch and
    TensorFlow loaded each pass takes a fraction of a second (seconds per test). The unraisable
    exceptions they would have surfaced still reach this session's own hook, which the inner
    configuration gives back at its end. The session's own configuration keeps them. pytest 8.4
    and later (earlier ones make no such passes)."""
    try:
        from _pytest import unraisableexception as unraisable
    except ImportError:  # pragma: no cover - a pytest without the module
        return
    key = getattr(unraisable, "gc_collect_iterations_key", None)
    cleanup = getattr(unraisable, "cleanup", None)
    if key is None or cleanup is None or getattr(cleanup, "_mlrepro_tests", False):
        return

    def cleanup_without_gc_passes(*, config: pytest.Config, prev_hook: Any) -> None:
        if config is not outer:
            config.stash.setdefault(key, 0)
        cleanup(config=config, prev_hook=prev_hook)

    cleanup_without_gc_passes._mlrepro_tests = True  # type: ignore[attr-defined]
    unraisable.cleanup = cleanup_without_gc_passes


_BEFORE_TEST = pytest.StashKey[set[str]]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    item.stash[_BEFORE_TEST] = set(sys.modules)  # before the test's fixtures
    return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    """Installed modules a test imported (torch.export's, say) stay loaded when pytester drops
    them with the test's other modules: a later test or in-process run that imports one must
    get the loaded module, not a second copy (helpers.keep_installed_modules)."""
    keep_installed_modules(item.stash.get(_BEFORE_TEST, set(sys.modules)))
    try:
        return (yield)
    finally:
        restore_kept_modules()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The ``-n 2`` variant of a test runs in the slow tier, unless the test is about xdist:
    its serial variant covers the same behaviour, and each xdist run costs seconds of start-up."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or item.get_closest_marker("about_xdist") is not None:
            continue
        if any(callspec.params.get(name) == XDIST for name in ("project", "xdist")):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _frameworks_before_pytester(request: pytest.FixtureRequest) -> None:
    """The :data:`NATIVE_MODULES` imported before the first test that uses pytester takes its
    snapshot of the loaded modules (autouse: set up before pytester), and then kept."""
    if _NATIVES["loaded"] or "pytester" not in request.fixturenames:
        return
    for native in NATIVE_MODULES:
        # An environment without them: the tests that need them skip.
        with contextlib.suppress(ImportError):
            __import__(native)
    freeze_loaded_objects()
    _NATIVES["loaded"] = True


_NATIVES: dict[str, bool] = {"loaded": False}


@pytest.fixture
def as_machine(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str], dict[str, object]]:
    """``as_machine(NAME)``: for the rest of the test, this machine is the fixed machine NAME
    (tests/machines.py) to the plugin, in this process and the ones it starts; returns its
    identity."""

    def use(name: str) -> dict[str, object]:
        path = write_cpuinfo(name, tmp_path_factory.mktemp("cpuinfo"))
        monkeypatch.setenv(CPUINFO_ENV, str(path))
        return identity(name)

    return use


@pytest.fixture(scope="session")
def mlrepro_assets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Images, labels, both models, and goldens recorded by the plugin for the ONNX manifests
    ``tiny_onnx`` and ``tiny_loose`` (under ``golden/``), made once per run (helpers.made_once:
    the xdist workers share them)."""
    return made_once(tmp_path_factory, "mlrepro-assets", _make_mlrepro_assets)


def _make_mlrepro_assets(root: Path) -> None:
    make_assets(root, torchscript=False)
    template = root / "template"
    template.mkdir()
    make_project(
        template,
        root,
        manifests={
            "tiny_onnx.yaml": manifest_text("tiny_onnx", assets=root),
            "tiny_loose.yaml": manifest_text("tiny_loose", assets=root, extra=LOOSE),
        },
    )
    recording = subprocess.Popen(
        [sys.executable, "-m", "pytest", *QUIET, "--mlrepro-update", "-q"],
        cwd=template,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**_clean_env(), "MLREPRO_CACHE": str(root / "cache")},
    )
    make_torchscript(root / "models" / "tiny.pt")  # imports torch meanwhile
    output, _ = recording.communicate(timeout=CHILD_TIMEOUT_S)
    assert recording.returncode == 0, output
    shutil.copytree(template / "golden", root / "golden")


@pytest.fixture(scope="session")
def tf_model_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny TensorFlow models of tf_helpers.py (every file of ``TF_FILES``), made once per
    run, in the process of the worker that asks first (TensorFlow is loaded there already: the
    TensorFlow test modules import it when they are collected)."""
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("TensorFlow is not installed")
    from tf_helpers import make_tf_models

    return made_once(tmp_path_factory, "tf-models", make_tf_models)


def _clean_env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if k not in ("MLREPRO_DATA", "MLREPRO_CACHE", "PYTEST_ADDOPTS")
    }


@pytest.fixture
def _mlrepro_env(monkeypatch: pytest.MonkeyPatch, pytester: pytest.Pytester) -> None:
    monkeypatch.delenv("MLREPRO_DATA", raising=False)
    monkeypatch.setenv("MLREPRO_CACHE", str(pytester.path / ".mlrepro-cache"))


@pytest.fixture(params=[[], XDIST], ids=["serial", "xdist"])
def project(
    request: pytest.FixtureRequest,
    pytester: pytest.Pytester,
    mlrepro_assets: Path,
    _mlrepro_env: None,
) -> Project:
    """A tiny project whose runs use no xdist, then ``-n 2``."""
    return Project(pytester, mlrepro_assets, request.param)


@pytest.fixture
def serial_project(pytester: pytest.Pytester, mlrepro_assets: Path, _mlrepro_env: None) -> Project:
    """A tiny project whose runs never use xdist (for checks of the one process)."""
    return Project(pytester, mlrepro_assets, [])


@pytest.fixture(scope="session")
def bare_assets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Images, labels and the tiny ONNX model (no golden), made once per session."""
    return make_assets(tmp_path_factory.mktemp("bare-assets"), torchscript=False)


@pytest.fixture
def bare(pytester: pytest.Pytester, bare_assets: Path, _mlrepro_env: None) -> BareProject:
    """The tiny project with no manifest and no golden yet, run in this process."""
    return BareProject(pytester, bare_assets)


@pytest.fixture
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test servers listen on 127.0.0.1: never route to them through a proxy."""
    for scheme in ("http", "https", "all"):
        for name in (f"{scheme}_proxy", f"{scheme.upper()}_PROXY"):
            monkeypatch.delenv(name, raising=False)
