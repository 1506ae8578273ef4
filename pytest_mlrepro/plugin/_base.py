"""The engine's base: the run's state (``config.stash``), the settings reader, shared helpers."""

from __future__ import annotations

import contextlib
import os
import platform
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from .._files import check_writable_folder
from .._visible import visible_lines
from ..data import MAX_SHARDS, Shard
from ..errors import OutputError
from ..evaluation import PreprocessingShare
from ..results import Row
from ..settings import Settings, golden_dir_escape, mirrors_from_env
from ._options import INI_KEYS

if TYPE_CHECKING:
    from _pytest.capture import CaptureManager

    from ..report.html import DriftSet

# Report attributes (plain data: xdist carries them to the controller). The row as JSON, the
# whole item a shard item is a part of (``_shards.Split``), the per-sample results (kept out of
# the user properties, which JUnit XML writes out whole: a JUnit file of a 50,000-image data set
# should not hold them), a latency item's pytest-benchmark entries.
ROW_ATTR = "mlrepro_row"
SPLIT_ATTR = "mlrepro_split"
PER_SAMPLE_ATTR = "mlrepro_per_sample"
BENCHMARKS_ATTR = "mlrepro_benchmarks"


class MlreproFailure(AssertionError):
    """A verdict or error whose text is the whole story (no traceback). An assertion failure:
    reporters that tell failed from broken (Allure) report a drift as a failed check."""


# --- the run's state ------------------------------------------------------------------------------


@dataclass
class GoldenAudit:
    """What this process collected; on the controller, the xdist workers' audits too."""

    # manifest file → (the path shown, its golden or None, the manifest's name)
    claims: dict[Path, tuple[str, Path | None, str]] = field(default_factory=dict)
    broken: set[Path] = field(default_factory=set)
    deselected: int = 0
    from_workers: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class RunState:
    """The plugin's state for one pytest process: what its reports are made of."""

    results: list[Row] = field(default_factory=list)  # one per manifest item
    latency: list[tuple[Row, list[dict[str, Any]]]] = field(default_factory=list)  # + benchmarks
    drift: list[DriftSet] = field(default_factory=list)  # drifted items' pictures (HTML report)
    audit: GoldenAudit = field(default_factory=GoldenAudit)
    # The shard items' reports until their whole item's verdict (``_shards.Gathering``).
    shards: Any = None
    terminal_stderr_fd: int | None = None  # :func:`terminal_stderr`
    # Shared between the accuracy items of this process (only where two can share).
    preprocessing: PreprocessingShare | None = None
    # The costs paid once for all items, by phase ({"wall", "cpu"} s): ``_phases.one_time``.
    one_time: dict[str, dict[str, float]] = field(default_factory=dict)


state_key = pytest.StashKey[RunState]()
settings_key = pytest.StashKey[Settings]()


def state_of(config: pytest.Config) -> RunState:
    return config.stash.setdefault(state_key, RunState())


def terminal_stderr(config: pytest.Config) -> int:
    """The terminal's stderr, duplicated (capture suspended) when a time limit is first armed: a
    process ended by the hard limit says why on the terminal, not into a dying capture buffer."""
    state = state_of(config)
    if state.terminal_stderr_fd is None:
        capture: CaptureManager | None = config.pluginmanager.get_plugin("capturemanager")
        if capture is not None and not capture.is_globally_capturing():
            capture = None
        if capture is not None:
            capture.suspend_global_capture(in_=False)
        try:
            state.terminal_stderr_fd = os.dup(2)
        except OSError:  # no stderr at all: the message goes wherever fd 2 goes then
            state.terminal_stderr_fd = 2
        finally:
            if capture is not None:
                capture.resume_global_capture()
    return state.terminal_stderr_fd


def close_terminal_stderr(config: pytest.Config) -> None:
    state = state_of(config)
    if state.terminal_stderr_fd is not None and state.terminal_stderr_fd != 2:
        with contextlib.suppress(OSError):
            os.close(state.terminal_stderr_fd)
    state.terminal_stderr_fd = None


# --- the one reader of the plugin's settings ---------------------------------------------------

T = TypeVar("T")
_INI_NAMES = frozenset(key.name for key in INI_KEYS)


def option_or_ini(config: pytest.Config, name: str) -> object:
    """The command-line option ``name`` when given, else its ini key ("" where there is none)."""
    given = config.getoption(name, default=None)
    if given is not None:
        return given
    return config.getini(name) if name in _INI_NAMES else ""


