"""The accuracy item: runs the model over the data set (or its shard of it) and compares top-1,
top-5 and the per-sample results with the manifest's golden (recording it under
``--mlrepro-update``), and with its reference manifest's golden when it declares one."""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, NoReturn

import pytest

from .. import goldens as golden_store
from ..data import ResolvedDataset, Shard
from ..diagnosis import (
    explain as explain_drift,
)
from ..diagnosis import (
    record_layer_fingerprints,
    record_step_fingerprints,
    step_fingerprints_up_to_date,
)
from ..errors import GoldenError, ManifestError, MlreproError, OutputError
from ..evaluation import (
    Evaluation,
    PreprocessingShare,
    Progress,
    controls_in_force,
    evaluate,
)
from ..fingerprint import environment
from ..goldens import (
    DataChange,
    ReferenceGoldenMissing,
    accuracy_decision,
    check_reference,
    compare,
    data_change,
    score_diffs,
)
from ..manifest import Manifest
from ..pipeline import Pipeline
from ..report import (
    classes_changed,
    data_changed,
    explain,
    explain_reference,
    golden_claimed,
    golden_unreadable,
    golden_written,
    no_golden,
    reference_disagreement_record,
    reference_refused_record,
    with_reference,
)
from ..results import Part, changed_samples, diagnosis_summary, shard_results, shard_verdict
from ._base import (
    PER_SAMPLE_ATTR,
    SPLIT_ATTR,
    MlreproFailure,
    diagnosis_probes,
    display_path,
    fingerprint_samples,
    is_update,
    item_shards,
    preprocessing_memory,
    settings_key,
    state_of,
)
from ._html import REPORT_ATTRIBUTE, collect_drift, drift_of, keep_layers
from ._item import EvaluatingItem


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


