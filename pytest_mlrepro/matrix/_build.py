"""One matrix from N results files, and how the machines agree sample by sample."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..errors import MlreproError
from ..results import (
    DiagnosisSummary,
    Document,
    Environment,
    PerSample,
    Row,
    ShardMergeError,
    differences,
    merge_shards,
    pipeline_digest,
    pipeline_of,
    settings_of,
    unsharded_nodeid,
)
from ._model import (
    Cell,
    Dissent,
    ManifestAgreement,
    Matrix,
    PairAgreement,
    Source,
)

EXAMPLES = 5
"""Sample ids named per flagged participant."""


class MatrixError(MlreproError):
    """Results files that do not make one matrix (the same item twice from one machine)."""


def _kind(row: Row) -> str:
    """No ``kind`` (manifest not loaded): ``accuracy`` given per-sample results, else ``item``."""
    if row.kind is not None:
        return row.kind
    return "accuracy" if row.per_sample is not None else "item"


_Key = tuple[str, str, str | None, str, str | None, str, str]


def _row_key(file: Document, row: Row) -> _Key:
    """Shards' accuracy rows share their item's key (they are merged); a shard's latency or
    determinism row is a verdict of its own (``<nodeid> (shard 1/2)``)."""
    kind = _kind(row)
    nodeid = unsharded_nodeid(row.nodeid)
    shard = row.shard or file.shard
    if kind != "accuracy" and shard is not None:
        nodeid += f" (shard {shard})"
    return (
        file.machine.name,
        # A row without a manifest name (none of this plugin's items write one) still counts:
        # under its node id, so that a failure is never dropped from the gate.
        row.manifest or row.nodeid,
        row.manifest_digest,
        row.device or "",
        row.framework_version,
        kind,
        nodeid,
    )


def _merged(key: _Key, members: list[tuple[str, Row]]) -> Row:
    """The item's row, its shards merged (a missing or doubled shard: a failed row saying so)."""
    rows = [row for _, row in members]
    sharded = [row for row in rows if row.shard is not None and key[5] == "accuracy"]
    where = f"{key[1]} [{key[3]}] {key[6]}: machine {key[0]!r} has"
    files = ", ".join(sorted({path for path, _ in members}))
    if not sharded:
        if len(rows) > 1:
            raise MatrixError(
                f"{where} this result twice (in {files}): give each machine its own name "
                "(--mlrepro-machine NAME)"
            )
        return rows[0]
    if len(sharded) != len(rows):
        raise MatrixError(
            f"{where} both a whole run and shards of this item (in {files}): merge one or the other"
        )
    try:
        return merge_shards(rows)
    except ShardMergeError as exc:
        first = rows[0]
        return Row(
            nodeid=key[6],
            outcome="failed",
            status="failed",
            verdict=f"shards do not merge: {exc}",
            manifest=first.manifest,
            device=first.device,
            kind=first.kind,
            framework=first.framework,
        )


def _result(row: Row, nodeid: str) -> Row:
    """The row as a cell holds it: its item's node id, its kind and verdict said, the diagnosis
    of a file written before the summary was kept."""
    summary = row.diagnosis_summary
    if summary is None and row.diagnosis:
        summary = DiagnosisSummary(cause=row.diagnosis, lead="")
    return replace(
        row,
        nodeid=nodeid,
        kind=_kind(row),
        verdict=row.verdict or "",
        diagnosis_summary=summary,
    )


# --- cells -------------------------------------------------------------------------------------

_CellKey = tuple[str, str | None, str, str, str | None]


def _commonest(cells: Sequence[Cell], values: Sequence[str | None]) -> dict[str, int]:
    """Per manifest, its first cell whose value is the most common (ties: the first in order)."""
    counts: dict[str, Counter[str | None]] = {}
    for cell, value in zip(cells, values):
        counts.setdefault(cell.manifest, Counter())[value] += 1
    return {
        manifest: next(
            i
            for i, (c, v) in enumerate(zip(cells, values))
            if c.manifest == manifest and v == counter.most_common(1)[0][0]
        )
        for manifest, counter in counts.items()
    }


def _short(digest: str | None) -> str:
    return "none" if digest is None else digest[:12]


def _shown(value: object) -> str:
    return "unset" if value is None else repr(value) if isinstance(value, str) else str(value)


def _pipeline_key(digest: str | None, content: Mapping[str, Any] | None) -> str | None:
    """The digest without settings where the row records the content, else the manifest's."""
    return f"pipeline:{pipeline_digest(content)}" if content is not None else digest


def _settings(content: Mapping[str, Any] | None, env: Environment) -> dict[str, Any]:
    """The manifest's runtime block and the machine's numeric and thread variables, flattened."""
    out = {} if content is None else dict(settings_of(content))
    out.pop("runtime.timeout_s", None)  # changes no result
    variables = env.numeric_settings or {}
    out.update({f"environment {k}": v for k, v in sorted(variables.items())})
    return out