def setting(
    config: pytest.Config, name: str, parse: Callable[[str], T], label: str | None = None
) -> T:
    """``name`` parsed; a ``ValueError`` is a usage error (``label`` may show ``{value!r}``)."""
    raw = str(option_or_ini(config, name)).strip()
    try:
        return parse(raw)
    except ValueError as exc:
        raise pytest.UsageError(f"{(label or name).format(value=raw)}: {exc}") from None


def whole_number(least: int = 0, most: int | None = None, unit: str = "") -> Callable[[str], int]:
    """A parser of a whole number in ``least..most`` (``unit``: what it counts)."""

    def parse(text: str) -> int:
        try:
            number = int(text)
        except ValueError:
            raise ValueError(f"expected a whole number, got {text!r}") from None
        if number < least:
            floor = "must not be negative" if least == 0 else f"must be at least {least}"
            raise ValueError(f"{floor}, got {number}")
        if most is not None and number > most:
            raise ValueError(f"at most {most}{unit}, got {number}")
        return number

    return parse


def seconds(text: str) -> float:
    text = text or "0"
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected seconds, got {text!r}") from None
    if value < 0:
        raise ValueError(f"must not be negative, got {text!r}")
    return value


def share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise ValueError("expected a number between 0 and 1")
    return value


def threads(text: str) -> tuple[int | None, int | None]:
    """``"4"`` → (4, None); ``"4,1"`` → (4, 1); ``""`` → (None, None)."""
    if not text:
        return None, None
    try:
        numbers = [int(p) for p in text.split(",")]
    except ValueError:
        numbers = []
    if not 1 <= len(numbers) <= 2 or any(not 1 <= n <= 1024 for n in numbers):
        raise ValueError("expected INTRA or INTRA,INTER, each 1..1024 (e.g. 2,1)")
    return numbers[0], numbers[1] if len(numbers) == 2 else None


def shard(text: str) -> Shard | None:
    if not text:
        return None
    parsed = Shard.parse(text)
    return None if parsed.count == 1 else parsed


@dataclass(frozen=True)
class RunOptions:
    """This run's item settings, read and checked once at configure (bad values: usage errors)."""

    update: bool  # --mlrepro-update
    enrich: bool  # --mlrepro-enrich: a golden the run reproduces gains the evidence it lacks
    strict: bool  # --mlrepro-strict: a missing framework, data set or device fails an item
    shard: Shard | None  # the shard this run evaluates (--mlrepro-shard); None: the whole data
    # How many shard items each accuracy item is split into (--mlrepro-shards; 1: not split).
    item_shards: int
    threads: tuple[int | None, int | None]  # --mlrepro-threads for latency items: (intra, inter)
    max_contention: float
    counterfactual_samples: int  # samples re-run per counterfactual of a diagnosis (0: none)
    diagnosis_probes: int | None  # counterfactual_samples; None when diagnosis is turned off
    fingerprint_samples: int  # samples whose per-step fingerprints a recorded golden keeps
    preprocessing_memory: int  # bytes the preprocessing shared between manifests may hold
    timeout: float  # seconds an item may run when its manifest sets no limit (0: none)


options_key = pytest.StashKey[RunOptions]()


def options(config: pytest.Config) -> RunOptions:
    return config.stash[options_key]


def read_options(config: pytest.Config) -> RunOptions:
    update = bool(config.getoption("mlrepro_update"))
    enrich = bool(config.getoption("mlrepro_enrich", False))
    shard_now = setting(config, "mlrepro_shard", shard, "--mlrepro-shard / mlrepro_shard")
    # At most MAX_SHARDS, checked before any item is made: each shard is an item per device.
    per_item = whole_number(1, MAX_SHARDS, " shard items per accuracy item")
    item_shards = setting(config, "mlrepro_shards", lambda text: per_item(text or "1"))
    threads_now = setting(config, "mlrepro_threads", threads, "--mlrepro-threads {value!r}")
    contention = setting(
        config,
        "mlrepro_latency_max_contention",
        share,
        "--mlrepro-latency-max-contention / mlrepro_latency_max_contention {value!r}",
    )
    counterfactuals = setting(config, "mlrepro_counterfactual_samples", whole_number())
    fingerprints = setting(config, "mlrepro_fingerprint_samples", whole_number())
    memory_mib = setting(config, "mlrepro_preprocessing_memory", whole_number())
    diagnose = str(config.getini("mlrepro_diagnose")).strip().lower() not in ("false", "0", "no")
    if shard_now is not None and update:
        raise pytest.UsageError(
            f"--mlrepro-update cannot record goldens from shard {shard_now} of the data: a golden "
            "needs every sample. Run the update without --mlrepro-shard. Nothing was run."
        )
    if enrich and update:
        raise pytest.UsageError(
            "--mlrepro-enrich and --mlrepro-update cannot be combined: an update records the "
            "golden anew, an enrichment adds evidence to a golden it leaves as it is. Nothing "
            "was run."
        )
    if enrich and shard_now is not None:
        raise pytest.UsageError(
            f"--mlrepro-enrich cannot enrich goldens from shard {shard_now} of the data: it "
            "adds evidence only where the whole golden is reproduced. Nothing was run."
        )
    if config.getoption("mlrepro_update_despite_reference") and not update:
        raise pytest.UsageError(
            "--mlrepro-update-despite-reference only applies with --mlrepro-update"
        )
    return RunOptions(
        update=update,
        enrich=enrich,
        strict=bool(config.getoption("mlrepro_strict")),
        shard=shard_now,
        # Not split under --mlrepro-update (a golden is recorded from every sample) nor when the
        # run is one shard already (--mlrepro-shard).
        item_shards=1 if update or shard_now is not None else item_shards,
        threads=threads_now,
        max_contention=contention,
        counterfactual_samples=counterfactuals,
        diagnosis_probes=(
            None if config.getoption("mlrepro_no_diagnose") or not diagnose else counterfactuals
        ),
        fingerprint_samples=fingerprints,
        preprocessing_memory=memory_mib * 1024 * 1024,
        timeout=setting(config, "mlrepro_timeout", seconds),
    )


