"""The pytest plugin (the ``pytest11`` entry point): options and ini keys, markers, collecting
manifests, the accuracy items' hook implementation, and the registration of the rest of the glue
(the modules in ``pytest_plugins``, the ``pytest_mlrepro_make_items`` hook spec, the session
object that owns the run's state and reports).

Importing this module imports no ML framework; the items load one only when they run.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from pathlib import Path

import pytest

from ..manifest import Manifest, is_manifest
from ..settings import Settings, mirrors_from_env
from ._items import (
    ManifestFile,
    accuracy_items,
    is_mlrepro_item,
    preprocessing_memory,
    register_markers,
)
from ._items import (
    counterfactual_samples as counterfactual_samples,  # for the cli (the same options)
)
from ._items import (
    settings_key as settings_key,  # for the cli (the same settings)
)
from ._results import results_path
from ._session import session_of
from ._shards import PER_SAMPLE_ATTR, SPLIT_ATTR, check_shard_options

# Latency items, their options and hooks (registered with this plugin, off with it).
pytest_plugins = [
    "pytest_mlrepro.plugin._latency",
    "pytest_mlrepro.plugin._determinism",
    "pytest_mlrepro.plugin._time_limit",
    "pytest_mlrepro.plugin._golden_audit",
    "pytest_mlrepro.plugin._reference",
    "pytest_mlrepro.plugin._html",
]

DEFAULT_PATTERNS = [
    "manifests/*.yaml",
    "manifests/*.yml",
    "*/manifests/*.yaml",
    "*/manifests/*.yml",
]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mlrepro", "ML model reproducibility (pytest-mlrepro)")
    group.addoption(
        "--mlrepro-update",
        action="store_true",
        dest="mlrepro_update",
        help="record goldens that are missing or that the results no longer match",
    )
    group.addoption(
        "--mlrepro-strict",
        action="store_true",
        dest="mlrepro_strict",
        help="fail, instead of skip, when a framework, data set or device is missing",
    )
    group.addoption(
        "--mlrepro-json",
        dest="mlrepro_json",
        metavar="PATH",
        default=None,
        help="write a machine-readable results file",
    )
    group.addoption(
        "--mlrepro-device",
        dest="mlrepro_device",
        default="auto",
        metavar="auto|cpu|cuda|cpu,cuda",
        help="devices to run on (auto: cpu, and cuda when an NVIDIA GPU is present)",
    )
    group.addoption(
        "--mlrepro-no-download",
        action="store_true",
        dest="mlrepro_no_download",
        help="never download data sets, even when a manifest gives a URL",
    )
    group.addoption(
        "--mlrepro-no-diagnose",
        action="store_true",
        dest="mlrepro_no_diagnose",
        help="on a drift, do not diagnose its likely cause (counterfactual probes)",
    )
    group.addoption(
        "--mlrepro-counterfactual-samples",
        dest="mlrepro_counterfactual_samples",
        type=int,
        default=None,
        metavar="N",
        help="samples re-run per pitfall when diagnosing a drift (default: ini "
        "mlrepro_counterfactual_samples, 64; 0: no counterfactuals)",
    )
    # Command-line twins of the ini keys (dest: the key's name). A path given on the command
    # line is relative to where pytest runs; one in the ini file, to the root (settings_from).
    group.addoption(
        "--mlrepro-golden-dir",
        dest="mlrepro_golden_dir",
        metavar="DIR",
        default=None,
        help="where goldens live (overrides the ini key mlrepro_golden_dir)",
    )
    group.addoption(
        "--mlrepro-data",
        dest="mlrepro_data",
        action="append",
        metavar="DIR",
        default=None,
        help="a data mirror folder, searched before those of the ini key mlrepro_data (repeatable)",
    )
    group.addoption(
        "--mlrepro-cache",
        dest="mlrepro_cache",
        metavar="DIR",
        default=None,
        help="cache for built models and downloaded data (overrides the ini key mlrepro_cache)",
    )
    group.addoption(
        "--mlrepro-allowed-root",
        dest="mlrepro_allowed_roots",
        action="append",
        metavar="DIR",
        default=None,
        help="a folder outside the project that manifest paths may point into, besides those "
        "of the ini key mlrepro_allowed_roots (repeatable)",
    )
    group.addoption(
        "--mlrepro-fingerprint-samples",
        dest="mlrepro_fingerprint_samples",
        type=int,
        default=None,
        metavar="N",
        help="samples whose per-step fingerprints a recorded golden keeps (overrides the ini "
        "key mlrepro_fingerprint_samples)",
    )
    group.addoption(
        "--mlrepro-machine",
        dest="mlrepro_machine",
        metavar="NAME",
        default=None,
        help="this machine's name in the results file (overrides the ini key mlrepro_machine; "
        "default: the host name)",
    )
    group.addoption(
        "--mlrepro-shard",
        dest="mlrepro_shard",
        metavar="I/N",
        default=None,
        help="evaluate shard I of N of every data set (a deterministic 1/N of its samples); "
        "`mlrepro merge` of the N results files gives the verdict (overrides the ini key "
        "mlrepro_shard)",
    )
    group.addoption(
        "--mlrepro-shards",
        dest="mlrepro_shards",
        metavar="K",
        default=None,
        help="split each accuracy item into K shard items (spread over pytest-xdist workers) "
        "whose results are merged into one verdict (overrides the ini key mlrepro_shards)",
    )
    parser.addini(
        "mlrepro_machine",
        default="",
        help="this machine's name in the results file (default: the host name)",
    )
    parser.addini(
        "mlrepro_shard",
        default="",
        help="evaluate shard I/N of every data set (default: all of it)",
    )
    parser.addini(
        "mlrepro_shards",
        default="1",
        help="split each accuracy item into K shard items merged into one verdict (default 1)",
    )
    parser.addini(
        "mlrepro_diagnose",
        default="true",
        help="diagnose the likely cause of a drift (true/false; default true)",
    )
    parser.addini(
        "mlrepro_counterfactual_samples",
        default="64",
        help="samples re-run per pitfall when diagnosing a drift (default 64)",
    )
    parser.addini(
        "mlrepro_preprocessing_memory",
        default="512",
        help="MiB that the preprocessed images shared between manifests of one session may hold "
        "(default 512: the example's 1000 resized photos take 150; past it, images are "
        "preprocessed again; 0: nothing shared)",
    )
    parser.addini(
        "mlrepro_fingerprint_samples",
        default="8",
        help="samples whose per-step fingerprints a recorded golden keeps (default 8; 0: none)",
    )
    parser.addini(
        "mlrepro_data",
        type="paths",
        default=[],
        help="data mirror folders holding one folder per data set (also MLREPRO_DATA)",
    )
    parser.addini(
        "mlrepro_golden_dir", default="golden", help="where goldens live (default golden/)"
    )
    parser.addini(
        "mlrepro_cache",
        default="",
        help="cache for built models and downloaded data "
        "(default: MLREPRO_CACHE or ~/.cache/mlrepro)",
    )
    parser.addini(
        "mlrepro_allowed_roots",
        type="paths",
        default=[],
        help="folders outside the project that manifest paths may point into",
    )
    parser.addini(
        "mlrepro_manifests",
        type="linelist",
        default=DEFAULT_PATTERNS,
        help="glob patterns (relative to rootdir) of the YAML files that are manifests",
    )


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import _hookspecs

    pluginmanager.add_hookspecs(_hookspecs)


def pytest_configure(config: pytest.Config) -> None:
    session_of(config)  # the session object: state and reports, registered as a plugin
    register_markers(config)
    config.stash[settings_key] = settings_from(config)
    check_shard_options(config)
    check_outputs(config)


def _given_paths(config: pytest.Config, name: str) -> list[Path]:
    """Paths of a repeatable command-line option, relative to the folder pytest was run from."""
    return [config.invocation_params.dir / p for p in config.getoption(name) or []]


def settings_from(config: pytest.Config) -> Settings:
    """The project's settings from ini keys, their command-line twins and the environment: the
    one place they are read (the ``mlrepro`` command gets them from here too)."""
    here, root = config.invocation_params.dir, config.rootpath
    cache = config.getoption("mlrepro_cache")
    ini_cache = str(config.getini("mlrepro_cache") or "")
    return Settings.for_project(
        root,
        golden_dir=str(_golden_dir_given(config)),
        cache_dir=here / cache if cache else (root / ini_cache if ini_cache else None),
        # The environment variable comes first: CI points it at its own mirror.
        data_mirrors=[
            *mirrors_from_env(),
            *_given_paths(config, "mlrepro_data"),
            *config.getini("mlrepro_data"),
        ],
        allowed_roots=[
            *_given_paths(config, "mlrepro_allowed_roots"),
            *config.getini("mlrepro_allowed_roots"),
        ],
        allow_download=not config.getoption("mlrepro_no_download"),
    )


def _golden_dir_given(config: pytest.Config) -> Path:
    """The golden directory as given (``--mlrepro-golden-dir``, from where pytest was run; else
    the ini key, from the root), symlinks not resolved."""
    golden = config.getoption("mlrepro_golden_dir")
    if golden:
        return config.invocation_params.dir / str(golden)
    return config.rootpath / str(config.getini("mlrepro_golden_dir"))


def check_golden_dir(config: pytest.Config) -> None:
    """A usage error when the golden directory is inside the project as given but a symlink
    (it, or a folder above it) takes it outside the project and every allowed root: an update
    would write goldens into whatever folder the link names. A directory given outside the
    project on purpose (an absolute --mlrepro-golden-dir) is the user's choice."""
    settings = config.stash[settings_key]
    given = Path(os.path.normpath(_golden_dir_given(config).absolute()))
    resolved = settings.golden_dir
    roots = (settings.root, *settings.allowed_roots)
    if not given.is_relative_to(config.rootpath) or any(
        resolved.is_relative_to(root) for root in roots
    ):
        return
    raise pytest.UsageError(
        f"the golden directory {given} leads (through a symbolic link) to {resolved}, outside "
        f"the project ({settings.root}): --mlrepro-update would write goldens there. Make it a "
        "real folder inside the project, or allow the target with the ini key "
        "mlrepro_allowed_roots. Nothing was run."
    )


