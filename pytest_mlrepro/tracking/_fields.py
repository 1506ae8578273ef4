"""What a results file becomes in a tracking store, as plain data (no MLflow here): the session's
run and one nested run per row, under the names docs/tracking.md lists, within MLflow's limits."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..results import Document, Row, created_time, manifest_digest

TAG = "mlrepro."  # the tags this tool sets (besides MLflow's own mlflow.*)
KIND = TAG + "kind"
SESSION = "session"
ITEM = "item"
RESULTS_SHA256 = TAG + "results_sha256"  # of the file's bytes: the same file twice is one run
COMPLETE = TAG + "complete"  # "true" last, once every item and artifact is in
NIGHT = TAG + "night"
RESULTS_FILE = TAG + "results_file"
RESULTS_ARTIFACT = "results.json"
PAGE_ARTIFACT = "report.html"
PARENT = "mlflow.parentRunId"
COMMIT = "mlflow.source.git.commit"

PARAM_LENGTH = 6000  # MLflow's limits (mlflow.utils.validation)
TAG_LENGTH = 8000
KEY_LENGTH = 250
_BAD_NAME = re.compile(r"[^\w.\- /]")
FAILED = ("failed", "no golden", "recorded")  # fail a gate (docs/merge.md)


@dataclass
class RunData:
    """One run's name, parameters, metrics and tags."""

    name: str
    params: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)

    def param(self, key: str, value: object) -> None:
        if value is not None and value != "":
            self.params[_name(key)] = str(value)[:PARAM_LENGTH]

    def metric(self, key: str, value: object) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return
        if math.isfinite(value):
            self.metrics[_name(key)] = float(value)

    def tag(self, key: str, value: object) -> None:
        if value is not None and value != "":
            self.tags[key] = str(value)[:TAG_LENGTH]


def _name(key: str) -> str:
    return _BAD_NAME.sub("_", key)[:KEY_LENGTH]


def file_digest(data: bytes) -> str:
    """The sha256 of a results file's bytes (the tag :data:`RESULTS_SHA256`)."""
    return hashlib.sha256(data).hexdigest()


def created_ms(document: Document) -> int | None:
    if document.created is None:
        return None
    return int(created_time(document.created).timestamp() * 1000)


def session_run(document: Document, digest: str, file_name: str) -> RunData:
    """The session's run: machine, shard, commit, the items by status, the one-time costs."""
    machine = document.machine.name
    shard = str(document.shard) if document.shard is not None else None
    run = RunData(
        name=" ".join(filter(None, [machine, shard and f"shard {shard}", document.created]))
    )
    run.tag(KIND, SESSION)
    run.tag(RESULTS_SHA256, digest)
    run.tag(RESULTS_FILE, file_name)
    run.tag(TAG + "machine", machine)
    # The UTC day of the file's created time: mlrepro history's night.
    run.tag(NIGHT, document.created and created_time(document.created).strftime("%Y-%m-%d"))
    run.tag(TAG + "created", document.created)
    run.tag(TAG + "shard", shard)
    run.tag(COMMIT, document.commit)
    statuses = [row.status or row.outcome for row in document.results]
    failed = sum(s in FAILED for s in statuses)
    run.tag(TAG + "verdict", "failed" if failed else "passed")
    run.param("machine", machine)
    run.param("shard", shard)
    run.param("commit", document.commit)
    run.param("format", document.format)
    run.metric("items", len(statuses))
    run.metric("passed", statuses.count("passed"))
    run.metric("failed", failed)
    run.metric("not_compared", len(statuses) - statuses.count("passed") - failed)
    for phase, times in (document.one_time or {}).items():
        run.metric(f"one_time.{phase}.wall", times.wall)
        run.metric(f"one_time.{phase}.cpu", times.cpu)
    return run


def item_run(document: Document, row: Row) -> RunData:
    """A row's nested run (tag :data:`PARENT` set by the logger)."""
    run = RunData(name=row.nodeid)
    run.tag(KIND, ITEM)
    run.tag(TAG + "nodeid", row.nodeid)
    run.tag("verdict", row.verdict)
    run.tag("status", row.status or row.outcome)
    run.tag("outcome", row.outcome)
    cause = row.diagnosis or (row.diagnosis_summary.cause if row.diagnosis_summary else None)
    run.tag("likely_cause", cause)
    for key, value in _params(document, row):
        run.param(key, value)
    for key, value in _metrics(row):
        run.metric(key, value)
    return run


def _params(document: Document, row: Row) -> Iterator[tuple[str, object]]:
    content = row.manifest_content or {}
    yield "manifest", row.manifest
    yield "manifest_file", row.manifest_file
    yield "manifest_digest", row.manifest_digest
    yield "kind", row.kind
    yield "device", row.device
    yield "batch", row.batch
    yield "framework", row.framework
    yield "framework_version", row.framework_version
    yield "model_sha256", _model_sha256(content)
    if content.get("inputs") is not None:
        yield "preprocessing_digest", manifest_digest(content["inputs"])
    yield "machine", document.machine.name
    yield "machine_key", row.hardware_slug
    shard = row.shard or document.shard
    yield "shard", None if shard is None else str(shard)
    yield "commit", document.commit
    yield "golden", row.golden
    yield "golden_digest", row.golden_digest
    yield "data_identity", row.data_identity


def _model_sha256(content: Mapping[str, Any]) -> str | None:
    model = content.get("model")
    if not isinstance(model, Mapping):
        return None
    for part in ("file", "weights"):
        block = model.get(part)
        if isinstance(block, Mapping) and isinstance(block.get("sha256"), str):
            return str(block["sha256"])
    return None


NAMED_METRICS = (
    "top1",
    "top5",
    "agreement",
    "max_score_diff",
    "golden_top1",
    "golden_top5",
    "samples",
    "top5_changed",
    "p50_ms",
    "golden_p50_ms",
    "ratio_to_golden",
)


def _metrics(row: Row) -> Iterator[tuple[str, object]]:
    for name in NAMED_METRICS:
        yield name, getattr(row, name)
    if row.timing is not None:
        yield "timing.call", row.timing.call
        seconds = row.timing.seconds
        if isinstance(seconds, list):  # a determinism item's runs
            for i, value in enumerate(seconds):
                yield f"timing.seconds.run{i + 1}", value
        else:
            yield "timing.seconds", seconds
        for phase, times in (row.timing.phases or {}).items():
            yield f"phase.{phase}.wall", times.wall
            yield f"phase.{phase}.cpu", times.cpu
    # A latency row's statistics, per measurement ("model.p50_ms", "model.rounds", ...): the row
    # is one batch size's.
    for key, value in row.latency_figures().items():
        yield f"latency.{key}", value