def machine_name(config: pytest.Config) -> str:
    return str(option_or_ini(config, "mlrepro_machine")).strip() or platform.node() or "unknown"


def is_worker(config: pytest.Config) -> bool:  # an xdist worker
    return hasattr(config, "workerinput")


# --- the project's settings -----------------------------------------------------------------------


def _given_paths(config: pytest.Config, name: str) -> list[Path]:  # a repeatable option's
    return [config.invocation_params.dir / p for p in config.getoption(name) or []]


def settings_from(config: pytest.Config) -> Settings:
    """The project's settings: the one place they are read. A path on the command line is
    relative to where pytest runs, one in the ini file to the root (symlinks not resolved)."""
    here, root = config.invocation_params.dir, config.rootpath
    cache = config.getoption("mlrepro_cache")
    ini_cache = str(config.getini("mlrepro_cache") or "")
    golden = config.getoption("mlrepro_golden_dir")
    golden_dir = here / str(golden) if golden else root / str(config.getini("mlrepro_golden_dir"))
    return Settings.for_project(
        root,
        golden_dir=str(golden_dir),
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


def check_golden_dir(config: pytest.Config, option: str) -> None:
    """A usage error when a symlink takes the golden directory outside the project and every
    allowed root: ``option`` would write goldens into whatever folder the link names."""
    escape = golden_dir_escape(config.stash[settings_key])
    if escape is None:
        return
    raise pytest.UsageError(
        f"{escape}: {option} would write goldens there. Make it a real folder inside the "
        "project, or allow the target with the ini key mlrepro_allowed_roots. Nothing was run."
    )


def output_path(config: pytest.Config, option: str) -> Path | None:
    """An output option's target (relative to the working directory), None without one."""
    target = config.getoption(option)
    if not target:
        return None
    path = Path(target)
    return path if path.is_absolute() else Path(os.getcwd()) / path


def check_outputs(config: pytest.Config) -> None:
    """A usage error, before any model runs, for an output that could not be written at the end
    (the output files' folders, the golden directory under --mlrepro-update)."""
    if is_worker(config):
        return  # the controller checked before starting the workers
    checks: list[tuple[Path, str]] = []
    for option, what in (
        ("mlrepro_json", "results file (--mlrepro-json)"),
        ("mlrepro_benchmark_json", "benchmark file (--mlrepro-benchmark-json)"),
    ):
        target = output_path(config, option)
        if target is not None:
            checks.append((target.parent, what))
    if options(config).update:
        check_golden_dir(config, "--mlrepro-update")
        checks.append((config.stash[settings_key].golden_dir, "goldens (--mlrepro-update)"))
    elif options(config).enrich:
        check_golden_dir(config, "--mlrepro-enrich")
    for folder, what in checks:
        try:
            check_writable_folder(folder, what)
        except OutputError as exc:
            raise pytest.UsageError(f"{exc}. Nothing was run.") from None


def report_output_error(session: pytest.Session, message: str) -> None:
    """An output not written at the end: said in red, and the run fails (its results were lost)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"mlrepro: {visible_lines(message)}", red=True, bold=True)
    else:
        print(f"mlrepro: {visible_lines(message)}", file=sys.stderr)
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def display_path(config: pytest.Config, path: Path) -> str:
    try:
        return path.relative_to(config.rootpath).as_posix()
    except ValueError:
        return str(path)
