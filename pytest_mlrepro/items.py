"""pytest items: one file per manifest, one accuracy item per device."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, NoReturn

import pytest

from . import golden as golden_store
from .data import resolve_dataset
from .determinism import controls_in_force
from .errors import GoldenError, ManifestError, MlreproError, Unavailable
from .evaluation import evaluate
from .fingerprint import environment
from .metrics import compare
from .progress import TerminalProgress
from .report import explain
from .runners import check_framework, cuda_present
from .settings import Settings
from .spec import DEVICES, FRAMEWORKS, Manifest, load_manifest

settings_key = pytest.StashKey[Settings]()
PROPERTY_PREFIX = "mlrepro."


class MlreproFailure(Exception):
    """A verdict or an error whose text is the whole story: shown without a traceback."""


def _is_strict(config: pytest.Config) -> bool:
    return bool(config.getoption("mlrepro_strict"))


def option_or_ini(config: pytest.Config, name: str) -> object:
    """A setting from its command-line twin (dest ``name``) when given, else its ini key."""
    given = config.getoption(name, default=None)
    return config.getini(name) if given is None else given


def _count(config: pytest.Config, name: str) -> int:
    """A non-negative count from an option, else from its ini key (a bad value is a usage error)."""
    value = option_or_ini(config, name)
    try:
        count = int(str(value).strip())
    except ValueError:
        raise pytest.UsageError(f"{name}: expected a whole number, got {value!r}") from None
    if count < 0:
        raise pytest.UsageError(f"{name}: must not be negative, got {count}")
    return count


def probe_count(config: pytest.Config) -> int:
    """Samples re-run per counterfactual when a drift is diagnosed (0: no counterfactuals)."""
    return _count(config, "mlrepro_probes")


def diagnosis_probes(config: pytest.Config) -> int | None:
    """Samples re-run per counterfactual on a failure; None when diagnosis is turned off."""
    enabled = str(config.getini("mlrepro_diagnose")).strip().lower() not in ("false", "0", "no")
    if config.getoption("mlrepro_no_diagnose") or not enabled:
        return None
    return probe_count(config)


def step_probes(config: pytest.Config) -> int:
    """Samples whose per-step fingerprints a recorded golden keeps (0: none)."""
    return _count(config, "mlrepro_step_probes")


def display_path(config: pytest.Config, path: Path) -> str:
    try:
        return path.relative_to(config.rootpath).as_posix()
    except ValueError:
        return str(path)


def devices_for(manifest: Manifest, config: pytest.Config) -> list[str]:
    choice = str(config.getoption("mlrepro_device") or "auto")
    if choice == "auto":
        present = [d for d in manifest.runtime.devices if d == "cpu" or cuda_present()]
        # A cuda-only manifest on a machine without a GPU gets its item, which then skips.
        return present or list(manifest.runtime.devices)
    wanted = [d.strip() for d in choice.split(",") if d.strip()]
    return [d for d in manifest.runtime.devices if d in wanted]


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


def markers_for(item: pytest.Item, manifest: Manifest | None) -> list[str]:
    """``mlrepro`` on every item; its kind, framework and device where it has them."""
    names = [MARKER]
    kind = getattr(item, "kind", None)
    if kind in KINDS:
        names.append(f"{MARKER}_{kind}")
    if manifest is not None:
        names.append(f"{MARKER}_{manifest.framework.name}")
    device = getattr(item, "device", None)
    if device in DEVICES:
        names.append(f"{MARKER}_{device}")
    return names


def is_mlrepro_item(item: pytest.Item) -> bool:
    return isinstance(item.parent, ManifestFile)


class ManifestFile(pytest.File):
    def collect(self) -> list[pytest.Item]:
        manifest, items = self._load()
        for item in items:  # the one place items get their markers, whichever factory made them
            for name in markers_for(item, manifest):
                item.add_marker(name)
        return items

    def _load(self) -> tuple[Manifest | None, list[pytest.Item]]:
        shown = display_path(self.config, self.path)
        try:
            manifest = load_manifest(self.path, display=shown)
        except ManifestError as exc:
            return None, [ManifestErrorItem.from_parent(self, name="manifest", error=exc)]
        devices = devices_for(manifest, self.config)
        return manifest, [item for f in ITEM_FACTORIES for item in f(self, manifest, devices)]


def accuracy_items(
    parent: ManifestFile, manifest: Manifest, devices: list[str]
) -> list[pytest.Item]:
    """One accuracy item per device; the first device's item is the one that records goldens."""
    return [
        AccuracyItem.from_parent(
            parent,
            name=f"accuracy[{device}]",
            manifest=manifest,
            device=device,
            records=(device == devices[0]),
        )
        for device in devices
    ]


