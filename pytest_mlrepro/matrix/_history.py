"""Many nights of results files (``mlrepro history``): each manifest × machine × device followed
over the nights, with the first night outside tolerance and what changed that night."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..errors import MlreproError
from ..results import Document, Row, created_time, differences, pipeline_of, row_json, settings_of
from ._build import MatrixError, build_matrix
from ._model import Cell, Matrix

CHANGES = 24
"""Differences named per night (the count of the rest is said)."""


class HistoryError(MlreproError):
    """Results files that do not make a history (a file without a time, a night whose files do
    not make one matrix)."""


@dataclass(frozen=True)
class Night:
    """The results files of one UTC day, merged."""

    day: str  # YYYY-MM-DD
    first: datetime  # the earliest file's time
    files: tuple[Document, ...]
    matrix: Matrix

    @property
    def label(self) -> str:
        return self.first.strftime("%Y-%m-%d %H:%M UTC")


@dataclass(frozen=True)
class Point:
    """One night of a series: the cell's numbers, their tolerance bands, and whether (why) the
    night was outside tolerance."""

    night: int  # index into History.nights
    top1: float | None
    top1_band: tuple[float, float] | None  # the golden's top-1 ± its tolerance
    agreement: float | None
    agreement_floor: float | None
    p50_ms: float | None
    p50_ceiling_ms: float | None  # the golden's p50 × the largest ratio that passes
    outside: bool
    why: str  # the failed results' reasons ("" inside tolerance)


@dataclass(frozen=True)
class Series:
    """One manifest on one machine and device over the nights it ran."""

    manifest: str
    machine: str
    device: str
    points: tuple[Point, ...]
    first_outside: int | None  # index into points
    changes: tuple[tuple[str, str], ...]  # (what, how) that night against the night before

    @property
    def label(self) -> str:
        return f"{self.manifest} · {self.machine} [{self.device}]"


@dataclass(frozen=True)
class History:
    nights: tuple[Night, ...]
    series: tuple[Series, ...]


def build_history(files: Sequence[Document]) -> History:
    """HistoryError naming the night and why: a file without a time, or files not one matrix."""
    by_day: dict[str, list[tuple[datetime, Document]]] = {}
    for f in files:
        if f.created is None:
            raise HistoryError(
                f"{f.path}: the results file has no 'created' time (written by a version of "
                "pytest-mlrepro before it kept one): a history cannot place it among the nights; "
                "leave it out, or write it again with this version's pytest --mlrepro-json"
            )
        created = created_time(f.created)
        by_day.setdefault(created.strftime("%Y-%m-%d"), []).append((created, f))
    nights = []
    for day in sorted(by_day):
        timed = sorted(by_day[day], key=lambda tf: (tf[0], str(tf[1].path)))
        members = tuple(f for _, f in timed)
        try:
            matrix = build_matrix(members)
        except MatrixError as exc:
            raise HistoryError(f"the night of {day}: {exc}") from None
        nights.append(Night(day=day, first=timed[0][0], files=members, matrix=matrix))
    keys = sorted({(c.manifest, c.machine, c.device) for n in nights for c in n.matrix.cells})
    return History(nights=tuple(nights), series=tuple(_series(nights, *key) for key in keys))


def _point(index: int, cells: Sequence[Cell]) -> Point:
    a = next((c.accuracy for c in cells if c.accuracy is not None), None)
    band = floor = None
    if a is not None and a.tolerances is not None:
        floor = a.tolerances.agreement
        if a.golden_top1 is not None:
            band = (a.golden_top1 - a.tolerances.top1, a.golden_top1 + a.tolerances.top1)
    first = next((c.latency[0] for c in cells if c.latency), None)
    ceiling = None
    if first is not None and first.golden_p50_ms is not None and first.p50_tolerance is not None:
        ceiling = first.golden_p50_ms * first.p50_tolerance
    failed = any(c.status == "fail" for c in cells)
    return Point(
        night=index,
        top1=None if a is None else a.top1,
        top1_band=band,
        agreement=None if a is None else a.agreement,
        agreement_floor=floor,
        p50_ms=None if first is None else first.p50_ms,
        p50_ceiling_ms=ceiling,
        outside=failed,
        why="; ".join(r for c in cells for r in c.problems) if failed else "",
    )


def _series(nights: Sequence[Night], manifest: str, machine: str, device: str) -> Series:
    points = []
    cells: list[tuple[Night, Cell]] = []
    for index, night in enumerate(nights):
        # One cell, or several where its rows differ in framework version or manifest digest (a
        # latency row of an older file without the digest, say).
        key = (manifest, machine, device)
        found = [c for c in night.matrix.cells if (c.manifest, c.machine, c.device) == key]
        if found:
            points.append(_point(index, found))
            # The cell whose manifest is compared night to night: the accuracy item's.
            cells.append((night, next((c for c in found if c.accuracy), found[0])))
    first = next((i for i, p in enumerate(points) if p.outside), None)
    changes: tuple[tuple[str, str], ...] = ()
    if first is not None:
        if first == 0:
            changes = (("history", "the first night of this series: no night before it"),)
        else:
            changes = tuple(_changes(*cells[first - 1], *cells[first]))
    return Series(
        manifest=manifest,
        machine=machine,
        device=device,
        points=tuple(points),
        first_outside=first,
        changes=changes,
    )


def _environment(night: Night, machine: str) -> dict[str, Any]:
    return next(
        (row_json(f.machine.environment) for f in night.files if f.machine.name == machine), {}
    )


def _rows(night: Night, cell: Cell) -> list[Row]:
    """The rows of a cell's manifest on its machine and device that night."""
    return [
        row
        for f in night.files
        if f.machine.name == cell.machine
        for row in f.results
        if row.manifest == cell.manifest and (row.device or "") == cell.device
    ]


