"""The options, ini keys and markers the plugin registers with pytest when it starts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pytest

from .._names import DEFAULT_PATTERNS, DEVICES, FRAMEWORKS

GROUP = "mlrepro"
GROUP_DESCRIPTION = "ML model reproducibility (pytest-mlrepro)"
DEFAULT_MAX_CONTENTION = 0.25
LOCK_INPUT = "mlrepro_latency_lock"  # the xdist worker input: the session's latency lock's path


@dataclass(frozen=True)
class Option:
    """A command-line option: ``usage`` is its flag and, for one that takes a value, the value's
    metavar (``"--mlrepro-json PATH"``); a flag without one is ``store_true``."""

    usage: str
    help: str
    action: str = "store"
    type: Any = None
    default: Any = None
    named: str = ""  # its name in ``config.option`` where it is not the flag's
    const: Any = None  # not None: the value may be left out (argparse's nargs="?"), giving this

    @property
    def flag(self) -> str:
        return self.usage.partition(" ")[0]

    @property
    def dest(self) -> str:
        """Its name in ``config.option``: the flag's (``--mlrepro-json``: ``mlrepro_json``)."""
        return self.named or self.flag.lstrip("-").replace("-", "_")

    def add_to(self, group: pytest.OptionGroup) -> None:
        metavar = self.usage.partition(" ")[2]
        kwargs: dict[str, Any] = {"dest": self.dest, "help": self.help}
        if not metavar:  # a flag takes no value: no default, metavar nor type
            kwargs["action"] = "store_true"
        else:
            kwargs.update(action=self.action, default=self.default, metavar=metavar, type=self.type)
        if self.const is not None:
            kwargs.update(nargs="?", const=self.const)
        group.addoption(self.flag, **kwargs)

    @property
    def unset(self) -> Any:
        return self.default if " " in self.usage else False


@dataclass(frozen=True)
class IniKey:
    name: str
    help: str
    default: Any = ""
    type: Literal["paths", "linelist"] | None = None