def check_outputs(config: pytest.Config) -> None:
    """A usage error, before any model runs, for an output that could not be written at the end:
    the --mlrepro-json target's folder, and the golden directory when --mlrepro-update asks to
    write goldens. (Writing there for real, as the run would: permission bits say nothing for
    root, nor for a read-only mount.)"""
    from .._files import check_writable_folder
    from ..errors import OutputError

    if _is_worker(config):
        return  # the controller checked before starting the workers
    checks: list[tuple[Path, str]] = []
    target = results_path(config)
    if target is not None:
        checks.append((target.parent, "results file (--mlrepro-json)"))
    if config.getoption("mlrepro_update"):
        check_golden_dir(config)
        checks.append((config.stash[settings_key].golden_dir, "goldens (--mlrepro-update)"))
    for folder, what in checks:
        try:
            check_writable_folder(folder, what)
        except OutputError as exc:
            raise pytest.UsageError(f"{exc}. Nothing was run.") from None


def pytest_mlrepro_make_items(
    parent: ManifestFile, manifest: Manifest, devices: list[str]
) -> list[pytest.Item]:
    """The accuracy items: one per device."""
    return accuracy_items(parent, manifest, devices)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    config = parent.config
    if is_manifest(file_path, config.rootpath, config.getini("mlrepro_manifests")):
        return ManifestFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Point a skip at the manifest, not at the plugin line that raised it (the one mechanism for
    every item of the plugin); give an accuracy item's report its per-sample results and, for a
    shard item, the whole item it is a part of (report attributes travel with the report from an
    xdist worker to the controller)."""
    report = yield
    if is_mlrepro_item(item) and report.skipped and isinstance(report.longrepr, tuple):
        report.longrepr = (str(item.path), 1, report.longrepr[2])
    per_sample = getattr(item, "per_sample", None)
    if per_sample is not None and report.when == "call":
        setattr(report, PER_SAMPLE_ATTR, per_sample)
    split = getattr(item, "split", None)
    if split is not None:
        setattr(report, SPLIT_ATTR, split)
    return report


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_collection_finish(session: pytest.Session) -> None:
    """Plan the preprocessing shared by the accuracy items about to run."""
    config = session.config
    session_of(config).plan_preprocessing(session.items, preprocessing_memory(config))


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> str | None:
    """Where goldens, data and cache are, after "collected N items", when manifests were
    collected (a run without them shows nothing of the plugin). Under xdist the controller
    collects nothing, so the line is not shown there."""
    if not any(is_mlrepro_item(item) for item in items):
        return None
    s = config.stash[settings_key]
    mirrors = ", ".join(str(p) for p in s.data_mirrors) or "none"
    return f"mlrepro: goldens {s.golden_dir}, data mirrors {mirrors}, cache {s.cache_dir}"
