"""The results file (``--mlrepro-json``, format 2): reading it back, validated field by field.

The file's shape is published as JSON Schema (``pytest_mlrepro/results.schema.json``, docs/
results.md); this module checks the same rules (and those a schema cannot state: the per-sample
lists of one result have one entry per sample) without a JSON Schema library, so that ``mlrepro
merge`` refuses a truncated, hand-edited or foreign file with the file and the JSON path of the
bad field instead of a ``KeyError`` deep inside a merge.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from .._files import MIB, FileTooLarge, TooDeep, parse_json, read_bounded
from .._phases import PHASES
from .._visible import shortened
from ..data import MAX_SHARDS, Shard
from ..errors import MlreproError
from ..goldens import Results
from ._fields import manifest_digest

FORMAT = 2
"""The format this version writes."""
FORMATS = (2,)
"""The formats this version reads (format 1 rows carry no per-sample results: nothing to merge)."""
SCHEMA_FILE = Path(__file__).resolve().parent.parent / "results.schema.json"
"""The JSON Schema of the results file, shipped with the package."""

MAX_BYTES = 256 * MIB
"""The largest results file read: one row of a 50,000-image data set keeps about 15 MB of
per-sample results. A larger file is refused unread (``mlrepro merge`` exits 2)."""
MAX_DEPTH = 64
"""The deepest nesting of a results file (those this version writes nest fewer than 10 levels)."""

MAX_CLASS = (1 << 31) - 1
"""The largest class index (and label) read: a model's classes are counted in int32 anywhere.
Validated where it is parsed, so that a class index of 10**30 is a field error, not an
``OverflowError`` in the array that holds it."""
MAX_WHOLE = (1 << 53) - 1
"""The largest other whole number read (a count): exact as a JSON number anywhere."""

OUTCOMES = ("passed", "failed", "skipped")
IDENTITIES = ("manifest_digest", "data_identity", "golden_digest")
"""Row fields that identify what a result was measured with (sha256, hex)."""
_HEX64 = re.compile(r"[0-9a-f]{64}")
_CREATED = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z")


class ResultsFileError(MlreproError):
    """A results file that cannot be read or is not a valid results file: the message names the
    file and the JSON path of the bad field (``$.results[3].per_sample.now.ids``)."""


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


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _object(value: Any, path: tuple[str | int, ...]) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _Invalid(path, f"expected an object, got {_type_name(value)}")
    return value


def _required(obj: Mapping[str, Any], key: str, path: tuple[str | int, ...]) -> Any:
    if key not in obj:
        raise _Invalid(path, f"missing the required field {key!r}")
    return obj[key]


def _str(value: Any, path: tuple[str | int, ...]) -> str:
    if not isinstance(value, str):
        raise _Invalid(path, f"expected a string, got {_type_name(value)}")
    return value


def _int(
    value: Any,
    path: tuple[str | int, ...],
    minimum: int | None = None,
    maximum: int = MAX_WHOLE,
) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Invalid(path, f"expected a whole number, got {_type_name(value)}")
    if minimum is not None and value < minimum:
        raise _Invalid(path, f"expected at least {minimum}, got {_shown_int(value)}")
    if value > maximum:
        raise _Invalid(path, f"expected at most {maximum}, got {_shown_int(value)}")
    return value


def _shown_int(value: int) -> str:
    """A whole number for a message: a 4,000-digit one is not quoted whole."""
    text = str(value) if value.bit_length() < 200 else f"a {value.bit_length()}-bit number"
    return text


def _number(value: Any, path: tuple[str | int, ...]) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Invalid(path, f"expected a number, got {_type_name(value)}")
    if not math.isfinite(value):
        raise _Invalid(path, f"expected a finite number, got {value}")
    return float(value)


def _list(value: Any, path: tuple[str | int, ...]) -> list[Any]:
    if not isinstance(value, list):
        raise _Invalid(path, f"expected a list, got {_type_name(value)}")
    return value


def _shard(value: Any, path: tuple[str | int, ...]) -> Shard:
    obj = _object(value, path)
    index = _int(_required(obj, "index", path), (*path, "index"), 1)
    count = _int(_required(obj, "count", path), (*path, "count"), 1, MAX_SHARDS)
    if index > count:
        raise _Invalid((*path, "index"), f"shard {index} of {count}: expected 1 <= index <= count")
    return Shard(index, count)


def results_from_json(value: Any, path: tuple[str | int, ...] = ()) -> Results:
    """Per-sample results (``{"ids", "labels", "topk", "topk_scores"}``), validated."""
    obj = _object(value, path)
    ids = [
        _str(v, (*path, "ids", i))
        for i, v in enumerate(_list(_required(obj, "ids", path), (*path, "ids")))
    ]
    seen: set[str] = set()
    for i, sample in enumerate(ids):
        if sample in seen:
            raise _Invalid((*path, "ids", i), f"the sample id {sample!r} is listed twice")
        seen.add(sample)
    labels = [
        _int(v, (*path, "labels", i), 0, MAX_CLASS)
        for i, v in enumerate(_list(_required(obj, "labels", path), (*path, "labels")))
    ]
    topk_rows = _list(_required(obj, "topk", path), (*path, "topk"))
    score_rows = _list(_required(obj, "topk_scores", path), (*path, "topk_scores"))
    for name, seq in (("labels", labels), ("topk", topk_rows), ("topk_scores", score_rows)):
        if len(seq) != len(ids):
            raise _Invalid((*path, name), f"{len(seq)} entries for {len(ids)} sample ids")
    topk = [
        [
            _int(c, (*path, "topk", i, j), 0, MAX_CLASS)
            for j, c in enumerate(_list(row, (*path, "topk", i)))
        ]
        for i, row in enumerate(topk_rows)
    ]
    scores = [
        [
            _number(c, (*path, "topk_scores", i, j))
            for j, c in enumerate(_list(row, (*path, "topk_scores", i)))
        ]
        for i, row in enumerate(score_rows)
    ]
    width = len(topk[0]) if topk else 0
    for i, (classes, values) in enumerate(zip(topk, scores)):
        if len(classes) != width or not classes:
            raise _Invalid(
                (*path, "topk", i), f"expected {width or 'at least 1'} classes, got {len(classes)}"
            )
        if len(values) != width:
            raise _Invalid((*path, "topk_scores", i), f"expected {width} scores, got {len(values)}")
    return Results(
        ids=tuple(ids),
        labels=np.asarray(labels, np.int64),
        topk=np.asarray(topk, np.int64).reshape(len(ids), width),
        topk_scores=np.asarray(scores, np.float64).reshape(len(ids), width),
    )


def results_to_json(results: Results) -> dict[str, Any]:
    """Plain lists (what JSON, xdist and a results file carry) of ``results``."""
    return {
        "ids": list(results.ids),
        "labels": [int(v) for v in results.labels],
        "topk": [[int(c) for c in row] for row in results.topk],
        "topk_scores": [[float(v) for v in row] for row in results.topk_scores],
    }


@dataclass(frozen=True)
class Part:
    """The per-sample results of one evaluation (a whole run or one shard of it): this run's
    results, the golden's results for the same samples (None: nothing was compared) and, for
    each sample in both, the score difference :func:`goldens.compare` takes the maximum of."""

    now: Results
    golden: Results | None
    score_diff: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        return {
            "now": results_to_json(self.now),
            "golden": None if self.golden is None else results_to_json(self.golden),
            "score_diff": dict(self.score_diff),
        }

    @classmethod
    def from_json(cls, value: Any, where: str = "per_sample") -> Part:
        """A part from its JSON (a results file's ``per_sample``); ResultsFileError naming the
        JSON path below ``where`` of a bad field."""
        try:
            return _part(value, ())
        except _Invalid as exc:
            raise ResultsFileError(f"{where}: {json_path(exc.path)}: {exc.message}") from None


def _part(value: Any, path: tuple[str | int, ...]) -> Part:
    obj = _object(value, path)
    now = results_from_json(_required(obj, "now", path), (*path, "now"))
    golden_json = _required(obj, "golden", path)
    golden = None if golden_json is None else results_from_json(golden_json, (*path, "golden"))
    diffs_json = _object(_required(obj, "score_diff", path), (*path, "score_diff"))
    diffs = {k: _number(v, (*path, "score_diff", k)) for k, v in diffs_json.items()}
    shared = set() if golden is None else set(now.ids) & set(golden.ids)
    if set(diffs) != shared:
        odd = sorted(set(diffs) ^ shared)
        raise _Invalid(
            (*path, "score_diff"),
            f"expected one entry per sample in both 'now' and 'golden' ({len(shared)}), "
            f"got {len(diffs)} (e.g. {odd[0]!r} differs)",
        )
    if any(d < 0 for d in diffs.values()):
        raise _Invalid((*path, "score_diff"), "a score difference is negative")
    return Part(now=now, golden=golden, score_diff=diffs)


_NAMES = ("manifest", "device", "framework", "framework_version", "verdict")
"""A row's display names: read back shortened (``_visible.shortened``, at most
``DISPLAY_LIMIT`` characters, as long as a manifest name may be), so that no page, table or
chart of the merge, the history or the session's report spends time or memory on a 200 kB name;
the file itself keeps the full value. (Keys that must match across files, the node id among
them, are left whole.)"""


def _seconds(value: Any, path: tuple[str | int, ...]) -> float:
    seconds = _number(value, path)
    if seconds < 0:
        raise _Invalid(path, f"expected seconds (0 or more), got {seconds}")
    return seconds


def phase_account(value: Any, path: tuple[str | int, ...]) -> Mapping[str, Any]:
    """A per-phase account (``{phase: {"wall": s, "cpu": s}}``: an item's ``timing.phases``,
    the file's ``one_time``): the phases among ``PHASES``, their seconds finite and >= 0."""
    account = _object(value, path)
    for name, times in account.items():
        if name not in PHASES:
            raise _Invalid((*path, name), f"not a phase (one of: {', '.join(PHASES)})")
        entry = _object(times, (*path, name))
        for what in ("wall", "cpu"):
            _seconds(_required(entry, what, (*path, name)), (*path, name, what))
    return account


def _timing(value: Any, path: tuple[str | int, ...]) -> None:
    """A row's measured durations: any of them, typed where known (``seconds``: the model's run
    over the data set, a list of them for the determinism item's runs; ``call``: the item's
    call as pytest timed it; ``phases``: where the call's time went)."""
    timing = _object(value, path)
    if "call" in timing:
        _seconds(timing["call"], (*path, "call"))
    if "phases" in timing:
        phase_account(timing["phases"], (*path, "phases"))


def _row(value: Any, path: tuple[str | int, ...]) -> dict[str, Any]:
    row = dict(_object(value, path))
    _str(_required(row, "nodeid", path), (*path, "nodeid"))
    for key in _NAMES:
        if isinstance(row.get(key), str):
            row[key] = shortened(row[key])
    outcome = _str(_required(row, "outcome", path), (*path, "outcome"))
    if outcome not in OUTCOMES:
        raise _Invalid(
            (*path, "outcome"), f"expected one of {', '.join(OUTCOMES)}, got {outcome!r}"
        )
    for key in (
        "manifest",
        "device",
        "framework",
        "verdict",
        "manifest_file",
        "hardware_slug",
        "kind",
    ):
        if key in row:
            _str(row[key], (*path, key))
    # The identities of what a row was measured with: the manifest, the data set (its whole
    # checksum list) and the golden file. Shards merge only when all three agree.
    for key in IDENTITIES:
        if key in row:
            digest = _str(row[key], (*path, key))
            if not _HEX64.fullmatch(digest):
                raise _Invalid((*path, key), "expected a sha256 in 64 lower-case hex digits")
    if "hardware_key" in row:
        _object(row["hardware_key"], (*path, "hardware_key"))
    if "samples" in row:
        _int(row["samples"], (*path, "samples"), 0)
    for key in ("top1", "top5", "agreement", "max_score_diff"):
        if key in row:
            _number(row[key], (*path, key))
    if "tolerances" in row:
        tol = _object(row["tolerances"], (*path, "tolerances"))
        for key in ("top1", "top5", "agreement", "score"):
            _number(_required(tol, key, (*path, "tolerances")), (*path, "tolerances", key))
    if "shard" in row:
        _shard(row["shard"], (*path, "shard"))
    if "timing" in row:
        _timing(row["timing"], (*path, "timing"))
    _report_fields(row, path)
    if "per_sample" in row:
        _part(row["per_sample"], (*path, "per_sample"))
    for key, value in row.items():
        if key not in _WHOLE:
            row[key] = _bounded_texts(value)
    return row


TEXT_LIMIT = 1000
"""The most characters of any other text of a results file (a latency verdict's reason, a
changed sample's id, an environment value) that a page or table shows; a longer one is cut
(``_visible.shortened``: its start and a digest of the whole, so that equal texts stay equal
and different ones different)."""

_WHOLE = ("nodeid", "outcome", "kind", "shard", "per_sample", "manifest_content", *IDENTITIES)
"""Row fields read whole: keys that must match across files, what the digests check, and the
per-sample results (whose ids match samples across machines)."""


def _bounded_texts(value: Any) -> Any:
    """``value`` with every string in it (keys included) at most :data:`TEXT_LIMIT` characters;
    iterative (the nesting is already bounded by the reader's ``MAX_DEPTH``)."""
    if isinstance(value, str):
        return shortened(value, TEXT_LIMIT)
    if not isinstance(value, (dict, list)):
        return value
    root: list[Any] = [value]
    stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]  # (container, key, value)
    while stack:
        container, key, item = stack.pop()
        if isinstance(item, str):
            container[key] = shortened(item, TEXT_LIMIT)
        elif isinstance(item, list):
            copy: list[Any] = list(item)
            container[key] = copy
            stack.extend((copy, i, child) for i, child in enumerate(copy))
        elif isinstance(item, dict):
            mapping = {shortened(k, TEXT_LIMIT): child for k, child in item.items()}
            container[key] = mapping
            stack.extend((mapping, k, child) for k, child in mapping.items())
    return root[0]


