"""One accuracy check from start to verdict: golden read, model evaluated, reference checked,
verdict decided (:func:`goldens.accuracy_decision`), golden recorded, a drift diagnosed."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from .. import goldens as golden_store
from .._phases import phase
from .._status import End, Status
from ..data import ResolvedDataset, Shard, resolve_dataset
from ..diagnosis import (
    DiagnosisWording,
    check_pixel_identity,
    diagnose,
    explain_class_count,
    record_layer_fingerprints,
    record_pixel_identity,
    record_step_fingerprints,
    step_fingerprints_up_to_date,
)
from ..errors import (
    BuildMismatch,
    GoldenError,
    ManifestError,
    MlreproError,
    NonFiniteOutputs,
    OutputError,
    Unavailable,
)
from ..evaluation import Evaluation, Progress, SharedLoader, controls_in_force, evaluate
from ..fingerprint import environment, hardware_key
from ..goldens import (
    Comparison,
    DataChange,
    Golden,
    ReferenceCheck,
    ReferenceGoldenMissing,
    accuracy_decision,
    check_reference,
    compare,
    data_change,
    paired_rows,
    score_diffs,
)
from ..manifest import Manifest
from ..results import (
    Part,
    Row,
    Timing,
    changed_samples,
    diagnosis_summary,
    shard_results,
    shard_verdict,
)
from ..runners import check_framework, load_runner
from ..settings import Settings
from ._enrich import enrich

# A note of the run (an enrichment, or why not; a byte change that is no data change) or a piece of
# evidence, as its kind and facts, worded by report/ (AccuracyRequest.words).
Note = tuple[str, ...]

Progressing = Callable[[int], contextlib.AbstractContextManager[Progress]]
"""The item's progress display over this many samples (the terminal's, under pytest)."""

Reason = Literal[
    "passed",  # passed, or a golden written
    "no golden",  # nothing to compare with (``model_run``: whether the model ran all the same)
    "golden not a file",  # a symlink, folder...: never replaced by an update (``message``)
    "golden unreadable",  # invalid, outside an update (``message``)
    "golden claimed",  # recorded from another manifest that still claims it (``claimed_by``)
    "classes changed",  # the class count is not the golden's (``recorded_classes``...)
    "data changed",  # within tolerance, on other data (``comparison``, ``change``, ``diagnosis``)
    "drift",  # outside tolerance (``comparison``, ``change``, ``diagnosis``)
    "reference refused",  # not recorded: the manifest's reference is unusable (``action``)
    "reference disagreement, not recorded",  # not recorded: the reference disagrees (``action``)
    "golden not written",  # the golden could not be written (``message``)
    "reference error",  # passed, but the reference check could not run
    "reference disagreement",  # passed, but the reference disagrees
    "written, reference failed",  # the golden written (``action``); the reference check failed
    "unavailable",  # a framework, data set or device missing (``message``): skipped
    "non-finite outputs",  # the model's own failure, nothing compared (``message``)
    "build mismatch",  # the framework's build is not the model's (``build``)
    "error",  # any other error of the tool (``message``)
]
# Verdict names (categories).
NOT_A_FILE: Reason = "golden not a file"
NOT_ENRICHED = "golden not enriched"
DESPITE_REFERENCE = " despite reference disagreement"


@dataclass(frozen=True)
class ReferenceOutcome:
    """The check when it ran (``check``), else why not (``problem``); ``error``: a failure."""

    check: ReferenceCheck | None = None
    problem: str = ""
    # The reference manifest has no golden yet: its text names this manifest.
    missing: bool = False
    error: bool = False
    # The manifest's ``reference:`` itself is invalid (outside the project, no such manifest):
    # the manifest is wrong, so nothing it produced is recorded. A reference that is valid but
    # cannot be checked now (its golden is broken) is an ``error`` that records all the same.
    refused: bool = False

    @property
    def agrees(self) -> bool | None:
        """None when the check could not run."""
        return None if self.check is None else self.check.ok


@dataclass(frozen=True)
class Drifted:
    """What the HTML report's drift pictures are made from: the golden, this run, the layer rows."""

    golden: Golden
    result: Evaluation
    layers: list[tuple[int, str, float]] = field(default_factory=list)


