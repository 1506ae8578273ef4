"""The latency items: the model timed at one batch size on one device against this machine's golden;
under xdist, not while other workers load the cores (:class:`SessionLock`)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import pytest

from .._files import fcntl_module
from .._names import enrich_command, record_command
from ..latency import LatencyRequest, run_latency
from ..manifest import Manifest
from ..report import latency_decided_by, latency_outcome_text
from ..results import Row, record, row_json
from ._base import BENCHMARKS_ATTR, display_path, options, settings_key
from ._item import ManifestItem, loadgroup
from ._options import LOCK_INPUT

XDIST_GROUP = "mlrepro-latency"

_lock_key = pytest.StashKey["SessionLock | None"]()


class SessionLock:
    """A writer-preferring readers-writer lock between a session's processes: ``turnstile`` (held
    by a waiting or measuring writer: no new reader enters), ``main`` (readers share it)."""

    def __init__(self, path: Path) -> None:
        self.main = path
        self.turnstile = path.with_name(path.name + ".turnstile")

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with _held(self.turnstile, alone=True):
            pass  # waits while a latency item waits to measure or measures
        with _held(self.main, alone=False):
            yield

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with _held(self.turnstile, alone=True), _held(self.main, alone=True):
            yield


@contextlib.contextmanager
def _held(path: Path, alone: bool) -> Iterator[None]:
    fcntl = fcntl_module()
    with open(path, "a+b") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def use_lock(config: pytest.Config, latency_items: bool) -> None:
    """Worker side: lock only in sessions with latency items (others pay nothing)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or not latency_items:
        return
    path = workerinput.get(LOCK_INPUT)
    if path:
        config.stash[_lock_key] = SessionLock(Path(path))


def session_lock(config: pytest.Config) -> SessionLock | None:
    return config.stash.get(_lock_key, None)


def exclusive(config: pytest.Config) -> contextlib.AbstractContextManager[None]:
    """Nothing else runs in the session meanwhile (a latency item measures)."""
    lock = session_lock(config)
    return contextlib.nullcontext() if lock is None else lock.exclusive()


def latency_items(
    parent: pytest.Collector, manifest: Manifest, devices: list[str]
) -> list[pytest.Item]:
    if manifest.latency is None:
        return []
    return [
        LatencyItem.from_parent(
            parent,
            name=f"latency[{device}-b{batch}]",
            manifest=manifest,
            device=device,
            batch=batch,
            xdist_group=loadgroup(parent.config, XDIST_GROUP),
        )
        for device in devices
        for batch in manifest.latency.batch_sizes
    ]


class LatencyItem(ManifestItem):
    kind: ClassVar[str] = "latency"

    def __init__(self, *, manifest: Manifest, device: str, batch: int, **kwargs: Any) -> None:
        super().__init__(manifest=manifest, device=device, **kwargs)
        self.batch = batch
        self.benchmarks: list[dict[str, Any]] | None = None

    def parameters(self) -> dict[str, str]:
        return {**super().parameters(), "batch": str(self.batch)}

    def report_attributes(self, when: str) -> dict[str, Any]:
        attributes = super().report_attributes(when)
        if when == "call" and self.benchmarks is not None:
            attributes[BENCHMARKS_ATTR] = self.benchmarks
        return attributes

    def runtest(self) -> None:
        config, given = self.config, options(self.config)
        threads = config.getoption("mlrepro_threads")
        extra = (f"--mlrepro-threads {threads}",) if threads else ()
        target = f"{display_path(config, self.path)}::{self.name}"
        update_cmd = record_command(target, *extra)
        enrich_cmd = enrich_command(target, *extra)
        outcome = run_latency(
            LatencyRequest(
                manifest=self.manifest,
                device=self.device,
                batch=self.batch,
                settings=config.stash[settings_key],
                update=given.update,
                threads=given.threads,
                max_contention=given.max_contention,
                name=self.name,
                nodeid=self.nodeid,
                update_cmd=update_cmd,
                shown=functools.partial(display_path, config),
                word_decision=latency_decided_by,
                exclusive=functools.partial(exclusive, config),
                enrich=given.enrich,
            )
        )
        head = replace(self.row_head(), batch=self.batch)
        measured = outcome.row or {}
        found = outcome.facts
        facts = {f.name: getattr(found, f.name) for f in dataclasses.fields(found)}
        facts = {k: v for k, v in facts.items() if v is not None and v != ()}
        fields = {**row_json(head), **facts}
        if measured.get("measurements"):
            fields["measurements"] = measured["measurements"]
        self.row = record(Row, fields)
        if self.row.extra:  # every field a check writes is one Row declares
            raise TypeError(f"latency fields Row does not declare: {sorted(self.row.extra)}")
        self.benchmarks = None if outcome.row is None else list(measured["benchmarks"])
        if outcome.end == "pass":
            return
        where = f"{display_path(config, self.path)} [{self.device}, batch {self.batch}]"
        text = latency_outcome_text(outcome, update_cmd, where, enrich_cmd)
        self.conclude(outcome.end, text, outcome.strict_fails)