def _report_fields(row: Mapping[str, Any], path: tuple[str | int, ...]) -> None:
    """The fields the report and ``mlrepro merge``/``history`` read to say why a result failed
    and what differs (docs/results.md): typed where present; a manifest content that is not
    the one its digest names is refused (an edited row would explain another pipeline)."""
    for key in ("golden_top1", "golden_top5"):
        if key in row:
            _number(row[key], (*path, key))
    if "outside_tolerance" in row:
        for i, level in enumerate(_list(row["outside_tolerance"], (*path, "outside_tolerance"))):
            _str(level, (*path, "outside_tolerance", i))
    if "latency_tolerance" in row:
        where = (*path, "latency_tolerance")
        for key, ratio in _object(row["latency_tolerance"], where).items():
            _number(ratio, (*where, key))
    if "manifest_content" in row:
        content = _object(row["manifest_content"], (*path, "manifest_content"))
        digest = row.get("manifest_digest")
        if isinstance(digest, str) and manifest_digest(content) != digest:
            raise _Invalid(
                (*path, "manifest_content"),
                "does not match the row's manifest_digest (the row was edited after it was "
                "written)",
            )
    if "changed_samples" in row:
        where = (*path, "changed_samples")
        changed = _object(row["changed_samples"], where)
        _int(_required(changed, "count", where), (*where, "count"), 0)
        samples = _list(_required(changed, "samples", where), (*where, "samples"))
        for i, sample in enumerate(samples):
            entry = _object(sample, (*where, "samples", i))
            for key in ("id", "label", "golden", "now"):
                _str(_required(entry, key, (*where, "samples", i)), (*where, "samples", i, key))
            for key in ("golden_score", "now_score"):
                if key in entry:
                    _number(entry[key], (*where, "samples", i, key))
    if "diagnosis_summary" in row:
        where = (*path, "diagnosis_summary")
        summary = _object(row["diagnosis_summary"], where)
        for key in ("cause", "lead"):
            _str(_required(summary, key, where), (*where, key))
        sections = _list(_required(summary, "sections", where), (*where, "sections"))
        for i, section in enumerate(sections):
            at = (*where, "sections", i)
            entry = _object(section, at)
            _str(_required(entry, "title", at), (*at, "title"))
            for j, line in enumerate(_list(_required(entry, "lines", at), (*at, "lines"))):
                _str(line, (*at, "lines", j))


