"""The results file as types: one frozen dataclass per object of the file, and the file's JSON
Schema generated from them (:func:`results_schema`), so that the shape is said once."""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from .._json_schema import SchemaWriter
from .._phases import PHASES
from .._status import Status as Status
from ..data import MAX_SHARDS, Shard
from ..manifest import Tolerances

FORMAT = 2
"""The format this version writes."""
FORMATS = (2,)
"""The formats this version reads (format 1 rows carry no per-sample results: nothing to merge)."""
MAX_CLASS = (1 << 31) - 1
"""The largest class index read (int32): 10**30 is a field error, not an ``OverflowError``."""
MAX_ROWS = 10_000
"""The most rows a results file holds (``_format.MAX_ROWS`` says why)."""
MAX_WHOLE = (1 << 53) - 1
"""The largest other whole number read (a count): exact as a JSON number anywhere."""
SHA256 = {"pattern": "^[0-9a-f]{64}$", "description": "a sha256 in 64 lower-case hex digits"}
CREATED = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?Z$"

_T = typing.TypeVar("_T")
Outcome = Literal["passed", "failed", "skipped"]


def _says(description: str = "", **schema: Any) -> Any:
    if description:
        schema["description"] = description
    return {"schema": schema}


def _optional(description: str = "", **schema: Any) -> Any:
    """An optional field (absent in older files and in rows of other kinds)."""
    return field(default=None, metadata=_says(description, **schema))


def _listed(label: str, description: str = "", **schema: Any) -> Any:
    """An optional field the matrix lists as a column headed ``label`` (:data:`LISTED`)."""
    return field(default=None, metadata={**_says(description, **schema), "label": label})


@dataclass(frozen=True)
class SampleResults:
    """Per-sample results of one evaluation (``goldens.Results`` as JSON)."""

    ids: list[str] = field(metadata=_says("sample ids, one per sample", uniqueItems=True))
    labels: list[int] = field(metadata=_says(items={"minimum": 0, "maximum": MAX_CLASS}))
    topk: list[list[int]] = field(
        metadata=_says(
            "each sample's top-k classes, best first",
            items={"minItems": 1, "items": {"minimum": 0, "maximum": MAX_CLASS}},
        )
    )
    topk_scores: list[list[float]] = field(
        metadata=_says("their scores (as goldens keep them)", items={"minItems": 1})
    )


@dataclass(frozen=True)
class PerSample:
    """An accuracy row's per-sample results: this run's, the golden's for the same samples
    (null: nothing was compared) and, per sample in both, the largest score difference."""

    now: SampleResults
    golden: SampleResults | None
    score_diff: dict[str, float] = field(
        metadata=_says(
            "for each sample in both: max |score now at the golden's top-k classes - golden score|",
            additionalProperties={"minimum": 0},
        )
    )


@dataclass(frozen=True)
class PhaseTimes:
    """Wall and CPU seconds (the process's, every thread's) of one phase."""

    wall: float = field(metadata=_says(minimum=0))
    cpu: float = field(metadata=_says(minimum=0))


PHASE_ACCOUNT = _says(
    "where time went, by phase; phases that took no time left out",
    propertyNames={"enum": list(PHASES)},
)


@dataclass(frozen=True)
class Timing:
    """A row's measured durations (``seconds``: the model's run over the data set, a list for
    the determinism item's runs; ``call``: the call as pytest timed it; ``phases``: where the
    call's time went)."""

    call: float | None = _optional(minimum=0)
    phases: dict[str, PhaseTimes] | None = field(default=None, metadata=PHASE_ACCOUNT)
    seconds: Any = None


@dataclass(frozen=True)
class StaleGolden:
    """A latency golden the machine beats below ratio 0.5, with the command that re-records
    it."""

    ratio: float
    command: str


@dataclass(frozen=True)
class OperatorShare:
    """An operator (or, compared by op type, an op type) that took part of a latency
    regression's added time: its time per call, golden and now (null: not run there), in ms."""

    name: str
    kind: str
    added_ms: float
    share: float = field(metadata=_says("of the added time", minimum=0, maximum=1))
    golden_ms: float | None = None
    now_ms: float | None = None


