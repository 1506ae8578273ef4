"""pytest items: one file per manifest, one accuracy item per device."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, NoReturn

import pytest

from .. import goldens as golden_store
from ..data import Shard, resolve_dataset
from ..errors import (
    BuildMismatch,
    GoldenError,
    ManifestError,
    MlreproError,
    NonFiniteOutputs,
    OutputError,
    Unavailable,
)
from ..evaluation import controls_in_force, evaluate
from ..fingerprint import environment
from ..goldens import DataChange, accuracy_decision, compare, data_change, score_diffs
from ..manifest import DEVICES, FRAMEWORKS, Manifest, load_manifest
from ..report import explain
from ..results import Part, manifest_identity, shard_results, shard_verdict
from ..runners import check_framework, cuda_present, load_runner
from ..settings import Settings
from ._progress import TerminalProgress
from ._session import PROPERTY_PREFIX, option_or_ini, session_of
from ._shards import item_shards, run_shard, shard_item_name

settings_key = pytest.StashKey[Settings]()


class MlreproFailure(Exception):
    """A verdict or an error whose text is the whole story: shown without a traceback."""


def _is_update(config: pytest.Config) -> bool:
    return bool(config.getoption("mlrepro_update"))


@dataclass(frozen=True)
class ReferenceOutcome:
    """What the reference check of one run found: ``agrees`` None when it could not run;
    ``text`` the failure (or why it could not run); ``error``: a failure in its own right."""

    agrees: bool | None
    text: str
    error: bool = False
    # The manifest's ``reference:`` itself is invalid (outside the project, no such manifest):
    # the manifest is wrong, so nothing it produced is recorded. A reference that is valid but
    # cannot be checked now (its golden is broken) is an ``error`` that records all the same.
    refused: bool = False


def is_strict(config: pytest.Config) -> bool:
    """Whether a missing framework, data set or device fails an item (--mlrepro-strict)."""
    return bool(config.getoption("mlrepro_strict"))


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


def counterfactual_samples(config: pytest.Config) -> int:
    """Samples re-run per counterfactual when a drift is diagnosed (0: no counterfactuals)."""
    return _count(config, "mlrepro_counterfactual_samples")


def diagnosis_probes(config: pytest.Config) -> int | None:
    """Samples re-run per counterfactual on a failure; None when diagnosis is turned off."""
    enabled = str(config.getini("mlrepro_diagnose")).strip().lower() not in ("false", "0", "no")
    if config.getoption("mlrepro_no_diagnose") or not enabled:
        return None
    return counterfactual_samples(config)


def fingerprint_samples(config: pytest.Config) -> int:
    """Samples whose per-step fingerprints a recorded golden keeps (0: none)."""
    return _count(config, "mlrepro_fingerprint_samples")


def display_path(config: pytest.Config, path: Path) -> str:
    try:
        return path.relative_to(config.rootpath).as_posix()
    except ValueError:
        return str(path)


def devices_for(manifest: Manifest, config: pytest.Config) -> list[str]:
    choice = str(config.getoption("mlrepro_device") or "auto")
    if choice == "auto":
        present: list[str] = [d for d in manifest.runtime.devices if d == "cpu" or cuda_present()]
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
        settings = self.config.stash[settings_key]
        try:
            manifest = load_manifest(self.path, display=shown)
            # An invalid golden: path (outside the accuracy namespace) is an invalid manifest.
            golden = golden_store.golden_path(manifest, settings)
        except ManifestError as exc:
            return None, [ManifestErrorItem.from_parent(self, name="manifest", error=exc)]
        # The golden store's audit: this manifest's golden is in use, whatever items it gets.
        session_of(self.config).audit.claims[self.path] = (shown, golden, manifest.name)
        devices = devices_for(manifest, self.config)
        made = self.config.hook.pytest_mlrepro_make_items(
            parent=self, manifest=manifest, devices=devices
        )
        items = [item for items in made for item in items]
        return manifest, sorted(items, key=_kind_order)


def _kind_order(item: pytest.Item) -> int:
    """Items by kind: accuracy, latency, determinism, then the kinds of other plugins."""
    kind = getattr(item, "kind", None)
    return KINDS.index(kind) if kind in KINDS else len(KINDS)


def accuracy_items(
    parent: ManifestFile, manifest: Manifest, devices: list[str]
) -> list[pytest.Item]:
    """One accuracy item per device; the first device's item is the one that records goldens.
    With ``mlrepro_shards = K`` (K > 1), K shard items per device instead, merged into the
    device's verdict by the session (``_shards.py``)."""
    count = item_shards(parent.config)
    if count > 1:
        return [
            AccuracyItem.from_parent(
                parent,
                name=shard_item_name(device, index, count),
                manifest=manifest,
                device=device,
                records=False,
                shard=Shard(index, count),
                split_of=f"{parent.nodeid}::accuracy[{device}]",
            )
            for device in devices
            for index in range(1, count + 1)
        ]
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