@dataclass(frozen=True)
class AccuracyRequest:
    """What one accuracy item asks: manifest, device, shard, settings and what it may write."""

    manifest: Manifest
    device: str
    settings: Settings
    shard: Shard | None
    update: bool  # --mlrepro-update
    records: bool  # this device's item writes the (device-independent) golden
    manifest_path: Path
    shown: Callable[[Path], str]  # a path as the run shows it
    progress: Progressing
    diagnosis_wording: DiagnosisWording  # a drift's diagnosis in words: report.DIAGNOSIS_WORDING
    words: Callable[[Note], str]  # the notes and enrichment in words: report.accuracy_words
    head: Row  # the row's first fields: kind, manifest, device, framework, manifest identity
    despite_reference: bool = False  # --mlrepro-update-despite-reference
    diagnosis_probes: int | None = None  # samples re-run per counterfactual; None: no diagnosis
    fingerprint_samples: int = 0  # samples whose per-step fingerprints a recorded golden keeps
    shared: SharedLoader | None = None  # the session's shared preprocessing for this evaluation
    enrich: bool = False  # --mlrepro-enrich: a reproduced golden gains the evidence it lacks
    # --mlrepro-strict: a missing piece fails the item, and any byte change of the data fails,
    # even one that decodes to the golden's pixels.
    strict: bool = False


@dataclass(frozen=True)
class AccuracyOutcome:
    """How an accuracy item ends and why, its typed ``row`` and the facts a failure's text needs;
    ``interrupted`` (the time limit, Ctrl-C) is raised again by the caller once it has the row."""

    row: Row
    status: Status | None = "passed"
    end: End = "pass"
    reason: Reason = "passed"
    verdict: str = ""  # the last verdict the check gave
    interrupted: BaseException | None = None
    build: BuildMismatch | None = None
    per_sample: dict[str, Any] | None = None  # results.Part as JSON, once evaluated
    classes: tuple[str, ...] | None = None  # the data set's class names, once resolved
    drifted: Drifted | None = None
    # The facts of the text.
    manifest_shown: str = ""
    device: str = ""
    name: str = ""  # the manifest's name
    golden_shown: str = ""
    model_run: bool = True
    message: str = ""
    claimed_by: str = ""
    recorded_classes: int = 0
    classes_now: int = 0
    comparison: Comparison | None = None
    change: DataChange | None = None
    diagnosis: str | None = None  # the diagnosis's text; None when diagnosis is turned off
    blamed: str | None = None  # the manifest field the diagnosis points at (Diagnosis.blamed)
    reference: ReferenceOutcome | None = None
    action: str = ""  # the golden's writing: "recorded", "updated (...)"...
    # Sentences for the run's notes (a passing item's too): an enrichment, or why not; a byte
    # change that is not a data change.
    notes: tuple[str, ...] = ()

    @property
    def verb(self) -> str:
        """What the golden's writing would have done: ``recorded`` or ``updated``."""
        return "recorded" if self.action == "recorded" else "updated"


class _Ended(Exception):
    """The check ended early (the outcome says how)."""


def run_accuracy(request: AccuracyRequest) -> AccuracyOutcome:
    """The accuracy check of one item (module docstring)."""
    run = _Run(request)
    try:
        run.run()
    except _Ended:
        pass
    except BaseException as exc:  # handed back, not lost: see AccuracyOutcome.interrupted
        return replace(run.outcome, row=run.row, status=None, interrupted=exc, notes=(*run.notes,))
    status = run.outcome.status
    if status == "passed":  # not failed: what passed
        status = "recorded" if run.written else "partial" if run.partial else "passed"
    row = replace(run.row, status=status, notes=tuple(run.notes))
    return replace(run.outcome, row=row, status=status, notes=row.notes)