@dataclass(frozen=True)
class OpTypeShare:
    """An op type's time per call and node count, golden and now (ms)."""

    kind: str
    golden_ms: float
    now_ms: float
    golden_nodes: int
    now_nodes: int
    added_ms: float
    share: float = field(metadata=_says("of the time the op types added", minimum=0, maximum=1))


@dataclass(frozen=True)
class OperatorChange:
    """A node run under its golden name as another op type or by another provider."""

    name: str
    golden_kind: str
    now_kind: str
    change: str
    golden_provider: str | None = None
    now_provider: str | None = None


@dataclass(frozen=True)
class Operators:
    """A latency regression's operator diagnosis (docs/latency.md, "Which operators got
    slower"): the golden's operator profile compared with today's, or why not (``missing``:
    ``golden``, the golden has none; ``now``, the runtime gives none, ``why``)."""

    runtime: str
    compared: bool
    missing: str | None = None
    why: str | None = None
    golden_ms: float | None = _optional("the operators' time per call in the golden (ms)")
    now_ms: float | None = None
    golden_call_ms: float | None = None
    now_call_ms: float | None = None
    added_ms: float | None = _optional("the sum of every operator's increase (ms per call)")
    by_node: bool | None = _optional("compared node by node (else op type by op type)")
    matched: float | None = None
    pattern: Literal["evenly", "concentrated", "none"] | None = None
    covered: float | None = None
    top3: float | None = None
    slowed: float | None = None
    spread: float | None = None
    new_share: float | None = None
    ratios: tuple[float | None, ...] = ()
    golden_nodes: int | None = None
    now_nodes: int | None = None
    unfused: bool | None = None
    dequantised: bool | None = None
    operators: tuple[OperatorShare, ...] = ()
    kinds: tuple[OpTypeShare, ...] = ()
    new_kinds: tuple[OpTypeShare, ...] = ()
    gone_kinds: tuple[OpTypeShare, ...] = ()
    changes: tuple[OperatorChange, ...] = ()


@dataclass(frozen=True)
class ChangedSample:
    """A sample whose top-1 changed against the golden, classes as ``index name``."""

    id: str
    label: str
    golden: str
    now: str
    golden_score: float | None = None
    now_score: float | None = None


@dataclass(frozen=True)
class ChangedSamples:
    """The samples whose top-1 changed: the first 100 of them and how many there are."""

    count: int = field(metadata=_says(minimum=0, maximum=MAX_WHOLE))
    samples: tuple[ChangedSample, ...]


@dataclass(frozen=True)
class DiagnosisSection:
    title: str
    lines: tuple[str, ...]


@dataclass(frozen=True)
class DiagnosisSummary:
    """A diagnosed drift as a row keeps it: the cause (a pitfall category, ``environment``,
    ``model``…), the lead sentence and the evidence sections as the terminal shows them."""

    cause: str
    lead: str
    sections: tuple[DiagnosisSection, ...] = ()

    def section(self, starts: str) -> tuple[str, ...]:
        return next((s.lines for s in self.sections if s.title.startswith(starts)), ())


@dataclass(frozen=True)
class FailedShard:
    """A shard that failed on its own, which fails the merged row."""

    shard: str
    nodeid: str
    verdict: str | None = None


@dataclass(frozen=True)
class JudgedStatistic:
    """One statistic of a latency measurement judged against its golden (``latency.Judgement``
    as a row keeps it, in ms)."""

    statistic: str
    golden_ms: float
    now_ms: float
    ratio: float
    outcome: str | None = None
    normalised: float | None = None


@dataclass(frozen=True)
class Measurement:
    """One latency measurement's distribution (ms) and its judged statistics."""

    p50_ms: float
    rounds: int
    min_ms: float | None = None
    p90_ms: float | None = None
    p99_ms: float | None = None
    mean_ms: float | None = None
    stddev_ms: float | None = None
    iqr_ms: float | None = None
    judgements: tuple[JudgedStatistic, ...] = ()