class ManifestItem(pytest.Item):
    """What every item of a manifest shares: its manifest and device, its properties, and a
    failure shown as its message alone (an :class:`MlreproFailure` is the whole story)."""

    def __init__(self, *, manifest: Manifest, device: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.manifest = manifest
        self.device = device

    def add_property(self, key: str, value: Any) -> None:
        """Record ``mlrepro.<key>`` in the item's user properties (the results file, JUnit XML
        and the session's tables read them)."""
        self.user_properties.append((PROPERTY_PREFIX + key, value))

    def add_manifest_identity(self) -> None:
        """The manifest's file (relative to the rootdir) and the sha256 of its normalised
        content: rows of the same pipeline are recognisable across machines (results files)."""
        self.add_property("manifest_file", display_path(self.config, self.path))
        for key, value in manifest_identity(self.manifest.normalized()).items():
            self.add_property(key, value)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, MlreproFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, 0, f"{self.manifest.name}::{self.name}"


class AccuracyItem(ManifestItem):
    """Runs the model over the data set; compares accuracy and per-sample results to the golden."""

    kind: ClassVar[str] = "accuracy"

    def __init__(
        self,
        *,
        manifest: Manifest,
        device: str,
        records: bool,
        shard: Shard | None = None,
        split_of: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(manifest=manifest, device=device, **kwargs)
        self.records = records  # only one device's item writes the (device-independent) golden
        # The samples evaluated: a shard item's shard, else the run's (--mlrepro-shard), else all.
        self.shard = shard if shard is not None else run_shard(self.config)
        self.split_of = split_of  # a shard item's whole item (its node id)
        self.per_sample: dict[str, Any] | None = None  # results.Part as JSON, once evaluated
        self.classes: tuple[str, ...] | None = None  # the data set's class names, once resolved
        self._data_files: dict[str, str] = {}  # {sample id: sha256} of the data, once resolved
        self._written: str | None = None  # what _record wrote, in words, once it did

    @property
    def timeout_factor(self) -> int:
        """How many evaluations the item makes (its time limit is per evaluation)."""
        return 1

    @property
    def split(self) -> dict[str, Any] | None:
        """For a shard item: the whole item it is a part of (``_shards.Split``), else None."""
        if self.split_of is None or self.shard is None:
            return None
        return {
            "nodeid": self.split_of,
            "index": self.shard.index,
            "count": self.shard.count,
            "manifest_file": display_path(self.config, self.path),
            "classes": None if self.classes is None else list(self.classes),
        }

    def _identify(self) -> None:
        """What a results file needs to tell this evaluation from others: the manifest's file
        and digest, the tolerances and the shard (the hardware key: :meth:`_hardware`)."""
        self.add_manifest_identity()
        tol = self.manifest.tolerances
        self.add_property(
            "tolerances",
            {"top1": tol.top1, "top5": tol.top5, "agreement": tol.agreement, "score": tol.score},
        )
        if self.shard is not None:
            self.add_property("shard", self.shard.as_json())

    def _hardware(self, framework_version: str) -> None:
        """The hardware key of this evaluation (its fields, and the slug that names it)."""
        from ..fingerprint import hardware_key

        m = self.manifest
        key = hardware_key(
            self.device,
            m.framework.name,
            framework_version,
            m.runtime.intra_op_threads,
            m.runtime.inter_op_threads,
        )
        self.add_property("hardware_key", key.fields)
        self.add_property("hardware_slug", key.slug)

    def _unavailable(self, exc: Unavailable) -> NoReturn:
        if is_strict(self.config):
            self.add_property("verdict", "unavailable (strict)")
            raise MlreproFailure(f"{exc} (a failure because of --mlrepro-strict)")
        self.add_property("verdict", "skipped")
        pytest.skip(str(exc))

    def _evaluate(self, runs: int = 1, keep: Any = None) -> tuple[list[Any], Any]:
        """The manifest evaluated ``runs`` times (model loaded afresh each time) and its data set.
        ``keep``: streamed, keeping the scores at these results' top-k classes (``evaluate``);
        None keeps every score. An absent piece skips the item (fails it under
        --mlrepro-strict); any other error of the tool fails it with its message."""
        m, settings = self.manifest, self.config.stash[settings_key]
        try:
            version = check_framework(m)
            self.add_property("framework_version", version)
            self._hardware(version)
            dataset = resolve_dataset(m, settings, self.shard)
            if runs == 0:  # the model verified and loaded (its errors first), nothing run
                load_runner(m, self.device, settings)
                return [], dataset
            with TerminalProgress(self.config, len(dataset.samples)) as progress:
                done = [
                    evaluate(m, self.device, settings, dataset, progress, keep=keep)
                    for _ in range(runs)
                ]
            return done, dataset
        except Unavailable as exc:
            self._unavailable(exc)
        except NonFiniteOutputs as exc:
            # The model's own failure, not a drift to diagnose: nothing is compared or recorded.
            self.add_property("verdict", "non-finite outputs")
            self.add_property("diagnosis", "the model produced non-finite outputs")
            self.add_property("nonfinite_samples", len(exc.ids))
            shown = display_path(self.config, self.path)
            raise MlreproFailure(f"{shown} [{self.device}]: {exc.message}") from None
        except BuildMismatch as exc:
            self.add_property("verdict", "error")
            raise MlreproFailure(self._explain_build(exc)) from exc
        except MlreproError as exc:
            self.add_property("verdict", "error")
            raise MlreproFailure(str(exc)) from exc

    def _compared_with(self, path: Path) -> tuple[golden_store.Results, ...]:
        """The results this run's scores will be compared with, read before it runs so that the
        evaluation streams (keeps, of each sample's scores, its top-k and the scores at these
        results' top-k classes). Read leniently: a golden that cannot be read is compared with
        nothing, and its error is reported where it is read for the verdict."""
        settings = self.config.stash[settings_key]
        kept: list[golden_store.Results] = []
        try:
            golden = golden_store.read(path, settings.golden_dir)
        except (GoldenError, OSError):
            golden = None
        if golden is not None:
            kept.append(golden.results)
        reference = golden_store.reference_results(self.manifest, settings)
        if reference is not None:
            kept.append(reference)
        return tuple(kept)

    def _explain_build(self, exc: BuildMismatch) -> str:
        """The build's mismatch, compared with the machine the golden was recorded on."""
        from ..diagnosis import explain_build_mismatch

        settings = self.config.stash[settings_key]
        path = golden_store.golden_path(self.manifest, settings)
        try:
            golden = golden_store.read(path, settings.golden_dir)
        except (GoldenError, OSError):
            golden = None
        env = golden.environment if golden is not None else None
        return explain_build_mismatch(exc, env, display_path(self.config, path))

    def runtest(self) -> None:
        self._run_against_golden()

    def _check_reference(self, result: Any) -> ReferenceOutcome | None:
        """The cross-runtime check (reference.py): this run against the reference's golden.
        Never raises: the caller decides what its outcome does to the verdict (a drift still
        shows it, an update is refused on a disagreement). None when no reference is declared."""
        if self.manifest.reference is None:
            return None
        from ..goldens import ReferenceGoldenMissing, check_reference

        shown = display_path(self.config, self.path)
        try:
            check = check_reference(
                self.manifest, self.config.stash[settings_key], result.results, result.scores
            )
        except ReferenceGoldenMissing as exc:
            self.add_property("reference_verdict", f"not checked: {exc}")
            # Recording both in one run: the reference's golden may come after this item.
            return ReferenceOutcome(None, f"{shown}: {exc}", error=not _is_update(self.config))
        except ManifestError as exc:
            self.add_property("reference_verdict", "error")
            return ReferenceOutcome(None, str(exc), error=True, refused=True)
        except MlreproError as exc:
            self.add_property("reference_verdict", "error")
            return ReferenceOutcome(None, str(exc), error=True)
        for key, value in check.properties():
            self.add_property(key, value)
        self.add_property("reference_verdict", "agree" if check.ok else "disagree")
        text = "" if check.ok else f"{shown} [{self.device}]: " + check.explain(self.classes)
        return ReferenceOutcome(check.ok, text)

    def _finish_reference(self, ref: ReferenceOutcome | None) -> None:
        """After the golden comparison passed (or the golden was written): the reference's
        verdict. A golden written despite a disagreement keeps its "golden ..." verdict."""
        if ref is None or (ref.agrees is not False and not ref.error):
            return
        if self._written is not None:  # the verdict stays "golden ...": it was written
            raise MlreproFailure(f"{self._written}\n{ref.text}")
        if ref.error:
            self.add_property("verdict", "error")
            raise MlreproFailure(ref.text)
        self.add_property("verdict", "reference disagreement")
        raise MlreproFailure(ref.text)

    def _fail(self, verdict: str, text: str, ref: ReferenceOutcome | None) -> NoReturn:
        """Fail with ``text``, followed by the reference check's outcome when there is one."""
        self.add_property("verdict", verdict)
        if ref is not None and ref.text:
            text += "\n\nreference check:\n" + ref.text
        elif ref is not None and ref.agrees:
            text += "\n\nreference check: agrees with its reference"
        raise MlreproFailure(text)

    def _read_golden(
        self, path: Path, record_cmd: str, ref: ReferenceOutcome | None
    ) -> golden_store.Golden | None:
        """The golden at ``path``, validated and checked to be this manifest's. An invalid one
        fails the item (an update run replaces it: None); one recorded from another manifest
        that still claims it fails the item in every run."""
        m, settings = self.manifest, self.config.stash[settings_key]
        update = bool(self.config.getoption("mlrepro_update")) and self.records
        shown = display_path(self.config, self.path)
        shown_golden = display_path(self.config, path)
        try:
            golden = golden_store.read(path, settings.golden_dir)
            if golden is not None:
                golden_store.check_owner(golden, path, m, (str(path), shown))
        except golden_store.GoldenNotAFile as exc:
            self._fail("error", str(exc).replace(str(path), shown_golden), ref)
        except GoldenError as exc:
            if not update:
                self._fail(
                    "error",
                    f"{str(exc).replace(str(path), shown_golden)}\n"
                    f"(only --mlrepro-update replaces it: {record_cmd})",
                    ref,
                )
            return None
        if golden is None:
            return None
        other = golden_store.claimed_by_another(golden, path, m, settings)
        if other is not None:
            self._fail(
                "golden claimed",
                f"{shown}: its golden {shown_golden} was recorded from {other}, which still "
                f"claims it: two manifests named {m.name!r} cannot share one golden file (each "
                "--mlrepro-update would overwrite the other's results); give one of them "
                "another 'name' or a 'golden:' path. Nothing was written.",
                ref,
            )
        return golden

    def _run_against_golden(self) -> None:
        m, settings = self.manifest, self.config.stash[settings_key]
        shown = display_path(self.config, self.path)
        update = _is_update(self.config)
        self._written = None
        self.add_property("kind", "accuracy")
        self.add_property("manifest", m.name)
        self.add_property("device", self.device)
        self.add_property("framework", m.framework.name)
        self._identify()
        path = golden_store.golden_path(m, settings)
        if not (update and self.records) and not path.exists() and not path.is_symlink():
            # Nothing to compare with: said before the model runs over the whole data set (the
            # data and the model are still found, verified and loaded: runs=0). A golden that
            # exists but is broken still gets an evaluation, so that its failure shows this
            # run's numbers.
            _, dataset = self._evaluate(runs=0)
            self.add_property("samples", len(dataset.samples))
            record_cmd = f"pytest {shown} --mlrepro-update"
            self._fail(
                "no golden",
                f"no golden at {display_path(self.config, path)}: record one with\n"
                f"  {record_cmd}\n(the model was not run: there is nothing to compare with)",
                None,
            )
        (result,), dataset = self._evaluate(keep=self._compared_with(path))
        self.classes = dataset.class_names
        self._data_files = dataset.checksums
        now = result.results
        for key, value in (
            ("samples", len(now.ids)),
            ("top1", round(now.top1, 4)),
            ("top5", round(now.top5, 4)),
            ("timing.seconds", round(result.seconds, 3)),
            ("controls", controls_in_force(m, result.runner_info)),
            ("data", result.dataset_origin),
        ):
            self.add_property(key, value)
        if dataset.identity:  # the data set's version: shards merge only within one
            self.add_property("data_identity", dataset.identity)
        self.per_sample = Part(now, None, {}).to_json()  # compared with nothing, yet
        # Before any golden is written: an update that contradicts the reference is refused.
        if self.shard is None:
            ref = self._check_reference(result)
        else:
            # A reference check decides with tolerances over the whole data set: not a shard's.
            ref = None
            if m.reference is not None:
                self.add_property("reference_verdict", f"not checked in shard {self.shard}")
        path = golden_store.golden_path(m, settings)
        shown_golden = display_path(self.config, path)
        record_cmd = f"pytest {shown} --mlrepro-update"
        golden = self._read_golden(path, record_cmd, ref)
        if golden is not None and golden.digest is not None:
            # The golden's version: shards compared with two recordings never merge.
            self.add_property("golden_digest", golden.digest)
        writes = update and self.records
        if golden is None:
            decision = accuracy_decision(writes=writes, has_golden=False)
            if decision.action == "record":
                self._record(path, result, decision.reason, ref)
                self._finish_reference(ref)
                return
            self._fail(
                "no golden", f"no golden at {shown_golden}: record one with\n  {record_cmd}", ref
            )
        recorded_classes = int(golden.manifest["dataset"]["classes"])  # validated on reading
        classes_now = int(result.scores.shape[1])
        if recorded_classes != classes_now:
            # Nothing to compare sample by sample: the class indices mean other classes.
            self.add_property("golden", shown_golden)
            decision = accuracy_decision(writes=writes, has_golden=True, classes_match=False)
            if decision.action == "record":
                self._record(path, result, decision.reason, ref)
                self._finish_reference(ref)
                return
            self._fail(
                "drift",
                f"{shown} [{self.device}]: the golden {shown_golden} was recorded with "
                f"{recorded_classes} classes, the model now has {classes_now}: its results "
                "cannot be compared. If the change is intended, record a new golden:\n"
                f"  {record_cmd}",
                ref,
            )
        if self.shard is not None:  # the golden's samples of this shard, by the same rule
            golden = replace(golden, results=shard_results(golden.results, self.shard))
        comparison = compare(golden.results, now, result.scores, m.tolerances)
        diffs = score_diffs(golden.results, now, result.scores)
        self.per_sample = Part(now, golden.results, diffs).to_json()
        self.add_property("agreement", round(comparison.agreement, 6))
        self.add_property("golden_top1", round(comparison.golden_top1, 4))
        self.add_property("golden_top5", round(comparison.golden_top5, 4))
        if math.isfinite(comparison.max_score_diff):
            self.add_property("max_score_diff", float(f"{comparison.max_score_diff:.3g}"))
        self.add_property("golden", shown_golden)
        change = data_change(golden, now, self._data_files)
        if change.changed:
            self.add_property("data_changed", change.summary())
        if self.shard is not None:
            # A part: it failed above for its own errors; the tolerance verdict belongs to the
            # merge of all shards (mlrepro merge, or the session for a split item).
            self.add_property("verdict", shard_verdict(self.shard))
            return
        # What is out of date is asked only where the decision can depend on it (the step
        # fingerprints cost a pass of the probe samples through the pipeline).
        asks = writes and comparison.ok
        manifest_current = not asks or golden_store.manifest_is_current(golden.manifest, m)
        decision = accuracy_decision(
            writes=writes,
            has_golden=True,
            within_tolerance=comparison.ok,
            manifest_current=manifest_current,
            probes_current=not (asks and manifest_current)
            or self._probes_up_to_date(golden, result),
            data_current=not change.changed and golden.data == self._data_files,
            data_identity_recorded=golden.data is not None,
            manifest_file_current=not comparison.ok
            or golden.manifest_file == golden_store.manifest_file_of(self.path, settings),
            data_changed=change.changed,
        )
        if decision.action == "record":
            self._record(path, result, decision.reason, ref)
            self._finish_reference(ref)
            return
        if decision.action == "pass":
            self.add_property("verdict", "pass")
            self._finish_reference(ref)
            return
        from ._html import collect_drift  # the HTML report's pictures (only when one is asked)

        self._changed(comparison)
        collect_drift(self, golden, comparison, result)
        if comparison.ok:
            # Within every tolerance, but on other data: named as a data change, with the
            # samples concerned, never as a drift of the results.
            self._fail(
                "data changed",
                f"{shown} [{self.device}]: {change.summary()}.\n"
                f"  The results are within tolerance (top-1 {comparison.golden_top1:.2f} % → "
                f"{comparison.now_top1:.2f} %), but a golden measured on other data is not a "
                "comparison of the same thing.\n"
                f"If the change is intended, record a new golden:\n  {record_cmd}"
                + self._diagnosis(golden, comparison, result, change),
                ref,
            )
        self._fail(
            "drift",
            f"{shown} [{self.device}]: "
            + explain(
                comparison,
                shown_golden,
                self.classes,
                record_cmd,
                data=change.summary() if change.changed else "",
            )
            + self._diagnosis(golden, comparison, result, change),
            ref,
        )

    def _changed(self, comparison: Any) -> None:
        """What a results file keeps of a failed comparison: the levels outside tolerance and
        the samples whose top-1 changed (the report's table of them)."""
        from ..results import changed_samples

        self.add_property("outside_tolerance", list(comparison.failures))
        self.add_property("changed_samples", changed_samples(comparison.changed, self.classes))

    def _diagnosis(self, golden: Any, comparison: Any, result: Any, change: DataChange) -> str:
        """The drift's likely cause (diagnose.py), appended to the failure; "" when turned off."""
        probes = diagnosis_probes(self.config)
        if probes is None:
            return ""
        from ..diagnosis import explain as explain_drift
        from ..results import diagnosis_summary
        from ._html import keep_layers

        layers: list[tuple[int, str, float]] = []
        found: list[Any] = []
        text, cause = explain_drift(
            self.manifest, golden, comparison, result, probes=probes, data=change, layers=layers,
            found=found,
        )  # fmt: skip
        keep_layers(self, layers)
        self.add_property("diagnosis", cause)
        for d in found:  # the results file's summary of it (mlrepro merge, the report)
            self.add_property("diagnosis_summary", diagnosis_summary(d.lead, d.cause, d.sections))
        return "\n\n" + text

    def _step_probes(self, result: Any) -> dict[str, Any] | None:
        """Per-step fingerprints for the golden; None if they cannot be made (never costs the
        golden itself)."""
        from ..diagnosis import record_layer_fingerprints, record_step_fingerprints

        try:
            probes = record_step_fingerprints(
                self.manifest.input.preprocess, result.samples, fingerprint_samples(self.config)
            )
        except (MlreproError, OSError):
            return None
        if probes is not None and result.runner is not None:
            # The model-side twin: every layer's output on the first probes (optional: a model
            # whose layers cannot be traced records none).
            layers = record_layer_fingerprints(
                result.runner, self.manifest, result.samples, probes.get("samples", [])
            )
            if layers is not None:
                probes["layers"] = layers
        return probes

    def _probes_up_to_date(self, golden: Any, result: Any) -> bool:
        from ..diagnosis import step_fingerprints_up_to_date

        n = fingerprint_samples(self.config)
        steps = self.manifest.input.preprocess
        return step_fingerprints_up_to_date(golden.probes, steps, result.samples, n)

    def _record(
        self, path: Path, result: Any, action: str, ref: ReferenceOutcome | None = None
    ) -> None:
        """Write the golden, and say so in the verdict. Results that contradict the manifest's
        own reference are not written unless --mlrepro-update-despite-reference asks for it."""
        shown, shown_golden = display_path(self.config, self.path), display_path(self.config, path)
        if ref is not None and ref.refused:
            # The reference is refused (outside the project, not found): the manifest is
            # wrong, and nothing it produced is recorded, as for a refused model.
            verb = "recorded" if action == "recorded" else "updated"
            self.add_property("verdict", "error")
            raise MlreproFailure(
                f"{ref.text}\n\n{shown} [{self.device}]: golden not {verb} ({shown_golden} is "
                "left as it was): the manifest's reference must be usable first"
            )
        if ref is not None and ref.agrees is False:
            if not self.config.getoption("mlrepro_update_despite_reference", False):
                verb = "recorded" if action == "recorded" else "updated"
                self.add_property("verdict", f"reference disagreement (golden not {verb})")
                raise MlreproFailure(
                    f"{ref.text}\n\n{shown} [{self.device}]: golden not {verb} ({shown_golden} "
                    "is left as it was):\n  the results disagree with the manifest's reference. "
                    "If they are right and the reference is not,\n  record them anyway with\n"
                    f"    pytest {shown} --mlrepro-update --mlrepro-update-despite-reference"
                )
            action += " despite reference disagreement"
        env = environment(result.runner_info)
        settings = self.config.stash[settings_key]
        golden = golden_store.Golden(
            name=self.manifest.name,
            manifest=self.manifest.normalized(),
            environment=env,
            results=result.results,
            probes=self._step_probes(result),
            data=dict(sorted(self._data_files.items())),
            manifest_file=golden_store.manifest_file_of(self.path, settings),
        )
        try:
            golden_store.write(path, golden, settings.golden_dir)
        except OutputError as exc:
            self.add_property("verdict", "error")
            raise MlreproFailure(str(exc).replace(str(path), shown_golden)) from None
        self._written = f"{shown} [{self.device}]: golden {action}: {shown_golden}"
        self.add_property("verdict", f"golden {action}")
        self.add_property("golden", shown_golden)