def with_hardware(row: Row, manifest: Manifest, device: str) -> Row:
    """The row with its framework version and hardware key; raises (see :func:`stopped`)."""
    version = check_framework(manifest)
    rt = manifest.runtime
    key = hardware_key(
        device, manifest.framework.name, version, rt.intra_op_threads, rt.inter_op_threads
    )
    return replace(row, framework_version=version, hardware_key=key.fields, hardware_slug=key.slug)


def stopped(row: Row, exc: MlreproError, strict: bool) -> tuple[Reason, End, Row]:
    """A missing piece skips the item (fails if ``strict``); any other evaluation error fails it."""
    if isinstance(exc, Unavailable):
        verdict = "unavailable (strict)" if strict else "skipped"
        return "unavailable", "fail" if strict else "skip", replace(row, verdict=verdict)
    if isinstance(exc, NonFiniteOutputs):  # the model's own failure, not a drift to diagnose
        row = replace(row, nonfinite_samples=len(exc.ids))  # worded: report.stopped_diagnosis
        return "non-finite outputs", "fail", replace(row, verdict="non-finite outputs")
    reason: Reason = "build mismatch" if isinstance(exc, BuildMismatch) else "error"
    return reason, "fail", replace(row, verdict="error")


class _Run:
    """One check, its facts frozen into the record at its end, however early it ends."""

    def __init__(self, request: AccuracyRequest) -> None:
        self.r = request
        self.row = request.head
        self.outcome = AccuracyOutcome(
            row=request.head,
            manifest_shown=request.shown(request.manifest_path),
            device=request.device,
            name=request.manifest.name,
        )
        self.notes: list[str] = []
        self.data_files: dict[str, str] = {}  # {sample id: sha256} of the data, once resolved
        self.written = False
        self.partial = False  # a shard compared: its verdict is the merge's
        # The golden file as read before the run (or the error of reading it), for the verdict
        # too: read once (at 50,000 samples a read takes seconds), and the verdict compares with
        # the very golden whose classes the streamed evaluation kept scores for.
        self._golden_read: tuple[Golden | None, GoldenError | OSError | None] = (None, None)
        # What a write of the golden is based on: the digest of the bytes read then (a golden
        # written by another run since is never written over: goldens/_writer.py).
        self._based_on = golden_store.Based(None)

    def _verdict(self, verdict: str) -> None:
        self.row = replace(self.row, verdict=verdict)
        self.outcome = replace(self.outcome, verdict=verdict)

    def _fail(self, reason: Reason, verdict: str | None, end: End = "fail", **facts: Any) -> _Ended:
        """End the check; a None ``verdict`` keeps the one found before; ``facts``: for its text."""
        if verdict is not None:
            self._verdict(verdict)
        failed: Status = "no golden" if reason == "no golden" else "failed"
        status: Status = "skipped" if end == "skip" else failed
        self.outcome = replace(self.outcome, status=status, end=end, reason=reason, **facts)
        return _Ended()

    def _evaluate(
        self, run: Callable[[ResolvedDataset, Progress], Evaluation] | None
    ) -> tuple[Evaluation | None, ResolvedDataset]:
        """``run`` None: the model verified and loaded, nothing run; a tool error ends the check."""
        r = self.r
        try:
            self.row = with_hardware(self.row, r.manifest, r.device)
            dataset = resolve_dataset(r.manifest, r.settings, r.shard)
            if run is None:
                load_runner(r.manifest, r.device, r.settings)
                return None, dataset
            with r.progress(len(dataset.samples)) as progress:
                return run(dataset, progress), dataset
        except MlreproError as exc:
            reason, end, self.row = stopped(self.row, exc, r.strict)
            build = exc if isinstance(exc, BuildMismatch) else None
            message = exc.message if isinstance(exc, NonFiniteOutputs) else str(exc)
            raise self._fail(reason, self.row.verdict, end, message=message, build=build) from None

    def _compared_with(self, path: Path) -> tuple[golden_store.Results, ...]:
        """Read before the run so that the evaluation streams (keeps only their top-k)."""
        r = self.r
        try:
            self._golden_read = (golden_store.read(path, r.settings.golden_dir), None)
        except (GoldenError, OSError) as exc:
            self._golden_read = (None, exc)
        golden, error = self._golden_read
        read_digest = golden.digest if golden is not None else getattr(error, "digest", None)
        self._based_on = golden_store.Based(read_digest)
        kept = [] if golden is None else [golden.results]
        reference = golden_store.reference_results(r.manifest, r.settings)
        if reference is not None:
            kept.append(reference)
        return tuple(kept)

    def run(self) -> None:
        r = self.r
        m, settings = r.manifest, r.settings
        writes = r.update and r.records
        # What a results file needs to tell this evaluation from others: the row's head, the
        # tolerances and the shard (the hardware key: the evaluation's).
        self.row = replace(self.row, tolerances=m.tolerances, shard=r.shard)
        path = golden_store.golden_path(m, settings)
        self.outcome = replace(self.outcome, golden_shown=r.shown(path))
        if not writes and not path.exists() and not path.is_symlink():
            # Nothing to compare with: said before the model runs over the whole data set (the
            # data and the model are still found, verified and loaded: runs=0). A golden that
            # exists but is broken still gets an evaluation, so that its failure shows this
            # run's numbers.
            _, dataset = self._evaluate(None)
            self.row = replace(self.row, samples=len(dataset.samples))
            raise self._fail("no golden", "no golden", model_run=False)
        with phase("comparison"):
            keep = self._compared_with(path)

        def run(dataset: ResolvedDataset, progress: Progress) -> Evaluation:
            return evaluate(m, r.device, settings, dataset, progress, keep=keep, shared=r.shared)

        result, dataset = self._evaluate(run)
        assert result is not None
        with phase("comparison"):
            self._judge(result, dataset, path, writes)

    def _judge(
        self, result: Evaluation, dataset: ResolvedDataset, path: Path, writes: bool
    ) -> None:
        r = self.r
        m = r.manifest
        self.outcome = replace(self.outcome, classes=dataset.class_names)
        self.data_files = dataset.checksums
        now = result.results
        self.row = replace(
            self.row,
            samples=len(now.ids),
            top1=round(now.top1, 4),
            top5=round(now.top5, 4),
            top_k=m.postprocess.top_k if m.postprocess.top_k < 5 else None,
            timing=Timing(seconds=round(result.seconds, 3)),
            controls=controls_in_force(m, result.runner_info),
            data=result.dataset_origin,
            # The data set's version: shards merge only within one.
            data_identity=dataset.identity or None,
        )
        with phase("writing"):  # compared with nothing, yet
            self.outcome = replace(self.outcome, per_sample=Part(now, None, {}).to_json())
        # Before any golden is written: an update that contradicts the reference is refused.
        if r.shard is None:
            ref = self._check_reference(result)
            self.outcome = replace(self.outcome, reference=ref)
        else:
            # A reference check decides with tolerances over the whole data set: not a shard's.
            ref = None
            if m.reference is not None:
                verdict = r.words(("shard reference", str(r.shard)))
                self.row = replace(self.row, reference_verdict=verdict)
        golden = self._read_golden(path, writes)
        if golden is not None and golden.digest is not None:
            # The golden's version: shards compared with two recordings never merge.
            self.row = replace(self.row, golden_digest=golden.digest)
        if golden is None:
            decision = accuracy_decision(writes=writes, has_golden=False)
            if decision.action == "record":
                self._record(path, result, decision.reason, ref)
                return
            raise self._fail("no golden", "no golden")
        recorded_classes = int(golden.manifest["dataset"]["classes"])  # validated on reading
        classes_now = int(result.scores.shape[1])
        if recorded_classes != classes_now:
            # Nothing to compare sample by sample: the class indices mean other classes.
            self.row = replace(self.row, golden=self.outcome.golden_shown)
            decision = accuracy_decision(writes=writes, has_golden=True, classes_match=False)
            if decision.action == "record":
                self._record(path, result, decision.reason, ref)
                return
            named = None
            if r.diagnosis_probes is not None:  # the class indices mapped back, if one map does
                named = explain_class_count(
                    golden.results, now, recorded_classes, classes_now, r.diagnosis_wording
                )
            if named is not None:
                self.row = replace(self.row, diagnosis=named[1])
            raise self._fail(
                "classes changed",
                "drift",
                recorded_classes=recorded_classes,
                classes_now=classes_now,
                diagnosis=None if named is None else named[0],
            )
        if r.shard is not None:  # the golden's samples of this shard, by the same rule
            golden = replace(golden, results=shard_results(golden.results, r.shard))
        comparison = compare(golden.results, now, result.scores, m.tolerances)
        diffs = score_diffs(golden.results, now, result.scores)
        with phase("writing"):
            per_sample = Part(now, golden.results, diffs).to_json()
            self.outcome = replace(self.outcome, per_sample=per_sample)
        finite = math.isfinite(comparison.max_score_diff)
        self.row = replace(
            self.row,
            agreement=round(comparison.agreement, 6),
            golden_top1=round(comparison.golden_top1, 4),
            golden_top5=round(comparison.golden_top5, 4),
            top5_changed=_top5_changed(golden.results, now),
            max_score_diff=float(f"{comparison.max_score_diff:.3g}") if finite else None,
            golden=self.outcome.golden_shown,
        )
        change = data_change(golden, now, self.data_files)
        change = self._same_pixels(golden, change, result)
        if change.changed:
            self.row = replace(self.row, data_changed=change.summary())
        if r.shard is not None:
            # A part: it failed above for its own errors; the tolerance verdict belongs to the
            # merge of all shards (mlrepro merge, or the session for a split item).
            self._verdict(shard_verdict(r.shard))
            self.partial = True
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
            or step_fingerprints_up_to_date(
                golden.probes, m.input.preprocess, result.samples, r.fingerprint_samples
            ),
            data_current=not change.changed and golden.data == self.data_files,
            data_identity_recorded=golden.data is not None,
            manifest_file_current=not comparison.ok
            or golden.manifest_file == golden_store.manifest_file_of(r.manifest_path, r.settings),
            data_changed=change.changed,
        )
        if decision.action == "record":
            self._record(path, result, decision.reason, ref)
            return
        if decision.action == "pass":
            enriched = self._enrich(path, golden, result, change) if r.enrich else ""
            self._verdict(f"pass ({enriched})" if enriched else "pass")
            self._finish_reference(ref)
            return
        if r.enrich and r.records:  # no figure outside tolerance: the data changed
            outside = "" if comparison.ok else ", ".join(comparison.failures)
            self._note(("not reproduced", self.outcome.golden_shown, outside))
        # What a results file keeps of a failed comparison: the levels outside tolerance and the
        # samples whose top-1 changed (the report's table of them).
        changed = changed_samples(comparison.changed, self.outcome.classes)
        failures = tuple(comparison.failures)
        self.row = replace(self.row, outside_tolerance=failures, changed_samples=changed)
        drifted = Drifted(golden, result)
        self.outcome = replace(self.outcome, drifted=drifted, comparison=comparison, change=change)
        self._diagnose(drifted, comparison, change)
        # Within every tolerance, but on other data: named as a data change, with the samples
        # concerned, never as a drift of the results.
        if comparison.ok:
            raise self._fail("data changed", "data changed")
        raise self._fail("drift", "drift")

    def _note(self, note: Note) -> None:
        self.notes.append(self.r.words(note))

    def _same_pixels(self, golden: Golden, change: DataChange, result: Evaluation) -> DataChange:
        """``change`` less files decoding to the golden's pixels (a comment, an ICC profile)."""
        r = self.r
        if not change.files or r.strict:
            return change
        found = check_pixel_identity(
            golden.pixels, golden.probes, r.manifest.input.preprocess, result.samples,
            change.files,
        )  # fmt: skip
        if not found.same:
            return change
        shown = ", ".join(found.same[:3]) + (", …" if len(found.same) > 3 else "")
        self._note(("same pixels", str(len(found.same)), shown, r.shown(r.manifest_path)))
        return replace(change, files=[f for f in change.files if f not in set(found.same)])

    def _enrich(self, path: Path, golden: Golden, result: Evaluation, change: DataChange) -> str:
        """--mlrepro-enrich on a reproducing run; the verdict's note ("" writing no goldens)."""
        r, o = self.r, self.outcome  # o: the facts so far (the enrichment changes none)
        if not r.records:
            return ""
        if change.changed or not golden_store.manifest_is_current(golden.manifest, r.manifest):
            self._note(("not current", o.golden_shown, "data" if change.changed else "manifest"))
            return NOT_ENRICHED
        found = enrich(
            golden, r.manifest, result.samples, result.runner,
            environment(result.runner_info), self.data_files, self.r.fingerprint_samples,
        )  # fmt: skip
        left = "; ".join(r.words(e) for e in found.left_out)
        if found.golden is None:
            self._note(("complete", o.golden_shown, left))
            return "golden complete"
        try:
            golden_store.write(
                path, found.golden, r.settings.golden_dir, settings=r.settings,
                based_on=self._based_on,
                rerun=f"pytest {r.shown(r.manifest_path)} --mlrepro-enrich",
            )  # fmt: skip
        except OutputError as exc:
            self._note(("write failed", str(exc).replace(str(path), o.golden_shown)))
            return NOT_ENRICHED
        added = tuple(r.words(e) for e in found.added)
        self.row = replace(self.row, golden_enriched=added)
        self._note(("enriched", o.golden_shown, ", ".join(added), left))
        return "golden enriched"

    def _check_reference(self, result: Evaluation) -> ReferenceOutcome | None:
        """Never raises (the caller weighs a disagreement); None when no reference is declared."""
        r = self.r
        if r.manifest.reference is None:
            return None
        try:
            check = check_reference(r.manifest, r.settings, result.results, result.scores)
        except ReferenceGoldenMissing as exc:
            self.row = replace(self.row, reference_verdict=f"not checked: {exc}")
            # Recording both in one run: the reference's golden may come after this item.
            return ReferenceOutcome(problem=str(exc), missing=True, error=not r.update)
        except MlreproError as exc:  # a ManifestError: the reference itself is refused
            self.row = replace(self.row, reference_verdict="error")
            refused = isinstance(exc, ManifestError)
            return ReferenceOutcome(problem=str(exc), error=True, refused=refused)
        distance = check.comparison.max_score_diff
        self.row = replace(
            self.row,
            reference=check.name,
            reference_samples=check.comparison.samples,
            reference_agreement=round(check.comparison.agreement, 6),
            reference_top1_ratio=round(check.top1_ratio, 6),
            reference_score_space=check.score_space,
            reference_max_score_diff=float(f"{distance:.3g}") if math.isfinite(distance) else None,
            reference_verdict="agree" if check.ok else "disagree",
        )
        return ReferenceOutcome(check=check)

    def _finish_reference(self, ref: ReferenceOutcome | None) -> None:
        """A golden written despite a disagreement keeps its "golden ..." verdict."""
        if ref is None or (ref.agrees is not False and not ref.error):
            return
        if self.written:  # the verdict stays "golden ...": it was written
            raise self._fail("written, reference failed", None)
        if ref.error:
            raise self._fail("reference error", "error")
        raise self._fail("reference disagreement", "reference disagreement")

    def _read_golden(self, path: Path, writes: bool) -> Golden | None:
        """The golden at ``path``, checked to be this manifest's: an invalid one fails the item (an
        update replaces it: None), one another manifest still claims fails it in every run."""
        r, o = self.r, self.outcome  # o: the facts so far (read, not changed)
        golden, error = self._golden_read
        try:
            if error is not None:
                raise error
            if golden is not None:
                golden_store.check_owner(golden, path, r.manifest, (str(path), o.manifest_shown))
        except GoldenError as exc:
            # Not a file (a symlink, a folder...) is never replaced; an invalid one, by an update.
            not_a_file = isinstance(exc, golden_store.GoldenNotAFile)
            if writes and not not_a_file:
                return None
            reason: Reason = NOT_A_FILE if not_a_file else "golden unreadable"
            message = str(exc).replace(str(path), o.golden_shown)
            raise self._fail(reason, "error", message=message) from None
        if golden is None:
            return None
        other = golden_store.claimed_by_another(golden, path, r.manifest, r.settings)
        if other is not None:
            raise self._fail("golden claimed", "golden claimed", claimed_by=other)
        return golden

    def _diagnose(self, drifted: Drifted, comparison: Comparison, change: DataChange) -> None:
        """Nothing when diagnosis is turned off."""
        r = self.r
        if r.diagnosis_probes is None:
            return
        with phase("diagnosis"):
            d = diagnose(
                r.manifest, drifted.golden, comparison, drifted.result,
                wording=r.diagnosis_wording, probes=r.diagnosis_probes, data=change,
            )  # fmt: skip
            # The results file's summary of it (mlrepro merge, the report), the HTML's layer chart.
            summary = diagnosis_summary(d.lead, d.cause, d.sections)
            self.row = replace(self.row, diagnosis=d.cause, diagnosis_summary=summary)
            drifted.layers.extend(d.layer_rows)
        self.outcome = replace(self.outcome, diagnosis=d.render(), blamed=d.blamed)

    def _step_probes(self, result: Evaluation) -> dict[str, Any] | None:
        """None if they cannot be made: never costs the golden itself."""
        m = self.r.manifest
        try:
            probes = record_step_fingerprints(
                m.input.preprocess, result.samples, self.r.fingerprint_samples
            )
        except (MlreproError, OSError):
            return None
        if probes is not None and result.runner is not None:
            # The model-side twin: every layer's output on the first probes (optional: a model
            # whose layers cannot be traced records none).
            layers = record_layer_fingerprints(
                result.runner, m, result.samples, probes.get("samples", [])
            )
            if layers is not None:
                probes["layers"] = layers
        return probes

    def _record(
        self, path: Path, result: Evaluation, action: str, ref: ReferenceOutcome | None
    ) -> None:
        """Contradicting the reference, written only under --mlrepro-update-despite-reference."""
        r = self.r
        with phase("writing"):
            disagrees = ref is not None and ref.agrees is False
            if disagrees and r.despite_reference:
                action += DESPITE_REFERENCE
            self.outcome = replace(self.outcome, action=action)  # done, or what is refused
            if ref is not None and ref.refused:
                # The reference is refused (outside the project, not found): the manifest is
                # wrong, and nothing it produced is recorded, as for a refused model.
                raise self._fail("reference refused", "error")
            if disagrees and not r.despite_reference:
                raise self._fail(
                    "reference disagreement, not recorded",
                    f"reference disagreement (golden not {self.outcome.verb})",
                )
            golden = Golden(
                name=r.manifest.name,
                manifest=r.manifest.normalized(),
                environment=environment(result.runner_info),
                results=result.results,
                probes=self._step_probes(result),
                data=dict(sorted(self.data_files.items())),
                pixels=record_pixel_identity(r.manifest.input.preprocess, result.samples),
                manifest_file=golden_store.manifest_file_of(r.manifest_path, r.settings),
            )
            try:
                golden_store.write(
                    path, golden, r.settings.golden_dir, settings=r.settings,
                    based_on=self._based_on,
                    rerun=f"pytest {r.shown(r.manifest_path)} --mlrepro-update",
                )  # fmt: skip
            except OutputError as exc:
                message = str(exc).replace(str(path), self.outcome.golden_shown)
                raise self._fail("golden not written", "error", message=message) from None
            self.written = True
            self._verdict(f"golden {action}")
            self.row = replace(self.row, golden=self.outcome.golden_shown)
        self._finish_reference(ref)


def _top5_changed(golden: golden_store.Results, now: golden_store.Results) -> int:
    """Samples whose ordered top-5 is not the golden's: the first sign of a preprocessing change."""
    theirs, ours = paired_rows(golden, now)
    if not len(ours):
        return 0
    k = min(5, now.topk.shape[1], golden.topk.shape[1])
    return int((now.topk[ours, :k] != golden.topk[theirs, :k]).any(axis=1).sum())