@dataclass(frozen=True)
class Row:
    """One item's result in a results file (docs/results.md says what each field is)."""

    nodeid: str
    outcome: Outcome
    status: Status | None = field(
        default=None,
        metadata=_says("the check's standing (files before the field: derived from the verdict)"),
    )
    runs: int | None = _optional("how many times the item ran (absent: once)", minimum=2)
    kind: str | None = None
    manifest: str | None = _optional("the manifest's name")
    manifest_file: str | None = _optional("the manifest's path relative to the rootdir")
    manifest_digest: str | None = _optional(**SHA256)
    data_identity: str | None = _optional(**SHA256)
    golden_digest: str | None = _optional(**SHA256)
    device: str | None = None
    framework: str | None = None
    framework_version: str | None = None
    hardware_key: dict[str, Any] | None = None
    hardware_slug: str | None = None
    samples: int | None = _optional(minimum=0, maximum=MAX_WHOLE)
    top1: float | None = _optional("top-1 accuracy in percent", minimum=0, maximum=100)
    top5: float | None = _optional("top-5 accuracy in percent", minimum=0, maximum=100)
    agreement: float | None = _optional(
        "the share of samples whose top-1 is the golden's", minimum=0, maximum=1
    )
    max_score_diff: float | None = _optional(minimum=0)
    verdict: str | None = None
    golden: str | None = None
    tolerances: Tolerances | None = None
    shard: Shard | None = None
    timing: Timing | None = None
    per_sample: PerSample | None = None
    p50_ms: float | None = _optional(minimum=0)
    golden_p50_ms: float | None = _optional(minimum=0)
    ratio_to_golden: float | None = _optional(minimum=0)
    decided_by: str | None = None
    stale_golden: StaleGolden | None = None
    operators: Operators | None = None
    manifest_content: dict[str, Any] | None = None
    golden_top1: float | None = _optional("the golden's top-1 in percent", minimum=0, maximum=100)
    golden_top5: float | None = _optional("the golden's top-5 in percent", minimum=0, maximum=100)
    top5_changed: int | None = _listed(
        "top-5 changed",
        "accuracy rows compared with a golden: the samples whose top-5 classes, in order, are "
        "not the golden's",
        minimum=0,
        maximum=MAX_WHOLE,
    )
    outside_tolerance: tuple[str, ...] = ()
    changed_samples: ChangedSamples | None = None
    diagnosis: str | None = None
    diagnosis_summary: DiagnosisSummary | None = None
    latency_tolerance: dict[str, float] | None = None
    shards: int | None = _optional("merged from this many shard items", minimum=1)
    batch: int | None = _optional("latency rows: the batch size", minimum=1)
    notes: tuple[str, ...] = ()
    top_k: int | None = _optional("the k of ``top5`` when under 5 (absent: 5)", minimum=1)
    controls: dict[str, Any] | None = field(default=None, metadata=_says("controls that held"))
    data: str | None = _optional("where the data set was read from")
    data_changed: str | None = None
    nonfinite_samples: int | None = _optional(minimum=0, maximum=MAX_WHOLE)
    golden_enriched: tuple[str, ...] = ()
    failed_shards: tuple[FailedShard, ...] = ()
    reference_verdict: str | None = None
    reference: str | None = _optional("the reference manifest's name")
    reference_samples: int | None = _optional(minimum=0, maximum=MAX_WHOLE)
    reference_agreement: float | None = _optional(minimum=0, maximum=1)
    reference_top1_ratio: float | None = None
    reference_score_space: str | None = None
    reference_max_score_diff: float | None = _optional(minimum=0)
    intra_op_threads: int | str | None = None
    inter_op_threads: int | str | None = None
    graph_optimization_level: Any = None
    providers: Any = None
    attempts: int | None = _optional("latency rows: attempts measured", minimum=0)
    window: tuple[float, ...] = ()
    contention: float | None = None
    changed: dict[str, list[Any]] | None = field(
        default=None, metadata=_says("latency settings changed: [golden, now]")
    )
    measurements: dict[str, Measurement] | None = None
    extra: dict[str, Any] = field(default_factory=dict, metadata={"extra": True})
    """Fields a newer writer (or another plugin) added, and those given as null: written back
    as they came (:func:`row_json`); not in the schema."""

    @property
    def k(self) -> int:
        """The k of ``top5`` (a file before ``top_k``: from its per-sample results)."""
        if self.top_k is not None:
            return self.top_k
        now = self.per_sample.now if self.per_sample is not None else None
        return min(5, len(now.topk[0])) if now is not None and now.topk else 5

    def latency_figures(self) -> dict[str, Any]:
        """Flat figures per measurement (``model.p50_ms``); older files have them as own fields."""
        out = {k: v for k, v in self.extra.items() if "." in k}
        for name, m in (self.measurements or {}).items():
            for f in dataclasses.fields(m):
                if f.name != "judgements" and getattr(m, f.name) is not None:
                    out[f"{name}.{f.name}"] = getattr(m, f.name)
            for j in m.judgements:
                out[f"{name}.golden_{j.statistic}_ms"] = j.golden_ms
                out[f"{name}.{j.statistic}_ratio"] = j.ratio
                if j.normalised is not None:
                    out[f"{name}.{j.statistic}_normalised"] = j.normalised
        if self.contention is not None:
            out["contention"] = self.contention
        return out

    @property
    def p50_tolerance(self) -> float | None:
        """Latency rows: the largest p50 ratio now/golden that passes."""
        return None if self.latency_tolerance is None else self.latency_tolerance.get("p50")