ItemFactory = Callable[[ManifestFile, Manifest, list[str]], list[pytest.Item]]
# Each capability (accuracy, latency, determinism, ...) adds its items for a manifest here.
ITEM_FACTORIES: list[ItemFactory] = [accuracy_items]


class ManifestErrorItem(pytest.Item):
    """Stands for a manifest that does not load: fails with file:line:field, the rest still run."""

    def __init__(self, *, error: ManifestError, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error = error

    def runtest(self) -> None:
        self.user_properties.append((PROPERTY_PREFIX + "manifest", self.error.file))
        self.user_properties.append((PROPERTY_PREFIX + "verdict", "invalid manifest"))
        raise MlreproFailure(str(self.error))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        return str(excinfo.value)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, (self.error.line or 1) - 1, f"{self.name} (invalid manifest)"


class AccuracyItem(pytest.Item):
    """Runs the model over the data set; compares accuracy and per-sample results to the golden."""

    kind: ClassVar[str] = "accuracy"

    def __init__(self, *, manifest: Manifest, device: str, records: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.manifest = manifest
        self.device = device
        self.records = records  # only one device's item writes the (device-independent) golden

    def _prop(self, key: str, value: Any) -> None:
        self.user_properties.append((PROPERTY_PREFIX + key, value))

    def _unavailable(self, exc: Unavailable) -> NoReturn:
        if _is_strict(self.config):
            self._prop("verdict", "unavailable (strict)")
            raise MlreproFailure(f"{exc} (a failure because of --mlrepro-strict)")
        self._prop("verdict", "skipped")
        pytest.skip(str(exc))

    def _evaluate(self, runs: int = 1) -> tuple[list[Any], Any]:
        """The manifest evaluated ``runs`` times (model loaded afresh each time) and its data set.
        An absent piece skips the item (fails it under --mlrepro-strict); any other error of the
        tool fails it with its message."""
        m, settings = self.manifest, self.config.stash[settings_key]
        try:
            self._prop("framework_version", check_framework(m))
            dataset = resolve_dataset(m, settings)
            with TerminalProgress(self.config, len(dataset.samples)) as progress:
                done = [evaluate(m, self.device, settings, dataset, progress) for _ in range(runs)]
            return done, dataset
        except Unavailable as exc:
            self._unavailable(exc)
        except MlreproError as exc:
            self._prop("verdict", "error")
            raise MlreproFailure(str(exc)) from exc

    def runtest(self) -> None:
        self._evaluation: tuple[Any, Any] | None = None  # (Evaluation, dataset) once it ran
        self._run_against_golden()
        if self.manifest.reference is not None and self._evaluation is not None:
            self._check_reference(*self._evaluation)

    def _check_reference(self, result: Any, dataset: Any) -> None:
        """The cross-runtime check (reference.py): this run against the reference's golden."""
        from .reference import ReferenceGoldenMissing, check_reference

        shown = display_path(self.config, self.path)
        try:
            check = check_reference(
                self.manifest, self.config.stash[settings_key], result.results, result.scores
            )
        except ReferenceGoldenMissing as exc:
            if self.config.getoption("mlrepro_update"):  # recording both: no failure for order
                self._prop("reference_verdict", f"not checked: {exc}")
                return
            self._prop("verdict", "error")
            raise MlreproFailure(f"{shown}: {exc}") from None
        except MlreproError as exc:
            self._prop("verdict", "error")
            raise MlreproFailure(str(exc)) from exc
        for key, value in check.properties():
            self._prop(key, value)
        self._prop("reference_verdict", "agree" if check.ok else "disagree")
        if not check.ok:
            self._prop("verdict", "reference disagreement")
            raise MlreproFailure(f"{shown} [{self.device}]: " + check.explain(dataset.class_names))

    def _run_against_golden(self) -> None:
        m, settings = self.manifest, self.config.stash[settings_key]
        shown = display_path(self.config, self.path)
        update = bool(self.config.getoption("mlrepro_update"))
        self._prop("manifest", m.name)
        self._prop("device", self.device)
        self._prop("framework", m.framework.name)
        (result,), dataset = self._evaluate()
        self._evaluation = (result, dataset)
        now = result.results
        for key, value in (
            ("samples", len(now.ids)),
            ("top1", round(now.top1, 4)),
            ("top5", round(now.top5, 4)),
            ("timing.seconds", round(result.seconds, 3)),
            ("controls", controls_in_force(m, result.runner_info)),
            ("data", result.dataset_origin),
        ):
            self._prop(key, value)
        path = golden_store.golden_path(m, settings)
        shown_golden = display_path(self.config, path)
        record_cmd = f"pytest {shown} --mlrepro-update"
        try:
            golden = golden_store.read(path)
        except GoldenError as exc:
            exc = GoldenError(str(exc).replace(str(path), shown_golden))
            if not (update and self.records):
                self._prop("verdict", "error")
                raise MlreproFailure(
                    f"{exc}\n(only --mlrepro-update replaces it: {record_cmd})"
                ) from None
            golden = None
        if golden is None:
            if update and self.records:
                self._record(path, result, "recorded")
                return
            self._prop("verdict", "no golden")
            raise MlreproFailure(f"no golden at {shown_golden}: record one with\n  {record_cmd}")
        comparison = compare(golden.results, now, result.scores, m.tolerances)
        self._prop("agreement", round(comparison.agreement, 6))
        if math.isfinite(comparison.max_score_diff):
            self._prop("max_score_diff", float(f"{comparison.max_score_diff:.3g}"))
        self._prop("golden", shown_golden)
        if comparison.ok:
            if update and self.records and not golden_store.manifest_is_current(golden.manifest, m):
                self._record(path, result, "updated (manifest changed)")
            elif update and self.records and not self._probes_up_to_date(golden, result):
                self._record(path, result, "updated (step probes added)")
            else:
                self._prop("verdict", "pass")
            return
        if update and self.records:
            self._record(path, result, "updated")
            return
        self._prop("verdict", "drift")
        classes = dataset.class_names
        raise MlreproFailure(
            f"{shown} [{self.device}]: "
            + explain(comparison, shown_golden, classes, record_cmd)
            + self._diagnosis(golden, comparison, result)
        )

    def _diagnosis(self, golden: Any, comparison: Any, result: Any) -> str:
        """The drift's likely cause (diagnose.py), appended to the failure; "" when turned off."""
        probes = diagnosis_probes(self.config)
        if probes is None:
            return ""
        from .diagnose import explain as explain_drift

        text, cause = explain_drift(self.manifest, golden, comparison, result, probes=probes)
        self._prop("diagnosis", cause)
        return "\n\n" + text

    def _step_probes(self, result: Any) -> dict[str, Any] | None:
        """Per-step fingerprints for the golden; None if they cannot be made (never costs the
        golden itself)."""
        from . import probes

        try:
            return probes.record(
                self.manifest.input.preprocess, result.samples, step_probes(self.config)
            )
        except (MlreproError, OSError):
            return None

    def _probes_up_to_date(self, golden: Any, result: Any) -> bool:
        from . import probes

        n = step_probes(self.config)
        return probes.up_to_date(golden.probes, self.manifest.input.preprocess, result.samples, n)

    def _record(self, path: Path, result: Any, action: str) -> None:
        env = environment(result.runner_info)
        golden_store.write(
            path,
            golden_store.Golden(
                name=self.manifest.name,
                manifest=self.manifest.normalized(),
                environment=env,
                results=result.results,
                probes=self._step_probes(result),
            ),
        )
        self._prop("verdict", f"golden {action}")
        self._prop("golden", display_path(self.config, path))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, MlreproFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, 0, f"{self.manifest.name}::{self.name}"
