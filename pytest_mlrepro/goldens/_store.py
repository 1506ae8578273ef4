"""The golden store: one reviewable JSON file per model, written atomically, never half-written.

Layout of a golden (keys sorted, one sample per line so that a diff shows which samples moved)::

    {
      "data": {"<sample id>": "<sha256>", ...}, optional: the data it was measured on, one file
                                       a line (the labels are in "samples")
      "environment": {...},            where it was recorded
      "format": 1,
      "manifest": {...},               the manifest as recorded, every default filled in
      "manifest_file": "manifests/x.yaml",  the manifest file it was recorded from (project-
                                       relative); absent in goldens recorded before it existed
      "metrics": {"samples": N, "top1": .., "top5": ..},
      "name": "...",
      "pixels": {"<sample id>": "<hash>", ...}, optional: the identity of each file's decoded
                                       pixels (16 hex digits of the sha256 of the decode step's
                                       output), so that a file whose bytes changed but whose
                                       pixels did not is told from a data change
      "probes": {...},                 optional: per-step fingerprints of a few probe samples
      "samples": [
        ["<sample id>", <label>, [<top-k classes>], [<their scores>]],
        ...
      ]
    }

Reading a golden validates it strictly (:func:`validate`): its JSON Schema
(``pytest_mlrepro/golden.schema.json``, by jsonschema: keys and types, ``True`` is not an integer
nor ``1.0`` a class index), then what no schema can say (docs/goldens.md#validation). Keys the
schema does not name are allowed, so that goldens written by a newer version still load.

Namespaces under the golden directory: accuracy goldens are ``<golden dir>/**/*.json`` outside
the two reserved folders ``latency/`` (latency goldens, per manifest name and hardware) and
``pitfalls/`` (sensitivity tables); a manifest's ``golden:`` may only name a file of the
accuracy namespace (:func:`golden_path`). Every golden file is read and written through
:func:`read_json` / :mod:`._files`, which refuse symlinks, FIFOs and folders.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np

from .._files import (
    MIB,
    FileTooLarge,
    NotARegularFile,
    TooDeep,
    atomic_write_bytes,
    parse_json,
    read_bounded,
    remove_stale_temp_files,
)
from .._json_schema import SchemaError, SchemaWriter, Validator
from ..errors import GoldenError, GoldenNotAFile, ManifestError
from ..manifest import Manifest, parse_manifest
from ..settings import Settings, shown_path
from ._metrics import Results, accuracy
from ._writer import Based, write_golden

FORMAT = 1
MAX_BYTES = 256 * MIB
"""The largest golden file read (ImageNet's 50,000 validation images take about 8 MiB): a larger
one is refused before it is read."""
MAX_DEPTH = 64
"""The deepest nesting of a golden file (those this version writes nest fewer than 20 levels)."""
SCORE_DIGITS = 6  # significant digits kept per score: far below any tolerance, stable text


@dataclass(frozen=True)
class Golden:
    name: str
    manifest: dict[str, Any]
    environment: dict[str, Any]
    results: Results
    # Per-step fingerprints of a few probe samples, for diagnosis (_step_fingerprints.py); None
    # in goldens recorded before they existed, which still load.
    probes: dict[str, Any] | None = None
    # {sample id: sha256} of the files the results were measured on (with the labels in
    # ``results``, the identity of the data); None in goldens recorded before it existed.
    data: dict[str, str] | None = None
    # The manifest file it was recorded from, relative to the project root (posix); None in
    # goldens recorded before it was kept, which still load and get it on their next update.
    manifest_file: str | None = None
    # {sample id: 16 hex digits} of each file's decoded pixels (the decode step's output, as
    # diagnosis/_data_changes.py hashes it): a byte change that decodes to these pixels is not
    # a data change. None in goldens recorded before it existed (enrichment adds it).
    pixels: dict[str, str] | None = None
    # The sha256 of the golden file as read (None: not read from a file): the golden's identity
    # in a results row, which the shard merge compares (two recordings never merge).
    digest: str | None = None

    @property
    def metrics(self) -> dict[str, Any]:
        return metrics_of(self.results)


def metrics_of(results: Results) -> dict[str, Any]:
    """The aggregates a golden stores beside its samples (and checks against them when read)."""
    top1, top5 = accuracy(results.topk, results.labels)
    return {"samples": len(results.ids), "top1": round(top1, 4), "top5": round(top5, 4)}


# Folders of the golden directory that belong to other kinds of golden: never accuracy goldens.
RESERVED = ("latency", "pitfalls")


def golden_path(manifest: Manifest, settings: Settings) -> Path:
    """The manifest's ``golden:`` (from the project root), else ``<golden dir>/<name>.json``.

    ``golden:`` must name a ``.json`` file in the accuracy namespace: inside the golden
    directory, outside its reserved folders (``latency/``, ``pitfalls/``), no hidden component
    (temporary files are hidden). Anything else is an invalid manifest: the update would
    otherwise overwrite another kind of golden or any project file."""
    if manifest.golden is None:
        return settings.golden_dir / f"{manifest.name}.json"
    lexical = Path(os.path.normpath(settings.root / manifest.golden))
    # The folder is resolved (a symlinked golden directory is fine); the file itself is not: a
    # symlink there is refused when the golden is read or written.
    candidate = lexical.parent.resolve() / lexical.name
    gdir = settings.golden_dir
    if not candidate.is_relative_to(gdir) or candidate == gdir:
        raise manifest.error(
            ("golden",),
            f"{manifest.golden!r} is outside the golden directory "
            f"({shown_path(gdir, settings.root)}/): accuracy goldens live there; name a .json "
            "file inside it (or leave 'golden' out)",
        )
    parts = candidate.relative_to(gdir).parts
    if len(parts) > 1 and parts[0] in RESERVED:
        raise manifest.error(
            ("golden",),
            f"{manifest.golden!r} is in {shown_path(gdir, settings.root)}/{parts[0]}/, "
            f"reserved for {parts[0]} goldens; name a .json file outside "
            f"{' and '.join(f'{r}/' for r in RESERVED)}",
        )
    if any(part.startswith(".") for part in parts):
        raise manifest.error(("golden",), f"{manifest.golden!r}: no hidden file or folder")
    return candidate


def manifest_file_of(manifest_path: Path, settings: Settings) -> str:
    """What a golden records as its manifest file: the path relative to the project root."""
    return shown_path(Path(os.path.abspath(manifest_path)), settings.root)


def _round(value: float) -> float:
    return float(f"{value:.{SCORE_DIGITS}g}")


def rounded_scores(scores: np.ndarray) -> np.ndarray:
    """Scores as the golden keeps them, so that a fresh run and its golden are compared alike."""
    return np.vectorize(_round, otypes=[np.float64])(scores) if scores.size else scores


def dumps(golden: Golden) -> str:
    head = {
        "format": FORMAT,
        "name": golden.name,
        "manifest": golden.manifest,
        "environment": golden.environment,
        "metrics": golden.metrics,
    }
    if golden.data is not None:
        head["data"] = golden.data  # a flat mapping: one file a line, sorted
    if golden.manifest_file is not None:
        head["manifest_file"] = golden.manifest_file
    if golden.pixels is not None:
        head["pixels"] = golden.pixels  # a flat mapping: one file a line, sorted
    text = json.dumps(head, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    r = golden.results
    rows = [
        json.dumps(
            [sample, int(label), [int(c) for c in classes], [_round(float(s)) for s in scores]],
            ensure_ascii=False,
            allow_nan=False,
        )
        for sample, label, classes, scores in zip(r.ids, r.labels, r.topk, r.topk_scores)
    ]
    body = ",\n    ".join(rows)
    probes = "" if golden.probes is None else f',\n  "probes": {_dump_probes(golden.probes)}'
    return text[:-2] + probes + f',\n  "samples": [\n    {body}\n  ]\n}}\n'


def _dump_probes(probes: dict[str, Any]) -> str:
    """The probes block: keys sorted, one fingerprint (probe × step) per line."""
    parts = []
    for key in sorted(probes):
        value = probes[key]
        if key == "fingerprints" and isinstance(value, list):
            lines = ",\n      ".join(
                json.dumps(row, sort_keys=True, ensure_ascii=False, allow_nan=False)
                for row in value
            )
            rendered = f"[\n      {lines}\n    ]" if value else "[]"
        elif key == "layers" and isinstance(value, dict) and isinstance(value.get("rows"), list):
            # Layer fingerprints (diagnosis/_layer_fingerprints.py): one layer per line, after
            # the other keys.
            rest = {k: v for k, v in value.items() if k != "rows"}
            head = json.dumps(rest, sort_keys=True, allow_nan=False)[:-1] + ", " if rest else "{"
            rows = ",\n        ".join(
                json.dumps(row, ensure_ascii=False, allow_nan=False) for row in value["rows"]
            )
            rendered = f'{head}"rows": [\n        {rows}\n      ]}}'
        else:
            rendered = json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=False)
        parts.append(f"    {json.dumps(key)}: {rendered}")
    return "{\n" + ",\n".join(parts) + "\n  }"


def write(
    path: Path,
    golden: Golden,
    golden_dir: Path | None = None,
    *,
    settings: Settings | None = None,
    based_on: Based | None = None,
    rerun: str = "",
) -> None:
    """Replace the golden at ``path`` atomically (readers see the old file or the new one), first
    removing temporary files that killed writers left beside it. OutputError (old golden intact)
    if it cannot be written, or if ``path`` is a symlink, folder or FIFO, or a folder between
    ``golden_dir`` and it is a symlink.

    With ``settings`` and ``based_on`` (what every writer of pytest-mlrepro passes), the write
    goes the one way of :mod:`._writer`: the golden directory confined, the golden's lock held,
    and refused (GoldenChanged, naming ``rerun``) when the file is no longer what ``based_on``
    read. Without them (a library user's own script) only the atomic replacement is made."""
    data = dumps(golden).encode("utf-8")
    if settings is not None and based_on is not None:
        write_golden(path, data, settings, based_on, rerun=rerun)
        return
    if path.parent.is_dir() and not path.parent.is_symlink():
        remove_stale_temp_files(path)
    atomic_write_bytes(path, data, what="golden", inside=golden_dir)


def manifest_is_current(recorded: dict[str, Any], manifest: Manifest) -> bool:
    """Whether the manifest a golden recorded is ``manifest`` as it is now. Keys the recording
    lacks (options added to pytest-mlrepro since) count as their defaults, so that a new option
    does not rewrite every golden; a recording that no longer validates is not current."""
    now = manifest.normalized()
    if recorded == now:
        return True
    try:
        then = parse_manifest(recorded, "(recorded manifest)", {})
    except ManifestError:
        return False
    return then.normalized() == now


def read_json(path: Path, what: str = "golden", golden_dir: Path | None = None) -> Any:
    """The JSON document at ``path``; None if there is no file; GoldenError (naming the line of a
    syntax error) if it cannot be read or parsed, or if it is a symlink, FIFO or folder (or a
    folder between ``golden_dir`` and it is a symlink), larger than ``MAX_BYTES`` or nested
    deeper than ``MAX_DEPTH``. Shared by every kind of golden file."""
    found = read_document(path, what, golden_dir)
    return None if found is None else found[0]


def read_document(path: Path, what: str, golden_dir: Path | None) -> tuple[Any, str] | None:
    """:func:`read_json`'s document and the sha256 of the file's bytes (the digest a write
    based on this read compares, :mod:`._writer`); a GoldenError for bytes that are no valid
    JSON carries their ``digest`` too."""
    try:
        raw = read_bounded(path, MAX_BYTES, inside=golden_dir)
    except NotARegularFile as exc:
        raise GoldenNotAFile(
            f"{exc}: a {what} must be a regular file (a symlink could lead anywhere, a FIFO "
            "would block the run); replace it with the file itself, or remove it and record "
            "it again with --mlrepro-update"
        ) from None
    except FileTooLarge as exc:
        raise GoldenError(
            f"{exc} (the limit for a {what}); remove it and record it again with --mlrepro-update"
        ) from None
    except OSError as exc:
        raise GoldenError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from None
    if raw is None:
        return None
    digest = hashlib.sha256(raw).hexdigest()
    try:
        return parse_json(raw, MAX_DEPTH), digest
    except UnicodeDecodeError as exc:
        error = GoldenError(f"{path}: cannot read the {what}: {exc}")
    except json.JSONDecodeError as exc:
        error = GoldenError(
            f"{path}:{exc.lineno}: not valid JSON ({exc.msg}); fix it or record "
            "it again with --mlrepro-update"
        )
    except (TooDeep, ValueError) as exc:
        error = GoldenError(
            f"{path}: not a valid {what} ({exc}); fix it or record it again with --mlrepro-update"
        )
    error.digest = digest
    raise error from None


def read(path: Path, golden_dir: Path | None = None) -> Golden | None:
    """The golden at ``path``, validated (:func:`validate`); None if there is none; GoldenError
    naming the file, the line where it can and the field if the file is not a valid golden."""
    found = read_document(path, "golden", golden_dir)
    if found is None:
        return None
    data, digest = found
    known = _validated.get(digest)
    if known is not None:
        return known
    try:
        golden = dataclasses.replace(validate(data), digest=digest)
    except InvalidField as exc:
        line = _line_of(path, exc.field, data)
        where = f"{path}:{line}" if line else str(path)
        field = render_field(exc.field)
        error = GoldenError(
            f"{where}: {field}: {exc.message}; fix it or record it again with --mlrepro-update"
        )
        error.digest = digest
        raise error from None
    for array in (golden.results.labels, golden.results.topk, golden.results.topk_scores):
        array.flags.writeable = False  # shared by every later read of these bytes
    _validated[digest] = golden
    if len(_validated) > _VALIDATED_KEPT:
        del _validated[next(iter(_validated))]
    return golden


_validated: dict[str, Golden] = {}
"""The goldens this process has validated, by the sha256 of their bytes: an item reads its
reference's golden before its run and again for the verdict, and six items of the example refer
to two goldens; validating 1000 samples takes 50-100 ms (issue 34). Bytes read again are still
hashed and parsed; only the same bytes skip the validation."""
_VALIDATED_KEPT = 8


# --- validation ----------------------------------------------------------------------------------
# A golden's shape is its types below, whose generated JSON Schema (golden.schema.json) is compiled
# by fastjsonschema; what no schema can say is checked once, here, around it (docs/goldens.md).

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "golden.schema.json"

Field = tuple[str | int, ...]


def _is(title: str, **schema: Any) -> dict[str, Any]:
    """A value's schema, its ``title`` saying what it must be in the words of an error."""
    return {"title": title, **schema}


def _says(title: str, **schema: Any) -> dict[str, Any]:
    """A field's metadata: its schema, titled."""
    return {"schema": _is(title, **schema)}


@dataclass(frozen=True)
class RecordedDataset:
    classes: int = dataclasses.field(metadata=_says("a positive integer", minimum=1))


@dataclass(frozen=True)
class RecordedManifest:
    """The manifest as recorded, every default filled in (only its class count is read here)."""

    dataset: RecordedDataset


@dataclass(frozen=True)
class StoredMetrics:
    samples: int = dataclasses.field(metadata=_says("an integer"))
    top1: float = dataclasses.field(metadata=_says("a number"))
    top5: float = dataclasses.field(metadata=_says("a number"))


ClassIndex = Annotated[int, _is("a class index (an integer)")]
Sample = tuple[
    Annotated[str, _is("a sample id (a non-empty string)", minLength=1)],
    Annotated[int, _is("a label (an integer)")],
    Annotated[
        list[ClassIndex],
        _is("a non-empty list of distinct class indices", minItems=1, uniqueItems=True),
    ],
    Annotated[
        list[Annotated[float, _is("a score (a number)")]], _is("a list of scores, one per class")
    ],
]


@dataclass(frozen=True)
class GoldenFile:
    """One golden file (golden/<name>.json), format 1. A title says, in the words of an error
    message, what a field must be. The checks no schema can say are pytest_mlrepro/goldens/
    _store.py's (docs/goldens.md). Keys not named here are allowed: newer goldens still load."""

    format: Literal[1] = dataclasses.field(metadata=_says("1"))
    name: str = dataclasses.field(metadata=_says("the manifest's name", minLength=1))
    manifest: RecordedManifest
    environment: dict[str, Any] = dataclasses.field(metadata=_says("a mapping"))
    metrics: StoredMetrics
    samples: list[Sample] = dataclasses.field(
        metadata=_says(
            "a non-empty list of samples",
            minItems=1,
            items={"title": "[id, label, [classes], [scores]]"},
        )
    )
    manifest_file: str | None = dataclasses.field(
        default=None, metadata=_says("a path", minLength=1)
    )
    probes: dict[str, Any] | None = dataclasses.field(default=None, metadata=_says("a mapping"))
    data: dict[str, str] | None = dataclasses.field(
        default=None,
        metadata=_says(
            "a mapping of sample id to sha256",
            additionalProperties=_is("a sha256 (64 hex digits)", pattern="^[0-9a-f]{64}$"),
        ),
    )
    pixels: dict[str, str] | None = dataclasses.field(
        default=None,
        metadata=_says(
            "a mapping of sample id to a pixel hash",
            additionalProperties=_is("16 hex digits", pattern="^[0-9a-f]{16}$"),
        ),
    )


@dataclass(frozen=True)
class ProfiledOperator:
    name: str = dataclasses.field(
        metadata=_says("a node or op name (a non-empty string)", minLength=1)
    )
    kind: str = dataclasses.field(metadata=_says("an op type (a non-empty string)", minLength=1))
    ms: float = dataclasses.field(
        metadata=_says("a non-negative number (milliseconds per call)", minimum=0)
    )
    provider: str | None = dataclasses.field(
        default=None, metadata=_says("an execution provider (a string) or null")
    )


@dataclass(frozen=True)
class LatencyProfile:
    """A latency golden's per-operator time profile of the model call (golden/latency/<name>/
    <key>.json, batches.<batch>.profile; absent where the runtime's profiler gives none).
    Operators sorted by name; milliseconds per call, each the median over 'calls' calls."""

    runtime: str = dataclasses.field(
        metadata=_says("a framework name (a non-empty string)", minLength=1)
    )
    source: str = dataclasses.field(metadata=_says("the profiler, in words (a string)"))
    calls: int = dataclasses.field(metadata=_says("a positive integer", minimum=1))
    call_ms: float = dataclasses.field(metadata=_says("a non-negative number", minimum=0))
    operators: list[ProfiledOperator] = dataclasses.field(metadata=_says("a list of operators"))
    operators_ms: float | None = dataclasses.field(
        default=None, metadata=_says("a non-negative number", minimum=0)
    )


_TITLES = {
    "RecordedManifest": {"": {"title": "a mapping (the manifest as recorded)"}},
    "RecordedDataset": {"": {"title": "a mapping"}},
    "StoredMetrics": {"": {"title": "a mapping"}},
    "ProfiledOperator": {"": {"title": "an operator: {name, kind, provider, ms}"}},
    "LatencyProfile": {"": {"title": "a mapping (an operator profile)"}},
}


def golden_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a golden file, made from :class:`GoldenFile` (and of
    a latency golden's profile, under ``$defs``): ``mlrepro schema golden``."""
    writer = SchemaWriter(
        "https://json-schema.org/draft/2020-12/schema",
        "$defs",
        _TITLES,
        closed=False,
        defaults=False,
        nullable=False,
    )
    writer.ref(LatencyProfile)
    head = {"$id": "https://pytest-mlrepro.invalid/golden.schema.json"}
    return writer.document(GoldenFile, **head, title="a golden (a mapping)")


@functools.cache
def schema_validator(definition: str = "") -> Validator:
    """The golden schema's validator (of its ``$defs`` entry ``definition``), compiled once."""
    schema = golden_schema()
    if definition:
        schema = {"$defs": schema["$defs"], "$ref": f"#/$defs/{definition}"}
    return Validator(schema)


def title_of(schema: dict[str, Any], error: SchemaError) -> str:
    """What the value at ``error`` should be: its (referenced) schema's title."""
    sub = error.schema
    if error.rule == "required":
        missing = next(k for k in sub["required"] if k not in error.value)
        sub = sub["properties"].get(missing, {})
    if "$ref" in sub:
        sub = schema["$defs"][sub["$ref"].rsplit("/", 1)[-1]]
    return str(sub.get("title") or error.message)


class InvalidField(ValueError):
    """A field of a golden document is invalid: ``field`` is its path (keys and indices)."""

    def __init__(self, field: Field, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def render_field(field: Field) -> str:
    """``("samples", 17, 2, 0)`` as ``samples[17][2][0]``; ``()`` as ``(document)``. Keys are
    shown as written (``data.img00.png``): a golden's keys are sample ids and field names."""
    text = ""
    for part in field:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text or "(document)"


_KINDS: dict[type, str] = {
    bool: "a boolean",
    str: "a string",
    float: "a float",
    int: "an integer",
    list: "a list",
    dict: "a mapping",
}


def _describe(value: Any) -> str:
    kind = _KINDS.get(type(value), "null")
    shown = repr(value) if type(value) in (float, int) else json.dumps(value)
    return f"{shown} ({kind})" if len(shown) <= 40 else kind


def _check_schema(data: Any) -> None:
    """InvalidField for the first field that breaks the schema, in the words of that field's
    title ("expected a class index (an integer), got "3" (a string)")."""
    validator = schema_validator()
    error = validator.first_error(data)
    if error is None:
        return
    expected = title_of(validator.schema, error)
    if error.rule == "required":
        missing = next(k for k in error.schema["required"] if k not in error.value)
        raise InvalidField(
            (*error.path, missing), f"expected {expected}, got nothing (no such key)"
        )
    raise InvalidField(error.path, f"expected {expected}, got {_describe(error.value)}")


def validate(data: Any) -> Golden:
    """A golden document (parsed JSON) as a :class:`Golden`, or InvalidField naming the first
    field that is wrong: first the numbers (none may be NaN or infinite), then the schema, then
    what the samples mean (:func:`_check_samples`) and the metrics they give."""
    _check_finite(data)
    _check_schema(data)
    results = _check_samples(data["samples"], data["manifest"]["dataset"]["classes"])
    _check_metrics(data["metrics"], results)
    return Golden(
        name=data["name"],
        manifest=data["manifest"],
        environment=data["environment"],
        results=results,
        probes=data.get("probes"),
        data=data.get("data"),
        manifest_file=data.get("manifest_file"),
        pixels=data.get("pixels"),
    )


def _not_finite(value: float) -> str:
    return (
        f"{value} is not a finite number: a golden holds only finite numbers (the file was "
        "edited or tampered with)"
    )


def _check_finite(data: Any) -> None:
    """Every number of the document is finite. Python's JSON parser accepts ``NaN`` and
    ``Infinity``, which JSON (so JSON Schema) does not know and this store never writes: one in a
    golden was put there by hand, and a NaN compares unequal to everything, so that no later
    check may see it.

    JSON's C encoder refuses a non-finite number at C speed (no Python line runs per value, so
    coverage's tracer does not pay for each of the golden's thousands of numbers); only a
    document it refuses is walked, to name the field."""
    try:
        json.dumps(data, allow_nan=False)
        return
    except ValueError:
        pass
    stack: list[tuple[Field, Any]] = [((), data)]
    while stack:  # iterative: read_json bounded the depth, this walk need not recurse either
        field, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidField(field, _not_finite(value))
        if isinstance(value, dict):
            stack.extend(((*field, str(k)), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend(((*field, i), v) for i, v in enumerate(value))


def _check_samples(rows: list[list[Any]], classes: int) -> Results:
    """What the schema cannot say of the rows ``[id, label, [classes], [scores]]`` it passed:
    unique ids, label and classes in ``0..classes-1`` (the recorded class count), one top-k
    width, as many scores as classes, best first."""
    seen: set[str] = set()
    width = len(rows[0][2])
    for i, (sample, label, top, scores) in enumerate(rows):
        if sample in seen:
            raise InvalidField(("samples", i, 0), f"sample id {sample!r} appears twice")
        seen.add(sample)
        indices: list[tuple[Field, int, str]] = [(("samples", i, 1), label, "label")]
        indices += [(("samples", i, 2, j), c, "class index") for j, c in enumerate(top)]
        for where, value, what in indices:
            if type(value) is not int:  # JSON Schema counts 1.0 an integer: written by hand here
                raise InvalidField(where, f"expected a {what} (an integer), got {_describe(value)}")
            if not 0 <= value < classes:
                raise InvalidField(
                    where,
                    f"{what} {value} is out of range: the recorded manifest has {classes} "
                    f"classes (0..{classes - 1})",
                )
        if len(top) != width:
            raise InvalidField(
                ("samples", i, 2), f"{len(top)} classes, the first sample has {width}"
            )
        if len(scores) != len(top):
            raise InvalidField(
                ("samples", i, 3), f"expected a list of {len(top)} scores, one per class"
            )
        for j in range(1, len(scores)):
            if scores[j] > scores[j - 1]:
                raise InvalidField(
                    ("samples", i, 3, j),
                    f"scores must be best first: {scores[j]} after {scores[j - 1]}",
                )
    return Results(
        ids=tuple(row[0] for row in rows),
        labels=np.asarray([row[1] for row in rows], np.int64),
        topk=np.asarray([row[2] for row in rows], np.int64),
        topk_scores=np.asarray([row[3] for row in rows], np.float64),
    )


def _check_metrics(metrics: dict[str, Any], results: Results) -> None:
    """The stored aggregates are what the stored samples give (as :attr:`Golden.metrics`)."""
    for key, want in metrics_of(results).items():
        if abs(metrics[key] - want) > 1e-9:
            raise InvalidField(
                ("metrics", key),
                f"{_describe(metrics[key])} contradicts the stored samples, which give {want}",
            )


def _line_of(path: Path, field: Field, data: Any = None) -> int | None:
    """The line of ``field`` in the golden at ``path`` (parsed: ``data``), for the layout
    :func:`dumps` writes (one sample per line, top-level keys at two spaces); None where the file
    is laid out otherwise."""
    try:
        lines = (read_bounded(path, MAX_BYTES) or b"").decode("utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    if not field:
        return None
    key = field[0]
    start = next((n for n, line in enumerate(lines) if line.startswith(f'  "{key}":')), None)
    if start is None:
        return None
    if key == "samples" and len(field) > 1 and isinstance(field[1], int):
        n = start + 1 + field[1]
        if n >= len(lines) or not isinstance(data, dict):
            return None
        try:  # the line must hold exactly that sample (dumps compares NaN alike)
            same = json.dumps(json.loads(lines[n].strip().rstrip(","))) == json.dumps(
                data["samples"][field[1]]
            )
        except (ValueError, LookupError, TypeError, RecursionError):
            return None
        return n + 1 if same else None
    if len(field) > 1 and isinstance(field[1], str):
        for n in range(start + 1, len(lines)):
            if lines[n].startswith(f'    "{field[1]}":'):
                return n + 1
            if lines[n].startswith("  ") and not lines[n].startswith("   "):
                break
    return start + 1


# --- ownership -----------------------------------------------------------------------------------


def check_owner(golden: Golden, path: Path, manifest: Manifest, shown: Sequence[str]) -> None:
    """The golden belongs to ``manifest``: same name. ``shown`` = (golden, manifest) as shown.
    GoldenError otherwise (an update may replace it: the name is the golden's content)."""
    if golden.name != manifest.name:
        line = _line_of(path, ("name",))
        where = f"{shown[0]}:{line}" if line else shown[0]
        raise GoldenError(
            f"{where}: name: the golden belongs to {golden.name!r}, not to {manifest.name!r} "
            f"({shown[1]}); fix it or record it again with --mlrepro-update"
        )


def claimed_by_another(
    golden: Golden, path: Path, manifest: Manifest, settings: Settings
) -> str | None:
    """The manifest file (as recorded) that this golden was recorded from, when that is another
    manifest that exists and still claims ``path``; None when it is ours, unrecorded, or the
    other file is gone or claims another golden (the manifest was moved or renamed)."""
    from ..manifest import load_manifest

    recorded = golden.manifest_file
    if recorded is None or recorded == manifest_file_of(manifest.path, settings):
        return None
    other = settings.root / recorded
    if not other.is_file():
        return None
    if other.resolve() == Path(os.path.abspath(manifest.path)).resolve():
        return None
    try:
        loaded = load_manifest(other, display=recorded)
        if golden_path(loaded, settings) != path:
            return None
    except ManifestError:
        pass  # a broken manifest may still be the owner: refuse rather than overwrite
    return recorded