def top_k_label(rows: typing.Iterable[Row | None]) -> tuple[str, typing.Callable[[Row], str]]:
    """The ``top5`` header (``top-3`` when every k is 3) and the note of a row of another k."""
    ks = {r.k for r in rows if r is not None and r.top5 is not None}
    k = ks.pop() if len(ks) == 1 else 5
    return f"top-{k}", lambda row: "" if row.top5 is None or row.k == k else f" (top-{row.k})"


LISTED: tuple[tuple[str, str], ...] = tuple(
    (f.name, f.metadata["label"]) for f in dataclasses.fields(Row) if "label" in f.metadata
)
"""(field, label) of the fields the matrix lists: one added with :func:`_listed` needs no more."""


@dataclass(frozen=True)
class Machine:
    name: str = field(metadata=_says(minLength=1))
    environment: Environment


@dataclass(frozen=True)
class Environment:
    """The environment fingerprint (``fingerprint.environment``): any fields; those read by
    ``mlrepro merge`` typed (files written before them lack them)."""

    cpu: str | None = None
    cpu_vendor: str | None = None
    cpu_flags: tuple[str, ...] | None = None
    numeric_packages: dict[str, str] | None = None
    numeric_settings: dict[str, str] | None = None
    extra: dict[str, Any] = field(default_factory=dict, metadata={"extra": True})


@dataclass(frozen=True)
class Document:
    """A results file (``pytest --mlrepro-json``); read back (``load_results``), its ``path``."""

    format: int = field(metadata=_says(enum=list(FORMATS)))
    machine: Machine
    shard: Shard | None
    results: tuple[Row, ...] = field(metadata=_says(maxItems=MAX_ROWS))
    created: str | None = _optional("when the file was written (UTC, ISO 8601)", pattern=CREATED)
    one_time: dict[str, PhaseTimes] | None = field(default=None, metadata=PHASE_ACCOUNT)
    commit: str | None = _optional(
        "the project's git commit (HEAD) when the file was written; absent outside git",
        pattern="^[0-9a-f]{40,64}$",
    )
    path: Path | None = field(default=None, metadata={"internal": True})


def created_time(text: str) -> datetime:
    """ValueError for a schema-valid ``created`` that is no real time (2026-02-30)."""
    return datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)


# --- records from (validated) JSON --------------------------------------------------------------


