"""The pitfall sensitivity table of a manifest (MLModelScope's Table 1 for this model): top-1, top-5
and agreement under each pitfall, kept with the goldens to show how fragile a model is."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .._files import atomic_write_bytes
from ..data import Sample
from ..errors import MlreproError
from ..fingerprint import environment
from ..goldens import accuracy, read_json, top_k
from ..manifest import Manifest
from ..runners import Runner
from ._counterfactual import score_pipelines
from ._pitfalls import Flip, Variant, variants

FORMAT = 1


@dataclass
class PitfallRow:
    key: str
    pitfall: str
    description: str
    top1: float | None = None
    top5: float | None = None
    agreement: float | None = None  # fraction of samples whose top-1 is the declared pipeline's
    error: str | None = None


@dataclass
class PitfallTable:
    name: str
    framework: str
    device: str
    dataset: str
    samples: int
    limit: int | None
    declared: PitfallRow
    rows: list[PitfallRow] = field(default_factory=list)
    seconds: float = 0.0
    environment: dict[str, Any] = field(default_factory=dict)


def table_path(golden: Path, golden_dir: Path | None = None) -> Path:
    """Where the table of the golden at ``golden`` is kept: ``<golden dir>/pitfalls/<its path>``
    (no tool mistakes it for a golden); without ``golden_dir``, beside the golden."""
    if golden_dir is not None and golden.is_relative_to(golden_dir):
        return golden_dir / "pitfalls" / golden.relative_to(golden_dir)
    return golden.parent / "pitfalls" / golden.name


def save(path: Path, table: PitfallTable, golden_dir: Path | None = None) -> None:
    """Write the table (reviewable JSON, keys sorted: every field but the run's time, figures
    rounded), atomically; OutputError if it cannot be written (``_files.atomic_write_bytes``)."""
    plain = dataclasses.asdict(table)
    del plain["seconds"]  # differs on every run: not a change to review
    for row in (plain["declared"], *plain["rows"]):
        for name, digits in (("top1", 4), ("top5", 4), ("agreement", 6)):
            if row[name] is not None:
                row[name] = round(row[name], digits)
    text = json.dumps({"format": FORMAT, **plain}, indent=2, sort_keys=True, ensure_ascii=False)
    text += "\n"
    atomic_write_bytes(path, text.encode("utf-8"), what="pitfall table", inside=golden_dir)


def read(path: Path, golden_dir: Path | None = None) -> PitfallTable | None:
    """The table at ``path`` (None if none); MlreproError if it is not a table."""
    data = read_json(path, "pitfall table", golden_dir)
    if data is None:
        return None
    try:
        table = PitfallTable(
            name=str(data["name"]),
            framework=str(data["framework"]),
            device=str(data["device"]),
            dataset=str(data["dataset"]),
            samples=int(data["samples"]),
            limit=None if data.get("limit") is None else int(data["limit"]),
            declared=_row(data["declared"]),
            rows=[_row(r) for r in data["rows"]],
            environment=dict(data.get("environment") or {}),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise MlreproError(f"{path}: not a pitfall table ({type(exc).__name__}: {exc})") from None
    if table.declared.top1 is None:
        raise MlreproError(f"{path}: not a pitfall table (the declared pipeline has no top-1)")
    return table


def _row(data: dict[str, Any]) -> PitfallRow:
    def optional(name: str, kind: Callable[[Any], Any] = float) -> Any:
        return None if data.get(name) is None else kind(data[name])

    key, pitfall, description = (str(data[name]) for name in ("key", "pitfall", "description"))
    top1, top5, agreement = (optional(name) for name in ("top1", "top5", "agreement"))
    return PitfallRow(key, pitfall, description, top1, top5, agreement, optional("error", str))


def sensitivity(
    manifest: Manifest,
    runner: Runner,
    samples: Sequence[Sample],
    *,
    device: str = "cpu",
    dataset: str = "",
    limit: int | None = None,
    only: Sequence[str] = (),
    progress: Callable[[int], None] | None = None,
    backends: Collection[str] | None = None,
    describe: Callable[[Flip], str],
) -> PitfallTable:
    """``only``: keys or categories to keep; ``backends``: libraries flips may use (None: all
    installed); ``describe`` words a row's flip (diagnosis/ imports no report/)."""
    start = time.perf_counter()
    chosen: list[Variant] = [
        v for v in variants(manifest, backends) if not only or v.key in only or v.pitfall in only
    ]
    pipelines = [tuple(manifest.input.preprocess), *(v.steps for v in chosen)]
    outcomes = score_pipelines(runner, manifest, samples, pipelines, progress=progress)
    labels = np.asarray([s.label for s in samples], np.int64)
    declared_outcome = outcomes[0]
    if declared_outcome.scores is None:
        # e.g. the model produces non-finite outputs: an error for the user, not a traceback
        raise MlreproError(f"the declared pipeline does not run: {declared_outcome.error}")
    declared_top = top_k(declared_outcome.scores, 5)

    def row(
        key: str, pitfall: str, flip: Flip, scores: np.ndarray | None, error: str | None
    ) -> PitfallRow:
        description = describe(flip)
        if scores is None:
            return PitfallRow(key, pitfall, description, error=error or "no scores")
        topk = top_k(scores, 5)
        top1, top5 = accuracy(topk, labels)
        agreement = float(np.mean(topk[:, 0] == declared_top[:, 0])) if len(labels) else 0.0
        return PitfallRow(key, pitfall, description, top1, top5, agreement)

    declared = row("declared", "", ("declared",), declared_outcome.scores, None)
    rows = [row(v.key, v.pitfall, v.flip, o.scores, o.error) for v, o in zip(chosen, outcomes[1:])]
    info = getattr(runner, "info", {}) or {}
    framework = f"{manifest.framework.name} {info.get('framework_version', '')}".strip()
    return PitfallTable(
        name=manifest.name,
        framework=framework,
        device=device,
        dataset=dataset or manifest.dataset.name,
        samples=len(samples),
        limit=limit,
        declared=declared,
        rows=rows,
        seconds=time.perf_counter() - start,
        environment=environment(info),
    )