OPTIONS = (
    Option(
        "--mlrepro-update", "record goldens that are missing or that the results no longer match"
    ),
    Option(
        "--mlrepro-enrich",
        "add to goldens the evidence they lack (layer and step fingerprints, environment "
        "fields, pixel identities, latency operator profiles) where the run reproduces them; "
        "never changes a figure",
    ),
    Option(
        "--mlrepro-strict",
        "fail, instead of skip, when a framework, data set or device is missing; and fail on "
        "any byte change of the data, even one that decodes to the golden's pixels",
    ),
    Option("--mlrepro-json PATH", "write a machine-readable results file"),
    Option(
        "--mlrepro-device auto|cpu|cuda|cpu,cuda",
        "devices to run on (auto: cpu, and cuda when an NVIDIA GPU is present)",
        default="auto",
    ),
    Option("--mlrepro-no-download", "never download data sets, even when a manifest gives a URL"),
    Option(
        "--mlrepro-no-diagnose",
        "on a drift, do not diagnose its likely cause (counterfactual probes)",
    ),
    Option(
        "--mlrepro-counterfactual-samples N",
        "samples re-run per pitfall when diagnosing a drift (default: ini "
        "mlrepro_counterfactual_samples, 64; 0: no counterfactuals)",
        type=int,
    ),
    # Command-line twins of the ini keys (dest: the key's name). A path given on the command
    # line is relative to where pytest runs; one in the ini file, to the root (settings_from).
    Option(
        "--mlrepro-golden-dir DIR", "where goldens live (overrides the ini key mlrepro_golden_dir)"
    ),
    Option(
        "--mlrepro-data DIR",
        "a data mirror folder, searched before those of the ini key mlrepro_data (repeatable)",
        action="append",
    ),
    Option(
        "--mlrepro-cache DIR",
        "cache for built models and downloaded data (overrides the ini key mlrepro_cache)",
    ),
    Option(
        "--mlrepro-allowed-root DIR",
        "a folder outside the project that manifest paths may point into, besides those "
        "of the ini key mlrepro_allowed_roots (repeatable)",
        action="append",
        named="mlrepro_allowed_roots",
    ),
    Option(
        "--mlrepro-fingerprint-samples N",
        "samples whose per-step fingerprints a recorded golden keeps (overrides the ini "
        "key mlrepro_fingerprint_samples)",
        type=int,
    ),
    Option(
        "--mlrepro-machine NAME",
        "this machine's name in the results file (overrides the ini key mlrepro_machine; "
        "default: the host name)",
    ),
    Option(
        "--mlrepro-shard I/N",
        "evaluate shard I of N of every data set (a deterministic 1/N of its samples); "
        "`mlrepro merge` of the N results files gives the verdict (overrides the ini key "
        "mlrepro_shard)",
    ),
    Option(
        "--mlrepro-shards K",
        "split each accuracy item into K shard items (spread over pytest-xdist workers) "
        "whose results are merged into one verdict (overrides the ini key mlrepro_shards)",
    ),
    Option(
        "--mlrepro-threads INTRA[,INTER]",
        "thread counts for latency items, overriding the manifests' runtime "
        "intra_op_threads / inter_op_threads (part of the hardware key)",
    ),
    Option(
        "--mlrepro-benchmark-json PATH", "write latency results in pytest-benchmark's JSON format"
    ),
    Option(
        "--mlrepro-latency-max-contention SHARE",
        "overrides the ini key mlrepro_latency_max_contention",
    ),
    Option(
        "--mlrepro-determinism",
        "add a determinism item for every manifest (runs its evaluation twice), not only "
        "for manifests with a determinism: block",
    ),
    Option(
        "--mlrepro-timeout SECONDS",
        "seconds an accuracy or determinism item may run (overrides the ini key "
        "mlrepro_timeout; a manifest's runtime.timeout_s still comes first)",
    ),
    Option(
        "--mlrepro-update-despite-reference",
        "with --mlrepro-update, record goldens even when the results disagree with the "
        "manifest's reference (by default they are not recorded: the reference says the two "
        "must agree); the item still fails on the disagreement",
    ),
    Option(
        "--mlrepro-changed REF",
        "run only the manifest items whose manifest, model, data checksum list or labels, "
        "golden, builder or preprocessing code changed since the git ref REF (default HEAD: "
        "the uncommitted and untracked changes); the others are deselected (overrides the ini "
        "key mlrepro_changed). Give it as --mlrepro-changed=REF before paths",
        const="HEAD",
    ),
    Option(
        "--mlrepro-html PATH",
        "write a self-contained HTML report of the session (overrides the ini key "
        "mlrepro_html; needs the report extra: pip install 'pytest-mlrepro[report]')",
    ),
    Option(
        "--mlrepro-track URI",
        "log the session to an MLflow tracking store: URI, else MLFLOW_TRACKING_URI, else the "
        "ini key mlrepro_track, else sqlite:///<rootdir>/mlflow.db (needs the track extra: "
        "pip install 'pytest-mlrepro[track]'; docs/tracking.md). Give it after the paths, or "
        "as --mlrepro-track=URI",
        const="",
    ),
)