def _value(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return _value(next(a for a in args if a is not type(None)), value)
    if origin is tuple:
        return tuple(_value(args[0], v) for v in value)
    if origin is list:
        return _items(args[0], value)
    if origin is dict:  # a score_diff's 50,000 numbers in one pass, as a list's
        return dict(zip(value, _items(args[1], list(value.values()))))
    if tp is float:
        return float(value)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return record(tp, value)
    return value


def _items(tp: Any, values: list[Any]) -> list[Any]:
    """Lists of numbers in one pass each (per-sample results hold 50,000)."""
    if tp is float:
        return [float(v) for v in values]
    if tp in (int, str):
        return list(values)
    if typing.get_origin(tp) is list:
        return [_items(typing.get_args(tp)[0], v) for v in values]
    return [_value(tp, v) for v in values]


def row_of(value: typing.Mapping[str, Any]) -> Row:
    """The typed row of an item's results (JSON as xdist carries them); the rest in ``extra``."""
    return record(Row, value)


def row_json(row: object) -> dict[str, Any]:
    """A record as the file holds it: empty fields absent, ``extra``'s beside the named ones."""
    return typing.cast(dict[str, Any], _json(row))


_PER_SAMPLE = re.compile(r'"per_sample": "\\u0000(\d+)\\u0000"')
"""A row's per-sample block as :func:`results_text` holds its place: a key and a string value
that no other text of the file can be (a quote inside a string is escaped there)."""


def results_text(document: Document) -> str:
    """The results file of ``document`` (docs/results.md); None fields left out."""
    # Indented to be read, except each row's per_sample block: one line by json's C encoder
    # (the pure-Python indenting one took 0.46 s against 0.16 s: docs/measurements.md).
    blocks: list[str] = []
    results = []
    # nodeid last: under xdist reports arrive in any order, and the file must not depend on it.
    for row in sorted(document.results, key=lambda r: (str(r.manifest), str(r.device), r.nodeid)):
        value = row_json(row)
        if "per_sample" in value:
            blocks.append(json.dumps(value["per_sample"], sort_keys=True, allow_nan=False))
            value["per_sample"] = f"\0{len(blocks) - 1}\0"
        results.append(value)
    plain = {**row_json(dataclasses.replace(document, results=(), path=None)), "results": results}
    text = json.dumps(plain, indent=2, sort_keys=True, allow_nan=False)
    return _PER_SAMPLE.sub(lambda m: f'"per_sample": {blocks[int(m[1])]}', text)


def _json(value: Any) -> Any:
    if isinstance(value, (list, tuple)):  # numbers, strings: as they are (50,000 per sample)
        scalars = not value or isinstance(value[0], (str, int, float))
        return list(value) if scalars else [_json(v) for v in value]
    if isinstance(value, dict):  # a score_diff's numbers, likewise
        scalars = not value or isinstance(next(iter(value.values())), (str, int, float))
        return dict(value) if scalars else {k: _json(v) for k, v in value.items()}
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return value
    out: dict[str, Any] = {}
    for f in dataclasses.fields(value):
        given = getattr(value, f.name)
        if f.metadata.get("extra"):  # the last field: a named one given as well stands
            out = {**given, **out}
        elif not (f.default in (None, ()) and given == f.default):
            out[f.name] = _json(given)
    return out


def record(cls: type[_T], value: typing.Mapping[str, Any], **given: Any) -> _T:
    """``cls`` of a schema-valid JSON object (``given`` as they are); unnamed and null fields go to
    its ``extra`` field if it has one."""
    hints = typing.get_type_hints(cls)
    fields: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.metadata.get("extra"):
            names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
            fields[f.name] = {k: v for k, v in value.items() if k not in names or v is None}
        elif f.name in value and f.name not in given:
            fields[f.name] = _value(hints[f.name], value[f.name])
    return cls(**fields, **given)


# --- the schema, from the types ------------------------------------------------------------------

_RULES: dict[str, dict[str, dict[str, Any]]] = {
    # The core's own types: the file states them whole (no default stands for a missing field).
    "Tolerances": {"": {"required": ["top1", "top5", "agreement", "score"]}},
    # Every other object keeps fields not named here (other plugins', later versions').
    "Shard": {
        "index": {"minimum": 1},
        "count": {"minimum": 1, "maximum": MAX_SHARDS},
        "": {"additionalProperties": False},
    },
}


def results_schema() -> dict[str, Any]:
    """The results file's JSON Schema (draft 2020-12)."""
    writer = SchemaWriter(_RULES)
    return writer.document(
        Document,
        **{"$id": "https://github.com/pytest-mlrepro/pytest-mlrepro/results.schema.json"},
        title=f"pytest-mlrepro results file (pytest --mlrepro-json), format {FORMAT}",
    )
