"""The determinism item: the evaluation run several times, every score required to repeat (the
comparison lives in :mod:`pytest_mlrepro.evaluation`). A sibling of the accuracy item: it shares
the evaluation (:class:`~._item.EvaluatingItem`), not the golden."""

from __future__ import annotations

from typing import ClassVar

import pytest

from ..data import ResolvedDataset
from ..evaluation import Evaluation, Progress, RunComparison, evaluate_runs, judge_runs
from ..manifest import Determinism, Manifest
from ..report import determinism_text
from ._base import MlreproFailure, display_path, settings_key
from ._item import EvaluatingItem


def determinism_items(
    parent: pytest.Collector, manifest: Manifest, devices: list[str]
) -> list[pytest.Item]:
    """One determinism item per device, for manifests with a ``determinism:`` block, or for all
    with ``--mlrepro-determinism``."""
    if manifest.determinism is None and not parent.config.getoption("mlrepro_determinism"):
        return []
    return [
        DeterminismItem.from_parent(
            parent, name=f"determinism[{device}]", manifest=manifest, device=device
        )
        for device in devices
    ]


class DeterminismItem(EvaluatingItem):
    """Runs the evaluation ``determinism.runs`` times (the model loaded afresh each time) and
    requires every score to repeat exactly, or within ``determinism.tolerance``."""

    kind: ClassVar[str] = "determinism"

    @property
    def spec(self) -> Determinism:
        return self.manifest.determinism or Determinism()

    @property
    def timeout_factor(self) -> int:
        return self.spec.runs

    def runtest(self) -> None:
        m, spec = self.manifest, self.spec
        shown = display_path(self.config, self.path)
        for key, value in self.row_head():
            self.add_property(key, value)
        if self.shard is not None:  # its verdict is its own: the runs of its shard repeat or not
            self.add_property("shard", self.shard.as_json())
        device, settings = self.device, self.config.stash[settings_key]

        def run(
            dataset: ResolvedDataset, progress: Progress
        ) -> tuple[list[Evaluation], RunComparison]:
            return evaluate_runs(m, device, settings, dataset, spec.runs, spec.tolerance, progress)

        done, _ = self._evaluate(run)
        assert done is not None
        outcome = judge_runs(m, *done)
        for name, fact in outcome.properties:
            self.add_property(name, fact)
        if outcome.status == "failed":
            raise MlreproFailure(f"{shown} [{self.device}]: " + determinism_text(outcome))
