"""The accuracy item: the model over the data set (or shard), compared with its goldens."""

from __future__ import annotations

import functools
from collections.abc import Hashable
from dataclasses import replace
from typing import Any, ClassVar

import pytest

from ..accuracy import AccuracyRequest, run_accuracy
from ..data import Shard
from ..evaluation import PreprocessingShare
from ..manifest import Manifest
from ..pipeline import Pipeline
from ..report import DIAGNOSIS_WORDING, accuracy_outcome_text, accuracy_words, stopped_diagnosis
from ._base import (
    PER_SAMPLE_ATTR,
    SPLIT_ATTR,
    MlreproFailure,
    display_path,
    options,
    settings_key,
    state_of,
)
from ._html import REPORT_ATTRIBUTE, collect_drift
from ._item import EvaluatingItem, TerminalProgress, loadgroup


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
        self.drift: dict[str, Any] | None = None  # a drift's pictures for the HTML report
        self.shared_golden: str | None = None  # another manifest claims its golden: it fails

    @property
    def preprocessing_use(self) -> tuple[Hashable, Pipeline]:
        """The data it reads and its pipeline, for the shared preprocessing (not the determinism
        item's: its runs preprocess afresh, so that a nondeterministic step still shows)."""
        return (self.manifest.dataset.name, str(self.shard)), self.manifest.pipeline

    def teardown(self) -> None:
        share = state_of(self.config).preprocessing
        if share is not None:  # run, failed or skipped: its use is over
            share.finished(*self.preprocessing_use)

    def report_attributes(self, when: str) -> dict[str, Any]:
        """A shard item's whole item (every report); the per-sample results and a drift's
        pictures (the call's)."""
        attributes = super().report_attributes(when)
        if self.split_of is not None and self.shard is not None:  # _shards.Split
            attributes[SPLIT_ATTR] = {
                "nodeid": self.split_of,
                "index": self.shard.index,
                "count": self.shard.count,
                "manifest_file": display_path(self.config, self.path),
                "classes": None if self.classes is None else list(self.classes),
            }
        if when == "call":
            if self.per_sample is not None:
                attributes[PER_SAMPLE_ATTR] = self.per_sample
            if self.drift is not None:
                attributes[REPORT_ATTRIBUTE] = self.drift
        return attributes

    def runtest(self) -> None:
        if self.shared_golden is not None:
            self.row = replace(self.row_head(), verdict="golden shared")
            raise MlreproFailure(self.shared_golden)
        config, given = self.config, options(self.config)
        share = state_of(config).preprocessing
        outcome = run_accuracy(
            AccuracyRequest(
                manifest=self.manifest,
                device=self.device,
                settings=config.stash[settings_key],
                shard=self.shard,
                update=given.update,
                records=self.records,
                manifest_path=self.path,
                shown=functools.partial(display_path, config),
                progress=functools.partial(TerminalProgress, config),
                head=self.row_head(),
                despite_reference=bool(config.getoption("mlrepro_update_despite_reference", False)),
                diagnosis_probes=given.diagnosis_probes,
                diagnosis_wording=DIAGNOSIS_WORDING,
                words=accuracy_words,
                fingerprint_samples=given.fingerprint_samples,
                shared=None if share is None else share.loader(*self.preprocessing_use),
                enrich=given.enrich,
                strict=given.strict,
            )
        )
        self.row, self.classes, self.per_sample = outcome.row, outcome.classes, outcome.per_sample
        if outcome.reason == "non-finite outputs":  # the check's facts, the row's words
            self.row = replace(self.row, diagnosis=stopped_diagnosis(outcome.reason))
        self.blamed = outcome.blamed
        drifted, comparison = outcome.drifted, outcome.comparison
        if drifted is not None and comparison is not None:
            self.drift = collect_drift(self, drifted, comparison)
        if outcome.interrupted is not None:  # the time limit, Ctrl-C
            raise outcome.interrupted
        if outcome.end != "pass":
            build = outcome.build
            text = accuracy_outcome_text(outcome) if build is None else self.explain_build(build)
            self.conclude(outcome.end, text, strict_fails=False)


def accuracy_items(
    parent: pytest.Collector, manifest: Manifest, devices: list[str]
) -> list[pytest.Item]:
    """One item per device (the first records goldens); with ``mlrepro_shards = K``, K each."""
    count = options(parent.config).item_shards
    shards = [Shard(index, count) for index in range(1, count + 1)] if count > 1 else [None]
    # pytest-xdist's --dist loadgroup sends the items of one group to one worker: the items
    # reading one data set then share their preprocessing (see preprocessing_use). Not shard
    # items: they are split to be spread over the workers.
    group = None if count > 1 else loadgroup(parent.config, f"mlrepro-data-{manifest.dataset.name}")
    return [
        AccuracyItem.from_parent(
            parent,
            name=f"accuracy[{device}]" + ("" if s is None else f"[shard{s.index}of{count}]"),
            manifest=manifest,
            device=device,
            records=s is None and device == devices[0],
            shard=s,
            split_of=None if s is None else f"{parent.nodeid}::accuracy[{device}]",
            xdist_group=group,
        )
        for device in devices
        for s in shards
    ]


def plan_preprocessing(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Shared preprocessing for the ``items`` to run, where two can share and budget allows."""
    uses = [item.preprocessing_use for item in items if isinstance(item, AccuracyItem)]
    budget = options(config).preprocessing_memory
    if len(uses) > 1 and budget > 0:
        share = state_of(config).preprocessing = PreprocessingShare(budget)
        share.plan(uses)