class AccuracyItem(EvaluatingItem):
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
        super().__init__(manifest=manifest, device=device, shard=shard, **kwargs)
        self.records = records  # only one device's item writes the (device-independent) golden
        self.split_of = split_of  # a shard item's whole item (its node id)
        self.per_sample: dict[str, Any] | None = None  # results.Part as JSON, once evaluated
        self.classes: tuple[str, ...] | None = None  # the data set's class names, once resolved
        self._data_files: dict[str, str] = {}  # {sample id: sha256} of the data, once resolved
        self._written: str | None = None  # what _record wrote, in words, once it did
        grouped = getattr(self.config.option, "loadgroup", False)
        if grouped and split_of is None:
            # pytest-xdist's --dist loadgroup sends the items of one group to one worker: the
            # items reading one data set then share their preprocessing (see preprocessing_use).
            # Not shard items: they are split to be spread over the workers.
            self.add_marker(pytest.mark.xdist_group(f"mlrepro-data-{manifest.dataset.name}"))

    @property
    def preprocessing_use(self) -> tuple[Hashable, Pipeline]:
        """This item's evaluation as the session's shared preprocessing plans it: the data it
        reads (data set and shard) and its pipeline. (The determinism item's runs each
        preprocess afresh, so that a nondeterministic step still shows.)"""
        return (self.manifest.dataset.name, str(self.shard)), self.manifest.pipeline

    def teardown(self) -> None:
        share = state_of(self.config).preprocessing
        if share is not None:  # run, failed or skipped: its use is over
            share.finished(*self.preprocessing_use)

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

    def report_attributes(self, when: str) -> dict[str, Any]:
        """Every report of a shard item: the whole item it is a part of. The call's report: the
        per-sample results, and the drifted item's pictures (when an HTML report is asked for)."""
        attributes: dict[str, Any] = {}
        if self.split is not None:
            attributes[SPLIT_ATTR] = self.split
        if when == "call":
            if self.per_sample is not None:
                attributes[PER_SAMPLE_ATTR] = self.per_sample
            drift = drift_of(self)
            if drift is not None:
                attributes[REPORT_ATTRIBUTE] = drift
        return attributes

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

    def runtest(self) -> None:
        self._run_against_golden()

    def _check_reference(self, result: Any) -> ReferenceOutcome | None:
        """The cross-runtime check (goldens/_reference.py): this run against the reference's golden.
        Never raises: the caller decides what its outcome does to the verdict (a drift still
        shows it, an update is refused on a disagreement). None when no reference is declared."""
        if self.manifest.reference is None:
            return None
        shown = display_path(self.config, self.path)
        try:
            check = check_reference(
                self.manifest, self.config.stash[settings_key], result.results, result.scores
            )
        except ReferenceGoldenMissing as exc:
            self.add_property("reference_verdict", f"not checked: {exc}")
            # Recording both in one run: the reference's golden may come after this item.
            return ReferenceOutcome(None, f"{shown}: {exc}", error=not is_update(self.config))
        except ManifestError as exc:
            self.add_property("reference_verdict", "error")
            return ReferenceOutcome(None, str(exc), error=True, refused=True)
        except MlreproError as exc:
            self.add_property("reference_verdict", "error")
            return ReferenceOutcome(None, str(exc), error=True)
        for key, value in check.properties():
            self.add_property(key, value)
        self.add_property("reference_verdict", "agree" if check.ok else "disagree")
        text = "" if check.ok else f"{self._where()}: " + explain_reference(check, self.classes)
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

    def _where(self) -> str:
        """The item as its failures name it: the manifest as shown, and the device."""
        return f"{display_path(self.config, self.path)} [{self.device}]"

    def _fail(self, verdict: str, text: str, ref: ReferenceOutcome | None) -> NoReturn:
        """Fail with ``text``, followed by the reference check's outcome when there is one."""
        self.add_property("verdict", verdict)
        if ref is not None:
            text = with_reference(text, ref.text, ref.agrees)
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
                error = str(exc).replace(str(path), shown_golden)
                self._fail("error", golden_unreadable(error, record_cmd), ref)
            return None
        if golden is None:
            return None
        other = golden_store.claimed_by_another(golden, path, m, settings)
        if other is not None:
            self._fail("golden claimed", golden_claimed(shown, shown_golden, other, m.name), ref)
        return golden

    def _run_against_golden(self) -> None:
        m, settings = self.manifest, self.config.stash[settings_key]
        shown = display_path(self.config, self.path)
        update = is_update(self.config)
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
            _, dataset = self._evaluate(None)
            self.add_property("samples", len(dataset.samples))
            record_cmd = f"pytest {shown} --mlrepro-update"
            self._fail(
                "no golden",
                no_golden(display_path(self.config, path), record_cmd, model_run=False),
                None,
            )
        keep = self._compared_with(path)
        m, device, settings = self.manifest, self.device, self.config.stash[settings_key]
        share, use = state_of(self.config).preprocessing, self.preprocessing_use
        shared = share.loader(*use) if share is not None and use is not None else None

        def run(dataset: ResolvedDataset, progress: Progress) -> Evaluation:
            return evaluate(m, device, settings, dataset, progress, keep=keep, shared=shared)

        result, dataset = self._evaluate(run)
        assert result is not None
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
            self._fail("no golden", no_golden(shown_golden, record_cmd), ref)
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
            text = classes_changed(
                self._where(), shown_golden, recorded_classes, classes_now, record_cmd
            )
            self._fail("drift", text, ref)
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
        self._changed(comparison)
        # The HTML report's pictures (only when one is asked for).
        collect_drift(self, golden, comparison, result)
        if comparison.ok:
            # Within every tolerance, but on other data: named as a data change, with the
            # samples concerned, never as a drift of the results.
            text = data_changed(
                self._where(),
                change.summary(),
                comparison.golden_top1,
                comparison.now_top1,
                record_cmd,
            )
            self._fail(
                "data changed", text + self._diagnosis(golden, comparison, result, change), ref
            )
        self._fail(
            "drift",
            f"{self._where()}: "
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

    def _diagnosis(self, golden: Any, comparison: Any, result: Any, change: DataChange) -> str:
        """The drift's likely cause (diagnosis/_explain.py), appended to the failure; "" when
        turned off."""
        probes = diagnosis_probes(self.config)
        if probes is None:
            return ""
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

    def _changed(self, comparison: Any) -> None:
        """What a results file keeps of a failed comparison: the levels outside tolerance and
        the samples whose top-1 changed (the report's table of them)."""
        self.add_property("outside_tolerance", list(comparison.failures))
        self.add_property("changed_samples", changed_samples(comparison.changed, self.classes))

    def _step_probes(self, result: Any) -> dict[str, Any] | None:
        """Per-step fingerprints for the golden; None if they cannot be made (never costs the
        golden itself)."""
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
                reference_refused_record(ref.text, self._where(), verb, shown_golden)
            )
        if ref is not None and ref.agrees is False:
            if not self.config.getoption("mlrepro_update_despite_reference", False):
                verb = "recorded" if action == "recorded" else "updated"
                self.add_property("verdict", f"reference disagreement (golden not {verb})")
                raise MlreproFailure(
                    reference_disagreement_record(
                        ref.text, self._where(), verb, shown_golden, shown
                    )
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
        self._written = golden_written(self._where(), action, shown_golden)
        self.add_property("verdict", f"golden {action}")
        self.add_property("golden", shown_golden)


def shard_item_name(device: str, index: int, count: int) -> str:
    return f"accuracy[{device}][shard{index}of{count}]"


def accuracy_items(
    parent: pytest.Collector, manifest: Manifest, devices: list[str]
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


def plan_preprocessing(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Plan the preprocessing shared by the accuracy items that will run (``items``, the
    deselected ones gone): only where two of them can share, and the budget allows any."""
    uses = [item.preprocessing_use for item in items if isinstance(item, AccuracyItem)]
    budget = preprocessing_memory(config)
    if len(uses) > 1 and budget > 0:
        share = state_of(config).preprocessing = PreprocessingShare(budget)
        share.plan(uses)