def _other_pipeline(cell: Cell, common: Cell) -> tuple[str, tuple[str, ...]]:
    """Why a cell runs another pipeline than the manifest's common one, and the manifest fields
    that differ (where both record their content; else the digests, and no fields)."""
    digests = f"manifest digest {_short(cell.manifest_digest)}, the others' " + _short(
        common.manifest_digest
    )
    if cell.manifest_content is not None and common.manifest_content is not None:
        changes = differences(
            pipeline_of(common.manifest_content), pipeline_of(cell.manifest_content)
        )
        shown = "; ".join(f"{k}: {_shown(a)} → {_shown(b)}" for k, a, b in changes[:6])
        more = f" and {len(changes) - 6} more" if len(changes) > 6 else ""
        return f"another pipeline: {shown}{more} ({digests})", tuple(k for k, _, _ in changes)
    return (
        f"another pipeline: {digests} (the manifest {cell.manifest!r} differs on this machine)",
        (),
    )


def build_matrix(files: Sequence[Document]) -> Matrix:
    """MatrixError when two files claim the same item of one machine."""
    sources = tuple(
        Source(str(f.path), f.machine.name, None if f.shard is None else str(f.shard))
        for f in files
    )
    groups: dict[_Key, list[tuple[str, Row]]] = {}
    for file in files:
        for row in file.results:
            groups.setdefault(_row_key(file, row), []).append((str(file.path), row))
    per_cell: dict[_CellKey, tuple[list[Row], set[str]]] = {}
    for key, members in sorted(groups.items(), key=lambda kv: _sortable(kv[0])):
        machine, manifest, digest, device, version, _, nodeid = key
        rows, paths = per_cell.setdefault((manifest, digest, machine, device, version), ([], set()))
        rows.append(_result(_merged(key, members), nodeid))
        paths.update(path for path, _ in members)
    # By manifest, then machine, device, framework version, and the digest last.
    ordered = sorted(per_cell.items(), key=lambda kv: _sortable((kv[0][0], *kv[0][2:], kv[0][1])))
    cells = [
        Cell(
            manifest=manifest,
            manifest_digest=digest,
            machine=machine,
            device=device,
            framework=next((r.framework for r in rows if r.framework), None),
            framework_version=version,
            hardware_slug=next((r.hardware_slug for r in rows if r.hardware_slug), None),
            sources=tuple(sorted(paths)),
            results=tuple(r for r in rows if r.kind != "latency"),
            latency=tuple(
                sorted(
                    (r for r in rows if r.kind == "latency"), key=lambda r: (r.batch or 0, r.nodeid)
                )
            ),
            manifest_content=next(
                (dict(r.manifest_content) for r in rows if r.manifest_content is not None), None
            ),
        )
        for (manifest, digest, machine, device, version), (rows, paths) in ordered
    ]
    # Each machine's environment, by name; the first file of a machine speaks for its shards.
    first = {f.machine.name: f.machine for f in reversed(files)}
    machines = tuple(first[name] for name in sorted(first))
    environments = {m.name: m.environment for m in machines}
    pipelines = [_pipeline_key(c.manifest_digest, c.manifest_content) for c in cells]
    settings = [_settings(c.manifest_content, environments[c.machine]) for c in cells]
    shown_settings = [json.dumps(v, sort_keys=True, default=str) for v in settings]
    # Per manifest, the first cell of its common pipeline, and of its common settings.
    common = _commonest(cells, pipelines), _commonest(cells, shown_settings)
    for index, cell in enumerate(cells):
        usual = common[0][cell.manifest]
        if pipelines[index] != pipelines[usual]:
            other, fields = _other_pipeline(cell, cells[usual])
            cell = replace(cell, other_pipeline=other, pipeline_fields=fields)
        usual = common[1][cell.manifest]
        if shown_settings[index] != shown_settings[usual]:
            changed = differences(settings[usual], settings[index])
            cell = replace(
                cell,
                settings_fields=tuple(k for k, _, _ in changed),
                other_settings="other settings (the same pipeline, run otherwise): "
                + "; ".join(f"{k} {_shown(a)} (the others' {_shown(b)})" for k, b, a in changed),
            )
        cells[index] = cell
    per_sample: list[tuple[Cell, PerSample]] = []
    for c in cells:  # the first accuracy result's
        found = [r.per_sample for r in c.results if r.kind == "accuracy" and r.per_sample]
        if found:
            per_sample.append((c, found[0]))
    return Matrix(
        sources=sources,
        cells=tuple(cells),
        agreement=tuple(_agreement(per_sample)),
        machines=machines,
    )


