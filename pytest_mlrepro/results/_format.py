"""Reading a results file back (:func:`validate_results`): the generated schema, then the rules it
cannot state (:data:`BEYOND_SCHEMA`), so that a bad file is refused naming its field."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from .._files import MIB, FileTooLarge, TooDeep, parse_json, read_bounded
from .._json_schema import Validator
from .._visible import shortened
from ..data import Shard
from ..errors import MlreproError
from ..goldens import Results
from ._fields import manifest_digest
from ._record import (
    FORMATS,
    Document,
    Machine,
    PerSample,
    Row,
    SampleResults,
    Status,
    created_time,
    record,
    results_schema,
    row_of,
)
from ._record import (
    MAX_ROWS as RECORD_MAX_ROWS,
)

MAX_BYTES = 256 * MIB
"""The largest results file read (a 50,000-image row keeps about 15 MB); larger: refused unread."""
MAX_ROWS = RECORD_MAX_ROWS
"""The most rows of a file, and of all files merge/history read together (10,000: a thousand
manifests on ten devices); counted by ``"nodeid":`` keys and refused before parsing."""
MAX_TOTAL_BYTES = 1 << 30
"""The most bytes merge/history read from all their files together (four of the largest)."""
MAX_DEPTH = 64
"""The deepest nesting read (files this version writes nest fewer than 10 levels)."""

IDENTITIES = ("manifest_digest", "data_identity", "golden_digest")
"""Row fields that identify what a result was measured with (sha256, hex)."""
MESSAGE_LIMIT = 300
"""The most characters of a schema error's message (it quotes the bad value, maybe huge)."""

BEYOND_SCHEMA = (
    ("shard index", "a shard's index is at most its count"),
    ("per-sample lengths", "labels, topk and topk_scores have one entry per sample id"),
    ("top-k width", "every sample lists as many classes (and scores) as the first"),
    ("score_diff keys", "score_diff has one entry per sample in both now and golden"),
    ("manifest digest", "manifest_content is the content whose sha256 is manifest_digest"),
    ("created", "created is a real time (not 2026-02-30)"),
)
"""(name, rule) of the rules a JSON Schema cannot state, checked after it (docs/results.md)."""


class ResultsFileError(MlreproError):
    """The message names the file and the JSON path of the bad field."""


def json_path(parts: tuple[str | int, ...]) -> str:
    """``$.results[3].per_sample`` from ``("results", 3, "per_sample")``."""
    out = "$"
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", part):
            out += f".{part}"
        else:
            out += f"[{json.dumps(part)}]"
    return out


