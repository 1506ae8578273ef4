"""The determinism item: the evaluation run several times, every score required to repeat."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

import pytest

from ..accuracy import stopped, with_hardware
from ..data import resolve_dataset
from ..errors import BuildMismatch, MlreproError
from ..evaluation import evaluate_runs, judge_runs
from ..manifest import Determinism, Manifest
from ..report import determinism_stopped_text, determinism_text, stopped_diagnosis
from ..results import Timing
from ._base import display_path, options, settings_key
from ._item import EvaluatingItem, TerminalProgress


def determinism_items(
    parent: pytest.Collector, manifest: Manifest, devices: list[str]
) -> list[pytest.Item]:
    """For manifests with a ``determinism:`` block, or all with ``--mlrepro-determinism``."""
    if manifest.determinism is None and not parent.config.getoption("mlrepro_determinism"):
        return []
    return [
        DeterminismItem.from_parent(
            parent, name=f"determinism[{device}]", manifest=manifest, device=device
        )
        for device in devices
    ]


class DeterminismItem(EvaluatingItem):
    """Each run loads the model anew; scores repeat exactly, or within ``determinism.tolerance``."""

    kind: ClassVar[str] = "determinism"

    @property
    def spec(self) -> Determinism:
        return self.manifest.determinism or Determinism()

    @property
    def timeout_factor(self) -> int:
        return self.spec.runs

    def runtest(self) -> None:
        m, spec, config = self.manifest, self.spec, self.config
        device, settings = self.device, config.stash[settings_key]
        # Its verdict is its own: the runs of its shard repeat or not.
        self.row = replace(self.row_head(), shard=self.shard)
        strict = options(config).strict
        try:
            self.row = with_hardware(self.row, m, device)
            dataset = resolve_dataset(m, settings, self.shard)
            with TerminalProgress(config, len(dataset.samples)) as progress:
                runs, comparison = evaluate_runs(
                    m, device, settings, dataset, spec.runs, spec.tolerance, progress
                )
        except MlreproError as exc:
            reason, end, self.row = stopped(self.row, exc, strict)
            self.row = replace(self.row, diagnosis=stopped_diagnosis(reason))
            if isinstance(exc, BuildMismatch):
                text = self.explain_build(exc)
            else:
                shown = f"{display_path(config, self.path)} [{device}]"
                strict_failure = end == "fail" and reason == "unavailable"
                text = determinism_stopped_text(exc, shown, strict_failure)
            self.conclude(end, text, strict_fails=False)
            return
        outcome = judge_runs(m, runs, comparison)
        first = runs[0].results
        self.row = replace(
            self.row,
            samples=comparison.samples,
            top1=round(first.top1, 4),
            top5=round(first.top5, 4),
            top_k=m.postprocess.top_k if m.postprocess.top_k < 5 else None,
            runs=comparison.runs,
            agreement=round(comparison.top1_agreement, 6),
            max_score_diff=float(f"{comparison.max_abs_diff:.3g}"),
            controls=outcome.controls,
            timing=Timing(seconds=[round(r.seconds, 3) for r in runs]),
            verdict=outcome.verdict,
            status=outcome.status,
        )
        if outcome.status == "failed":
            shown = display_path(config, self.path)
            self.conclude("fail", f"{shown} [{device}]: " + determinism_text(outcome))