def _sortable(key: tuple[Any, ...]) -> tuple[str, ...]:
    return tuple("" if part is None else str(part) for part in key)


# --- cross-machine agreement -------------------------------------------------------------------


def _labels(cells: Sequence[Cell]) -> list[str]:
    """``machine [device]``, made unique with the framework version, then the digest."""
    labels = [c.label for c in cells]
    richer: list[Callable[[Cell], str]] = [
        lambda c: f"{c.machine} [{c.device}, {c.framework or ''} {c.framework_version or ''}]",
        lambda c: f"{c.machine} [{c.device}, {c.framework_version}, {_short(c.manifest_digest)}]",
    ]
    for extra in richer:
        counts = Counter(labels)
        labels = [extra(c) if counts[label] > 1 else label for c, label in zip(cells, labels)]
    return labels


_Sample = tuple[int, dict[int, float]]  # top-1 class, score of each top-k class


def _samples(part: PerSample) -> dict[str, _Sample]:
    now = part.now
    return {
        sample: (
            int(now.topk[i][0]),
            {int(c): float(s) for c, s in zip(now.topk[i], now.topk_scores[i])},
        )
        for i, sample in enumerate(now.ids)
    }


def _golden_top1(part: PerSample) -> dict[str, int]:
    golden = part.golden
    if golden is None:
        return {}
    return {sample: int(golden.topk[i][0]) for i, sample in enumerate(golden.ids)}


def pair_agreement(
    first: Mapping[str, _Sample], second: Mapping[str, _Sample]
) -> tuple[int, int, float | None]:
    """(samples in both, samples whose top-1 agrees, largest score difference over the classes
    both list in a sample's top-k, or None when no sample has such a class)."""
    shared = sorted(set(first) & set(second))
    agree = sum(first[s][0] == second[s][0] for s in shared)
    largest: float | None = None
    for sample in shared:
        a, b = first[sample][1], second[sample][1]
        for c in set(a) & set(b):
            diff = abs(a[c] - b[c])
            largest = diff if largest is None else max(largest, diff)
    return len(shared), agree, largest


def _agreement(per_sample: Sequence[tuple[Cell, PerSample]]) -> list[ManifestAgreement]:
    out = []
    # The cells are in manifest order (build_matrix's).
    for manifest, group in itertools.groupby(per_sample, key=lambda member: member[0].manifest):
        members = list(group)
        if len(members) < 2:
            continue
        cells = [c for c, _ in members]
        labels = _labels(cells)
        keys = [_pipeline_key(c.manifest_digest, c.manifest_content) for c in cells]
        samples = [_samples(p) for _, p in members]
        goldens = [_golden_top1(p) for _, p in members]
        pairs = [  # (shared, agree, max_score_diff): pair_agreement's
            PairAgreement(
                labels[i],
                labels[j],
                *pair_agreement(samples[i], samples[j]),
                same_pipeline=keys[i] == keys[j],
            )
            for i, j in itertools.combinations(range(len(members)), 2)
        ]
        out.append(
            ManifestAgreement(
                manifest=manifest,
                participants=tuple(labels),
                # What tells the pipelines apart (the settings do not: see _pipeline_key).
                digests=tuple(
                    (label, None if key is None else key.removeprefix("pipeline:"))
                    for label, key in zip(labels, keys)
                ),
                pairs=tuple(pairs),
                dissent=tuple(_dissent(labels, samples, goldens)),
            )
        )
    return out


def majority_top1(votes: Sequence[int]) -> int | None:
    """The class more than half of ``votes`` name, None without one."""
    if not votes:
        return None
    value, count = Counter(votes).most_common(1)[0]
    return value if count * 2 > len(votes) else None


def _dissent(
    labels: Sequence[str],
    samples: Sequence[Mapping[str, _Sample]],
    goldens: Sequence[Mapping[str, int]],
) -> list[Dissent]:
    disagree = [0] * len(labels)
    judged = [0] * len(labels)
    examples: list[list[str]] = [[] for _ in labels]
    every = sorted(set().union(*(set(s) for s in samples)))
    for sample in every:
        present = [i for i, s in enumerate(samples) if sample in s]
        votes = [samples[i][sample][0] for i in present]
        golden = {g[sample] for g in goldens if sample in g}
        if len(golden) == 1:  # the golden votes once, when the goldens agree on the sample
            votes.append(golden.pop())
        winner = majority_top1(votes)
        if winner is None:
            continue
        for i in present:
            judged[i] += 1
            if samples[i][sample][0] != winner:
                disagree[i] += 1
                if len(examples[i]) < EXAMPLES:
                    examples[i].append(sample)
    return [
        Dissent(participant=label, disagree=d, judged=n, examples=tuple(e))
        for label, d, n, e in zip(labels, disagree, judged, examples)
    ]