def _created(value: Any) -> datetime:
    """The results file's ``created``: an ISO 8601 UTC time (``2026-11-24T07:09:11Z``)."""
    text = _str(value, ("created",))
    if not _CREATED.fullmatch(text):
        raise _Invalid(("created",), f"expected a UTC time like 2026-11-24T07:09:11Z, got {text!r}")
    try:
        return datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    except ValueError as exc:
        raise _Invalid(("created",), f"not a valid time: {text!r} ({exc})") from None


def created_now() -> str:
    """The ``created`` field of a results file written now."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _environment(value: Any) -> Mapping[str, Any]:
    """The machine's environment: any object, whose CPU identity and numeric fields (read by
    ``mlrepro merge``) have their types where present; older files lack them."""
    path: tuple[str | int, ...] = ("machine", "environment")
    env = _object(value, path)
    vendor = env.get("cpu_vendor")
    if vendor is not None:
        _str(vendor, (*path, "cpu_vendor"))
    if "cpu_flags" in env:
        for i, flag in enumerate(_list(env["cpu_flags"], (*path, "cpu_flags"))):
            _str(flag, (*path, "cpu_flags", i))
    for name in ("numeric_packages", "numeric_settings"):
        if name in env:
            for key, text in _object(env[name], (*path, name)).items():
                _str(text, (*path, name, key))
    bounded: Mapping[str, Any] = _bounded_texts(env)  # shown in the machine table: bounded
    return bounded


@dataclass(frozen=True)
class ResultsFile:
    """A results file, read and validated: its rows stay the plain JSON objects of the file."""

    path: Path
    format: int
    machine: str
    environment: dict[str, Any]
    shard: Shard | None
    rows: list[dict[str, Any]]
    created: datetime | None = None  # when it was written (files before the field: None)


def validate_results(document: Any, source: str = "results") -> ResultsFile:
    """Check a parsed results file; ResultsFileError naming ``source`` and the JSON path of the
    first bad field."""
    try:
        obj = _object(document, ())
        fmt = _required(obj, "format", ())
        if isinstance(fmt, bool) or not isinstance(fmt, int) or fmt not in FORMATS:
            understood = ", ".join(str(f) for f in FORMATS)
            raise _Invalid(
                ("format",),
                f"format {fmt!r} is not one this version of pytest-mlrepro reads "
                f"(it reads format {understood}; rewrite the file with this version's "
                "pytest --mlrepro-json)",
            )
        machine = _object(_required(obj, "machine", ()), ("machine",))
        name = _str(_required(machine, "name", ("machine",)), ("machine", "name"))
        if not name:
            raise _Invalid(("machine", "name"), "the machine's name is empty")
        name = shortened(name)  # shown in every table and page: bounded (the file keeps it)
        env = _environment(_required(machine, "environment", ("machine",)))
        shard_json = _required(obj, "shard", ())
        shard = None if shard_json is None else _shard(shard_json, ("shard",))
        created = _created(obj["created"]) if "created" in obj else None
        if "one_time" in obj:
            phase_account(obj["one_time"], ("one_time",))
        rows = [
            _row(row, ("results", i))
            for i, row in enumerate(_list(_required(obj, "results", ()), ("results",)))
        ]
    except _Invalid as exc:
        raise ResultsFileError(
            f"{source}: {json_path(exc.path)}: {exc.message} (not a valid results file)"
        ) from None
    return ResultsFile(
        path=Path(source),
        format=fmt,
        machine=name,
        environment=dict(env),
        shard=shard,
        rows=rows,
        created=created,
    )


def load_results(path: Path | str) -> ResultsFile:
    """Read and validate the results file at ``path`` (what ``pytest --mlrepro-json`` wrote).

    These files are other jobs' artifacts: the one bounded reader refuses a FIFO or a device
    (a link to ``/dev/zero``) without blocking, and a file over ``MAX_BYTES`` unread; the parse
    refuses nesting deeper than ``MAX_DEPTH``. Every failure is a ResultsFileError naming the
    file."""
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
    try:
        document = parse_json(raw, MAX_DEPTH, allow_nan=False)
    except UnicodeDecodeError as exc:
        raise ResultsFileError(
            f"{path}: not a results file (not UTF-8 text: {exc.reason})"
        ) from None
    except TooDeep as exc:
        raise ResultsFileError(f"{path}: not a results file: {exc}") from None
    except ValueError as exc:
        where = (
            f" (line {exc.lineno}, column {exc.colno})"
            if isinstance(exc, json.JSONDecodeError)
            else ""
        )
        message = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise ResultsFileError(
            f"{path}: not a results file: invalid JSON{where}: {message}"
        ) from None
    except MemoryError:
        raise ResultsFileError(
            f"{path}: not read: its {len(raw)} bytes do not fit in this process's memory"
        ) from None
    loaded = validate_results(document, str(path))
    return ResultsFile(
        path=path,
        format=loaded.format,
        machine=loaded.machine,
        environment=loaded.environment,
        shard=loaded.shard,
        rows=loaded.rows,
        created=loaded.created,
    )
