"""The golden store: one reviewable JSON file per model (one sample a line, so that a diff shows
which samples moved), written atomically, read back validated (docs/goldens.md)."""

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
MAX_BYTES = 256 * MIB  # ImageNet's 50,000 validation images take about 8 MiB
MAX_DEPTH = 64  # the goldens this version writes nest fewer than 20 levels
SCORE_DIGITS = 6  # significant digits kept per score: far below any tolerance, stable text


@dataclass(frozen=True)
class Golden:
    name: str
    manifest: dict[str, Any]
    environment: dict[str, Any]
    results: Results
    # The optional fields are None in goldens recorded before they existed, which still load.
    probes: dict[str, Any] | None = None  # per-step fingerprints of a few probe samples
    data: dict[str, str] | None = None  # {sample id: sha256}: the identity of the data
    manifest_file: str | None = None  # relative to the project root (posix)
    # {sample id: 16 hex digits} of each file's decoded pixels: a byte change that decodes to
    # these pixels is not a data change.
    pixels: dict[str, str] | None = None
    digest: str | None = None  # the file's sha256 as read: the shard merge compares it

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
    """ManifestError for one outside the accuracy namespace or hidden, which an update would
    otherwise overwrite."""
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


_OPTIONAL_HEAD = ("data", "manifest_file", "pixels")  # absent from goldens recorded before them


def dumps(golden: Golden) -> str:
    head = {
        "format": FORMAT,
        "name": golden.name,
        "manifest": golden.manifest,
        "environment": golden.environment,
        "metrics": golden.metrics,
    }
    # data and pixels: flat mappings, one file a line, sorted.
    for key in _OPTIONAL_HEAD:
        if getattr(golden, key) is not None:
            head[key] = getattr(golden, key)
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
    """OutputError, old golden intact, if it cannot. With ``settings`` and ``based_on``: also
    confined, locked and refused if the file changed since ``based_on``."""
    data = dumps(golden).encode("utf-8")
    if settings is not None and based_on is not None:
        write_golden(path, data, settings, based_on, rerun=rerun)
        return
    if path.parent.is_dir() and not path.parent.is_symlink():
        remove_stale_temp_files(path)
    atomic_write_bytes(path, data, what="golden", inside=golden_dir)


def manifest_is_current(recorded: dict[str, Any], manifest: Manifest) -> bool:
    """Whether the manifest a golden recorded is ``manifest`` now; keys it lacks (newer options)
    count as their defaults, so that a new option does not rewrite every golden."""
    now = manifest.normalized()
    if recorded == now:
        return True
    try:
        then = parse_manifest(recorded, "(recorded manifest)", {})
    except ManifestError:
        return False
    return then.normalized() == now


def read_json(path: Path, what: str = "golden", golden_dir: Path | None = None) -> Any:
    """None: no file; GoldenError if it cannot be read or parsed, or is over the limits."""
    found = read_document(path, what, golden_dir)
    return None if found is None else found[0]


def read_document(path: Path, what: str, golden_dir: Path | None) -> tuple[Any, str] | None:
    """Also the sha256 of the bytes, which a write based on this read compares."""
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
    """None: no file; GoldenError naming the file, line and field if it is not a valid golden."""
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
"""The goldens this process validated, by their bytes' sha256: an item reads a golden more than
once, and several items refer to one (issue 34)."""
_VALIDATED_KEPT = 8


# --- validation ----------------------------------------------------------------------------------
# A golden's shape is its types below, whose generated JSON Schema (golden.schema.json) is compiled
# by fastjsonschema; what no schema can say is checked once, here, around it (docs/goldens.md).

SCHEMA_FILE = Path(__file__).resolve().parent.parent / "golden.schema.json"

Field = tuple[str | int, ...]


def _is(title: str, **schema: Any) -> dict[str, Any]:
    """A value's schema, its ``title`` saying what it must be in the words of an error."""
    return {"title": title, **schema}


@dataclass(frozen=True)
class RecordedDataset:
    classes: Annotated[int, _is("a positive integer", minimum=1)]


@dataclass(frozen=True)
class RecordedManifest:
    """The manifest as recorded, every default filled in (only its class count is read here)."""

    dataset: RecordedDataset


@dataclass(frozen=True)
class StoredMetrics:
    samples: Annotated[int, _is("an integer")]
    top1: Annotated[float, _is("a number")]
    top5: Annotated[float, _is("a number")]