class _Invalid(Exception):
    def __init__(self, path: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


@functools.cache
def _validator() -> Validator:
    return Validator(results_schema())


def _shard(value: Mapping[str, int] | None, path: tuple[str | int, ...]) -> None:
    # The schema bounds each number; record() then builds the Shard.
    if value is not None and value["index"] > value["count"]:
        raise _Invalid(
            (*path, "index"),
            f"shard {value['index']} of {value['count']}: expected 1 <= index <= count",
        )


def _samples(value: Mapping[str, Any], path: tuple[str | int, ...]) -> None:
    ids = value["ids"]
    for name in ("labels", "topk", "topk_scores"):
        if len(value[name]) != len(ids):
            raise _Invalid((*path, name), f"{len(value[name])} entries for {len(ids)} sample ids")
    width = len(value["topk"][0]) if ids else 0
    for i, (classes, scores) in enumerate(zip(value["topk"], value["topk_scores"])):
        if len(classes) != width:
            raise _Invalid((*path, "topk", i), f"expected {width} classes, got {len(classes)}")
        if len(scores) != width:
            raise _Invalid((*path, "topk_scores", i), f"expected {width} scores, got {len(scores)}")


def _results(value: SampleResults) -> Results:
    ids = tuple(value.ids)
    width = len(value.topk[0]) if ids else 0
    return Results(
        ids=ids,
        labels=np.asarray(value.labels, np.int64),
        topk=np.asarray(value.topk, np.int64).reshape(len(ids), width),
        topk_scores=np.asarray(value.topk_scores, np.float64).reshape(len(ids), width),
    )


def _json(results: Results) -> dict[str, Any]:
    return {
        "ids": list(results.ids),
        "labels": [int(v) for v in results.labels],
        "topk": [[int(c) for c in row] for row in results.topk],
        "topk_scores": [[float(v) for v in row] for row in results.topk_scores],
    }


@dataclass(frozen=True)
class Part:
    """The per-sample arrays of one evaluation (a run or a shard); ``golden`` None: not compared."""

    now: Results
    golden: Results | None
    score_diff: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        return {
            "now": _json(self.now),
            "golden": None if self.golden is None else _json(self.golden),
            "score_diff": dict(self.score_diff),
        }

    @classmethod
    def of(cls, value: PerSample) -> Part:
        golden = value.golden
        return Part(
            _results(value.now), None if golden is None else _results(golden), value.score_diff
        )


def _per_sample(value: Mapping[str, Any], path: tuple[str | int, ...]) -> None:
    _samples(value["now"], (*path, "now"))
    shared: set[str] = set()
    if value["golden"] is not None:
        _samples(value["golden"], (*path, "golden"))
        shared = set(value["now"]["ids"]) & set(value["golden"]["ids"])
    diffs = value["score_diff"]
    if set(diffs) != shared:
        odd = sorted(set(diffs) ^ shared)
        raise _Invalid(
            (*path, "score_diff"),
            f"expected one entry per sample in both 'now' and 'golden' ({len(shared)}), "
            f"got {len(diffs)} (e.g. {odd[0]!r} differs)",
        )


_NAMES = ("manifest", "device", "framework", "framework_version", "verdict")
"""A row's display names, read back shortened so that no page or table spends time on a 200 kB
name (the file keeps the full value)."""
TEXT_LIMIT = 1000
"""The most characters of any other text shown; a longer one is cut to its start and a digest
(equal texts stay equal, different ones different)."""
_WHOLE = ("nodeid", "outcome", "kind", "shard", "per_sample", "manifest_content", *IDENTITIES)
"""Row fields read whole: keys matched across files, what the digests check, per-sample ids."""


def _bounded_texts(value: Any) -> Any:
    """Every string in ``value``, keys included, cut (``MAX_DEPTH`` bounds the recursion)."""
    if isinstance(value, str):
        return shortened(value, TEXT_LIMIT)
    if isinstance(value, list):
        return [_bounded_texts(item) for item in value]
    if isinstance(value, dict):
        return {shortened(k, TEXT_LIMIT): _bounded_texts(v) for k, v in value.items()}
    return value


_PASSING = ("pass", "faster", "identical runs", "within tolerance")
"""Verdicts that passed a comparison (latency verdicts may carry notes: ``pass (vs <key>)``)."""
_NOT_COMPARED = ("skipped", "contended")
"""Verdicts of a skipped item that was not compared: listed, not failed."""
_SHARD_PART = " compared (verdict at the merge)"


def shard_verdict(shard: Shard) -> str:
    """A compared shard's verdict: its tolerance verdict is the merge's."""
    return f"shard {shard}{_SHARD_PART}"


def derived_status(verdict: str, outcome: str) -> Status:
    """The status of a row older than the field, from its verdict (the one place that parses
    verdict prose); an unknown verdict is a failure, never a pass."""
    head = verdict.split(" (", 1)[0].strip()
    if outcome == "failed":
        return "failed"
    if outcome == "passed" and head in _PASSING:
        return "passed"
    if outcome == "skipped" and head in _NOT_COMPARED:
        return "skipped"
    if outcome == "passed" and re.fullmatch(r"shard \d+/\d+" + re.escape(_SHARD_PART), verdict):
        return "partial"
    if head.startswith("golden "):
        return "recorded"
    return "no golden" if head == "no golden" else "failed"


def _row(row: Mapping[str, Any], path: tuple[str | int, ...]) -> Row:
    """A schema-valid row checked beyond the schema, its texts bounded, its status derived."""
    _shard(row.get("shard"), (*path, "shard"))
    if row.get("per_sample") is not None:
        _per_sample(row["per_sample"], (*path, "per_sample"))
    content, digest = row.get("manifest_content"), row.get("manifest_digest")
    if content is not None and digest is not None and manifest_digest(content) != digest:
        raise _Invalid(
            (*path, "manifest_content"),
            "does not match the row's manifest_digest (the row was edited after it was written)",
        )
    out = {k: (v if k in _WHOLE else _bounded_texts(v)) for k, v in row.items()}
    for key in _NAMES:
        if row.get(key) is not None:
            out[key] = shortened(row[key])
    if row.get("status") is None:
        out["status"] = derived_status(row.get("verdict") or "", row["outcome"])
    return row_of(out)


def created_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def validate_results(document: Any, source: str = "results") -> Document:
    """The one validating constructor of a parsed results file; ResultsFileError names ``source``
    and the JSON path of the first bad field."""
    try:
        fmt = document.get("format") if isinstance(document, dict) else None
        if isinstance(document, dict) and fmt not in FORMATS:
            understood = ", ".join(str(f) for f in FORMATS)
            raise _Invalid(
                ("format",),
                f"format {fmt!r} is not one this version of pytest-mlrepro reads "
                f"(it reads format {understood}; rewrite the file with this version's "
                "pytest --mlrepro-json)",
            )
        error = _validator().first_error(document)
        if error is not None:
            raise _Invalid(error.path, shortened(error.message, MESSAGE_LIMIT))
        _shard(document["shard"], ("shard",))
        created = document.get("created")
        try:
            created is None or created_time(created)
        except ValueError as exc:
            raise _Invalid(("created",), f"not a valid time: {created!r} ({exc})") from None
        rows = tuple(_row(row, ("results", i)) for i, row in enumerate(document["results"]))
    except _Invalid as exc:
        raise ResultsFileError(
            f"{source}: {json_path(exc.path)}: {exc.message} (not a valid results file)"
        ) from None
    machine = document["machine"]
    # Shown in every table and page: bounded (the file keeps them whole).
    shown = {
        "name": shortened(machine["name"]),
        "environment": _bounded_texts(machine["environment"]),
    }
    return record(
        Document,
        document,
        machine=record(Machine, shown),
        results=rows,
        path=Path(source),
    )


def _too_many_rows(path: Path, counted: int, left: int, limit: int = MAX_ROWS) -> str:
    allowed = (
        f"the limit of {limit} rows"
        if left == limit
        else f"the {left} rows left of the limit of {limit} for all files read together"
    )
    return (
        f'{path}: not read: it holds {counted} rows (counted by their "nodeid" keys), more than '
        f"{allowed} (pytest_mlrepro.results.MAX_ROWS); refused before it is parsed. Merge fewer "
        "files, or split the run's items over several results files"
    )


def load_results_files(paths: Sequence[Path | str], *, max_rows: int = MAX_ROWS) -> list[Document]:
    """At most ``max_rows`` rows and :data:`MAX_TOTAL_BYTES` bytes in all: the file that would pass
    either is refused (ResultsFileError naming it) before it is parsed."""
    size = 0
    for given in paths:  # every size first: nothing is read when they are too many bytes
        path = Path(given)
        with contextlib.suppress(OSError):  # load_results says what is wrong with the file
            own = os.stat(path).st_size
            size += own if own <= MAX_BYTES else 0  # (a file over its own limit: said so)
            if size > MAX_TOTAL_BYTES:
                raise ResultsFileError(
                    f"{path}: not read: the files named up to it hold {size} bytes, more than "
                    f"the limit of {MAX_TOTAL_BYTES} for all files read together "
                    "(pytest_mlrepro.results.MAX_TOTAL_BYTES); nothing was read. Merge fewer "
                    "files"
                )
    documents: list[Document] = []
    rows = 0
    for given in paths:
        document = load_results(Path(given), rows_left=max_rows - rows, max_rows=max_rows)
        rows += len(document.results)
        documents.append(document)
    return documents


def load_results(
    path: Path | str, *, rows_left: int = MAX_ROWS, max_rows: int = MAX_ROWS
) -> Document:
    path = Path(path)
    try:
        raw = read_bounded(path, MAX_BYTES, follow_symlinks=True)
    except FileTooLarge as exc:
        raise ResultsFileError(f"{path}: not read: {exc}") from None
    except OSError as exc:
        raise ResultsFileError(
            f"{path}: cannot read the results file: {exc.strerror or exc}"
        ) from None
    if raw is None:
        raise ResultsFileError(f"{path}: cannot read the results file: No such file or directory")
    # Every row has one "nodeid" key: their count bounds the rows (a sample id or a score_diff
    # key spelt "nodeid" can only make it larger), without parsing the file.
    counted = raw.count(b'"nodeid":') + raw.count(b'"nodeid" :')
    if counted > rows_left:
        raise ResultsFileError(_too_many_rows(path, counted, rows_left, max_rows))
    try:
        document = parse_json(raw, MAX_DEPTH, allow_nan=False)
    except UnicodeDecodeError as exc:
        raise ResultsFileError(
            f"{path}: not a results file (not UTF-8 text: {exc.reason})"
        ) from None
    except TooDeep as exc:
        raise ResultsFileError(f"{path}: not a results file: {exc}") from None
    except json.JSONDecodeError as exc:
        raise ResultsFileError(
            f"{path}: not a results file: invalid JSON (line {exc.lineno}, column {exc.colno}): "
            f"{exc.msg}"
        ) from None
    except ValueError as exc:
        raise ResultsFileError(f"{path}: not a results file: invalid JSON: {exc}") from None
    except MemoryError:
        raise ResultsFileError(
            f"{path}: not read: its {len(raw)} bytes do not fit in this process's memory"
        ) from None
    rows = document.get("results") if isinstance(document, dict) else None
    if isinstance(rows, list) and len(rows) > rows_left:  # keys spelt otherwise ("nodeid"  :)
        raise ResultsFileError(_too_many_rows(path, len(rows), rows_left, max_rows))
    return replace(validate_results(document, str(path)), path=path)