INI_KEYS = (
    IniKey("mlrepro_machine", "this machine's name in the results file (default: the host name)"),
    IniKey("mlrepro_shard", "evaluate shard I/N of every data set (default: all of it)"),
    IniKey(
        "mlrepro_shards",
        "split each accuracy item into K shard items merged into one verdict (default 1)",
        default="1",
    ),
    IniKey(
        "mlrepro_diagnose",
        "diagnose the likely cause of a drift (true/false; default true)",
        default="true",
    ),
    IniKey(
        "mlrepro_counterfactual_samples",
        "samples re-run per pitfall when diagnosing a drift (default 64)",
        default="64",
    ),
    IniKey(
        "mlrepro_preprocessing_memory",
        "MiB that the preprocessed images shared between manifests of one session may hold "
        "(default 512: the example's 1000 resized photos take 150; past it, images are "
        "preprocessed again; 0: nothing shared)",
        default="512",
    ),
    IniKey(
        "mlrepro_fingerprint_samples",
        "samples whose per-step fingerprints a recorded golden keeps (default 8; 0: none)",
        default="8",
    ),
    IniKey(
        "mlrepro_data",
        "data mirror folders holding one folder per data set (also MLREPRO_DATA)",
        default=[],
        type="paths",
    ),
    IniKey("mlrepro_golden_dir", "where goldens live (default golden/)", default="golden"),
    IniKey(
        "mlrepro_cache",
        "cache for built models and downloaded data (default: MLREPRO_CACHE or ~/.cache/mlrepro)",
    ),
    IniKey(
        "mlrepro_allowed_roots",
        "folders outside the project that manifest paths may point into",
        default=[],
        type="paths",
    ),
    IniKey(
        "mlrepro_manifests",
        "glob patterns (relative to rootdir) of the YAML files that are manifests",
        type="linelist",
        default=list(DEFAULT_PATTERNS),
    ),
    IniKey(
        "mlrepro_latency_max_contention",
        "share of the CPUs (0..1) other processes may use while a latency is measured "
        "before a slowdown is reported as 'contended' instead of a regression "
        f"(default {DEFAULT_MAX_CONTENTION})",
        default=str(DEFAULT_MAX_CONTENTION),
    ),
    IniKey(
        "mlrepro_timeout",
        "seconds an accuracy or determinism item may run (per evaluation) when its "
        "manifest sets no runtime.timeout_s (default 0: no limit)",
        default="0",
    ),
    IniKey(
        "mlrepro_changed",
        "run only the manifest items whose dependencies changed since this git ref "
        "(default: empty, every item)",
    ),
    IniKey(
        "mlrepro_html",
        "write a self-contained HTML report of the session to this path (relative to the rootdir)",
    ),
    IniKey(
        "mlrepro_track",
        "log every session to an MLflow tracking store: its URI, or true for "
        "MLFLOW_TRACKING_URI, else sqlite:///<rootdir>/mlflow.db (default: no tracking)",
    ),
)


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup(GROUP, GROUP_DESCRIPTION)
    for option in OPTIONS:
        option.add_to(group)
    for key in INI_KEYS:
        parser.addini(key.name, help=key.help, type=key.type, default=key.default)


def given(config: pytest.Config) -> bool:
    """Whether this run asks for something of the plugin: an option of it on the command line
    (or in ``addopts``), or an ini key of it in the configuration file (or ``-o``)."""
    if any(config.getoption(o.dest, default=o.unset) != o.unset for o in OPTIONS):
        return True
    return any(_ini_given(config, key) for key in INI_KEYS)


def _ini_given(config: pytest.Config, key: IniKey) -> bool:
    value = config.getini(key.name)
    if key.type == "linelist":
        return list(value) != list(key.default)
    return bool(value) if key.type == "paths" else str(value) != str(key.default)


# Markers: -m mlrepro_latency, -m "mlrepro_torch and mlrepro_cpu", -m "not mlrepro".
MARKER = "mlrepro"
KINDS = ("accuracy", "latency", "determinism")


def register_markers(config: pytest.Config) -> None:
    """Register every marker the items carry, so that ``--strict-markers`` accepts them."""
    config.addinivalue_line("markers", f"{MARKER}: every item of pytest-mlrepro")
    for kind in KINDS:
        config.addinivalue_line("markers", f"{MARKER}_{kind}: pytest-mlrepro {kind} items")
    for framework in FRAMEWORKS:
        config.addinivalue_line(
            "markers", f"{MARKER}_{framework}: pytest-mlrepro items of {framework} manifests"
        )
    for device in DEVICES:
        config.addinivalue_line("markers", f"{MARKER}_{device}: pytest-mlrepro items on {device}")