def _shown(value: object) -> str:
    if value is None:
        return "(none)"
    if isinstance(value, list):
        return " ".join(str(v) for v in value) or "(empty)"
    return repr(value) if isinstance(value, str) else str(value)


def _changes(
    before_night: Night, before: Cell, now_night: Night, now: Cell
) -> list[tuple[str, str]]:
    """What differs between the two nights' files of one machine for one cell."""
    out: list[tuple[str, str]] = []
    if before.manifest_content is not None and now.manifest_content is not None:
        for what, part in (("pipeline", pipeline_of), ("settings", settings_of)):
            for path, a, b in differences(
                part(before.manifest_content), part(now.manifest_content)
            ):
                out.append((what, f"{path}: {_shown(a)} → {_shown(b)}"))
    elif before.manifest_digest != now.manifest_digest:
        out.append(
            (
                "manifest",
                f"digest {str(before.manifest_digest)[:12]} → {str(now.manifest_digest)[:12]} "
                "(the files do not record the manifest's content: which field, unknown)",
            )
        )
    envs = (_environment(before_night, now.machine), _environment(now_night, now.machine))
    for path, a, b in differences(*envs):
        out.append(("environment", f"{path}: {_shown(a)} → {_shown(b)}"))
    if before.framework_version != now.framework_version:
        out.append(
            ("framework", f"{now.framework}: {before.framework_version} → {now.framework_version}")
        )
    for key, what in (("golden_digest", "golden"), ("data_identity", "data set")):
        old = {getattr(r, key) for r in _rows(before_night, before)} - {None}
        new = {getattr(r, key) for r in _rows(now_night, now)} - {None}
        if old and new and old != new:
            out.append(
                (
                    what,
                    f"{key} {', '.join(sorted(v[:12] for v in old))} → "
                    f"{', '.join(sorted(v[:12] for v in new))} (the {what} itself changed)",
                )
            )
    if not out:
        out.append(
            ("nothing", "no recorded difference in the manifest, environment, golden or data")
        )
    if len(out) > CHANGES:
        out = [*out[:CHANGES], ("…", f"{len(out) - CHANGES} more differences")]
    return out