Sample = tuple[
    Annotated[str, _is("a sample id (a non-empty string)", minLength=1)],
    Annotated[int, _is("a label (an integer)")],
    Annotated[
        list[Annotated[int, _is("a class index (an integer)")]],
        _is("a non-empty list of distinct class indices", minItems=1, uniqueItems=True),
    ],
    Annotated[
        list[Annotated[float, _is("a score (a number)")]], _is("a list of scores, one per class")
    ],
]
SHA256 = _is("a sha256 (64 hex digits)", pattern="^[0-9a-f]{64}$")
PIXELS = _is("16 hex digits", pattern="^[0-9a-f]{16}$")


@dataclass(frozen=True)
class GoldenFile:
    """One golden file (golden/<name>.json), format 1; a title says what a field must be, in an
    error's words. Other keys are allowed: newer goldens still load (docs/goldens.md)."""

    format: Annotated[Literal[1], _is("1")]
    name: Annotated[str, _is("the manifest's name", minLength=1)]
    manifest: RecordedManifest
    environment: Annotated[dict[str, Any], _is("a mapping")]
    metrics: StoredMetrics
    samples: Annotated[
        list[Annotated[Sample, _is("[id, label, [classes], [scores]]")]],
        _is("a non-empty list of samples", minItems=1),
    ]
    manifest_file: Annotated[str | None, _is("a path", minLength=1)] = None
    probes: Annotated[dict[str, Any] | None, _is("a mapping")] = None
    data: Annotated[
        dict[str, str] | None, _is("a mapping of sample id to sha256", additionalProperties=SHA256)
    ] = None
    pixels: Annotated[
        dict[str, str] | None,
        _is("a mapping of sample id to a pixel hash", additionalProperties=PIXELS),
    ] = None


@dataclass(frozen=True)
class ProfiledOperator:
    name: Annotated[str, _is("a node or op name (a non-empty string)", minLength=1)]
    kind: Annotated[str, _is("an op type (a non-empty string)", minLength=1)]
    ms: Annotated[float, _is("a non-negative number (milliseconds per call)", minimum=0)]
    provider: Annotated[str | None, _is("an execution provider (a string) or null")] = None


@dataclass(frozen=True)
class LatencyProfile:
    """A latency golden's per-operator time profile of the model call (golden/latency/<name>/
    <key>.json, batches.<batch>.profile; absent where the runtime's profiler gives none).
    Operators sorted by name; milliseconds per call, each the median over 'calls' calls."""

    runtime: Annotated[str, _is("a framework name (a non-empty string)", minLength=1)]
    source: Annotated[str, _is("the profiler, in words (a string)")]
    calls: Annotated[int, _is("a positive integer", minimum=1)]
    call_ms: Annotated[float, _is("a non-negative number", minimum=0)]
    operators: Annotated[list[ProfiledOperator], _is("a list of operators")]
    operators_ms: Annotated[float | None, _is("a non-negative number", minimum=0)] = None


_TITLES = {
    "RecordedManifest": {"": {"title": "a mapping (the manifest as recorded)"}},
    "RecordedDataset": {"": {"title": "a mapping"}},
    "StoredMetrics": {"": {"title": "a mapping"}},
    "ProfiledOperator": {"": {"title": "an operator: {name, kind, provider, ms}"}},
    "LatencyProfile": {"": {"title": "a mapping (an operator profile)"}},
}


def golden_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a golden file: ``mlrepro schema golden``."""
    writer = SchemaWriter(_TITLES)
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
    """``("samples", 17, 2, 0)`` as ``samples[17][2][0]``; keys are shown as written."""
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
    """InvalidField in the words of the broken field's title."""
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
    """InvalidField naming the first wrong field."""
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
        **{key: data.get(key) for key in _OPTIONAL_HEAD},
    )


def _check_finite(data: Any) -> None:
    """Python's parser accepts NaN: the C encoder refuses one fast; only then is the document
    walked, to name the field."""
    try:
        json.dumps(data, allow_nan=False)
        return
    except ValueError:
        pass
    stack: list[tuple[Field, Any]] = [((), data)]
    while stack:  # iterative: read_json bounded the depth, this walk need not recurse either
        field, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidField(
                field,
                f"{value} is not a finite number: a golden holds only finite numbers (the file "
                "was edited or tampered with)",
            )
        if isinstance(value, dict):
            stack.extend(((*field, str(k)), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend(((*field, i), v) for i, v in enumerate(value))


def _check_samples(rows: list[list[Any]], classes: int) -> Results:
    """What the schema cannot say of the rows: unique ids, label and classes in ``0..classes-1``,
    one top-k width, as many scores as classes, best first."""
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
    """As :func:`dumps` lays it out; None where the file is laid out otherwise."""
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
    """GoldenError unless the golden has ``manifest``'s name."""
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
    """The other manifest still claiming ``path``; None when ours, unrecorded, gone or moved."""
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
