"""Shards put back together: the comparison of a whole run rebuilt from its shards' per-sample
results, and the N shard rows of one evaluation merged into the row of the unsharded run.

Exact, not approximate: each shard keeps, per sample, its top-k classes and scores, the golden's,
and the score difference the comparison takes the maximum of; the union of the shards is the
unsharded run's per-sample data (the shard rule partitions the data set and the golden alike), so
:func:`combine` computes the unsharded :class:`~pytest_mlrepro.goldens.Comparison` with the same
code (``goldens.comparison_of``), and :func:`merge_shards` decides with the same decision the item
makes (``goldens.accuracy_decision``).
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..data import Shard
from ..errors import MlreproError
from ..goldens import Comparison, Results, accuracy_decision, comparison_of
from ..manifest import Tolerances
from ._fields import changed_samples
from ._format import Part
from ._record import Row, row_of

EXAMPLES = 5
"""Shards or versions named in one message; the rest are counted."""
SHARD_SUFFIX = re.compile(r"\[shard(\d+)of(\d+)\]$")
"""The suffix of a shard item's node id (``accuracy[cpu][shard1of2]``)."""


class ShardMergeError(MlreproError):
    """Shard results that do not make one whole run: a shard missing or given twice, shards of
    different manifests, a part without its per-sample results."""


def shard_verdict(shard: Shard) -> str:
    """The verdict of a shard that was compared: its tolerance verdict is the merge's."""
    return f"shard {shard} compared (verdict at the merge)"


def unsharded_nodeid(nodeid: str) -> str:
    """The node id of the whole item a shard item's node id belongs to (itself for others)."""
    return SHARD_SUFFIX.sub("", nodeid)


def shard_results(results: Results, shard: Shard) -> Results:
    """The samples of ``results`` that belong to ``shard``, in their order."""
    return results.subset([sample for sample in results.ids if shard.holds(sample)])


def _union(parts: Sequence[Results], what: str) -> Results:
    """One ``Results`` of disjoint parts, sorted by sample id (a data set's order)."""
    owner: dict[str, int] = {}
    for number, part in enumerate(parts, 1):
        for sample in part.ids:
            if sample in owner:
                raise ShardMergeError(
                    f"the sample {sample!r} is in the {what} results of part {owner[sample]} "
                    f"and of part {number}: the parts overlap (shards of different runs?)"
                )
            owner[sample] = number
    widths = {part.topk.shape[1] for part in parts if len(part.ids)}
    if len(widths) > 1:
        raise ShardMergeError(
            f"the parts keep different numbers of top-k classes: {sorted(widths)}"
        )
    width = widths.pop() if widths else 0
    ids = [sample for part in parts for sample in part.ids]
    order = sorted(range(len(ids)), key=ids.__getitem__)
    filled = [part for part in parts if len(part.ids)]

    def stacked(name: str, dtype: Any, shape: tuple[int, ...]) -> Any:
        if not filled:
            return np.zeros(shape, dtype)
        return np.concatenate([getattr(part, name) for part in filled])[order]

    return Results(
        ids=tuple(ids[i] for i in order),
        labels=stacked("labels", np.int64, (0,)),
        topk=stacked("topk", np.int64, (0, width)),
        topk_scores=stacked("topk_scores", np.float64, (0, width)),
    )


def combine(parts: Sequence[Part], tolerances: Tolerances) -> Comparison:
    """The comparison with the golden of the union of ``parts`` (e.g. the N shards of a run):
    exactly what ``goldens.compare`` gives for the whole run (whose samples, and golden's, are
    in sample-id order, as a data set's are). ShardMergeError for no parts, a part that was not
    compared with a golden, or parts that overlap."""
    if not parts:
        raise ShardMergeError("no parts to combine")
    for number, part in enumerate(parts, 1):
        if part.golden is None:
            raise ShardMergeError(f"part {number} was not compared with a golden")
    whole = merged_part(parts)
    assert whole.golden is not None  # every part's was compared
    shared = [sample for sample in whole.golden.ids if sample in whole.score_diff]
    diffs = [whole.score_diff[sample] for sample in shared]
    return comparison_of(whole.golden, whole.now, diffs, tolerances)


def merged_part(parts: Sequence[Part]) -> Part:
    """The per-sample results of the union of ``parts`` (compared ones)."""
    goldens = [part.golden for part in parts if part.golden is not None]
    diffs: dict[str, float] = {}
    for part in parts:
        diffs.update(part.score_diff)
    return Part(
        now=_union([part.now for part in parts], "run's"),
        golden=_union(goldens, "golden's") if len(goldens) == len(parts) else None,
        score_diff=dict(sorted(diffs.items())),
    )


def _shard_of_row(row: Mapping[str, Any]) -> Shard:
    value = row.get("shard")
    if not isinstance(value, Mapping):
        raise ShardMergeError(f"{row.get('nodeid')}: not a shard's row (it has no 'shard')")
    try:
        return Shard(int(value["index"]), int(value["count"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ShardMergeError(f"{row.get('nodeid')}: bad 'shard' {value!r}: {exc}") from None


def check_shards(rows: Sequence[Mapping[str, Any]]) -> list[tuple[Shard, Mapping[str, Any]]]:
    """The rows with their shards, in shard order, when they are exactly shards 1..N of one N
    of one evaluation (one manifest, manifest digest and device); else ShardMergeError naming
    the shards missing or given twice, or the field that differs."""
    if not rows:
        raise ShardMergeError("no shard rows to merge")
    shards = [(_shard_of_row(row), row) for row in rows]
    what = f"{rows[0].get('manifest')} [{rows[0].get('device')}]"
    kinds = sorted({str(row.get("kind", "accuracy")) for row in rows} - {"accuracy"})
    if kinds:
        raise ShardMergeError(
            f"{what}: only accuracy rows are merged, not {', '.join(kinds)} rows (each of those "
            "is a verdict of its own)"
        )
    for key in ("manifest", "manifest_digest", "device", "kind"):
        values = sorted({str(row.get(key)) for row in rows})
        if len(values) > 1:
            raise ShardMergeError(
                f"{what}: the shard rows differ in {key!r} ({', '.join(values)}): they are not "
                "shards of one evaluation"
            )
    for key, thing in (("data_identity", "data set"), ("golden_digest", "golden")):
        # Shards of two data versions (or compared with two recordings of the golden) would
        # merge into a verdict about no data set at all. A row without the field (a shard that
        # failed before it read the data or the golden, a file of an older version) has no
        # identity to contradict the others'.
        values = sorted({str(row[key]) for row in rows if key in row})
        if len(values) > 1:
            listed = ", ".join(f"{value[:12]}" for value in values[:EXAMPLES])
            raise ShardMergeError(
                f"{what}: the shards were measured on different versions of the {thing} "
                f"({key}: {listed}): a merge needs every shard of one {thing}; run them again "
                "from one checkout of the data and goldens"
            )
    counts = sorted({shard.count for shard, _ in shards})
    if len(counts) > 1:
        raise ShardMergeError(
            f"{what}: shards of different splits ({', '.join(f'N={n}' for n in counts)}): "
            "merge the results of one split"
        )
    count = counts[0]
    seen = Counter(shard.index for shard, _ in shards)
    twice = sorted(index for index, n in seen.items() if n > 1)
    problems = []
    if len(seen) < count:
        # Named up to EXAMPLES, counted beyond: the list of every missing shard of a large N
        # is never built (the count is bounded, data.MAX_SHARDS, but the message need not be).
        missing = list(itertools.islice(_absent(seen, count), EXAMPLES))
        more = count - len(seen) - len(missing)
        problems.append(
            "missing shard "
            + ", ".join(f"{i}/{count}" for i in missing)
            + (f" and {more} more" if more else "")
        )
    if twice:
        shown = ", ".join(f"{i}/{count}" for i in twice[:EXAMPLES])
        more = len(twice) - EXAMPLES
        problems.append(f"shard {shown}{f' and {more} more' if more > 0 else ''} given twice")
    if problems:
        raise ShardMergeError(
            f"{what}: cannot merge: {'; '.join(problems)} (a merge needs each of the {count} "
            f"shards once: pytest --mlrepro-shard I/{count} for I = 1..{count})"
        )
    return sorted(shards, key=lambda pair: pair[0].index)


def _absent(seen: Mapping[int, int], count: int) -> Iterator[int]:
    """The shard indices 1..count not in ``seen``, lazily."""
    return (index for index in range(1, count + 1) if index not in seen)


def _compared(row: Mapping[str, Any]) -> bool:
    per_sample = row.get("per_sample")
    return (
        row.get("outcome") == "passed"
        and isinstance(per_sample, Mapping)
        and per_sample.get("golden") is not None
    )


COMMON = (
    "kind",
    "manifest",
    "device",
    "framework",
    "framework_version",
    "manifest_file",
    "manifest_digest",
    "manifest_content",
    "data_identity",
    "golden_digest",
    "hardware_key",
    "hardware_slug",
    "tolerances",
    "golden",
    "controls",
)


def _added_phases(accounts: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Per-phase accounts (``timing.phases``) added up, phase by phase."""
    added: dict[str, dict[str, float]] = {}
    for account in accounts:
        for name, times in account.items():
            into = added.setdefault(name, {"wall": 0.0, "cpu": 0.0})
            for what in ("wall", "cpu"):
                into[what] = round(into[what] + float(times[what]), 4)
    return added


def merge_shards(rows: Sequence[Mapping[str, Any]]) -> Row:
    """The N shard rows of one evaluation (one machine, manifest and device) merged into the
    typed row of the unsharded run: its exact metrics and its verdict. A shard that failed on
    its own (an error, no golden, non-finite outputs, a skip) makes the merged row fail, naming
    the shard (``extra["failed_shards"]``); ShardMergeError when the rows are not each shard
    once (see :func:`check_shards`)."""
    return row_of(_merged(rows))


def _merged(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    shards = check_shards(rows)
    first = shards[0][1]
    merged: dict[str, Any] = {key: first[key] for key in COMMON if key in first}
    merged["nodeid"] = unsharded_nodeid(str(first.get("nodeid", "")))
    merged["shards"] = len(shards)
    seconds = [row.get("timing", {}).get("seconds") for _, row in shards]
    if all(isinstance(s, (int, float)) for s in seconds):
        merged["timing"] = {"seconds": round(sum(float(s) for s in seconds), 3)}
        accounts = [row["timing"].get("phases") for _, row in shards]
        if all(isinstance(a, dict) for a in accounts):  # the shards' phases, added up
            merged["timing"]["phases"] = _added_phases(accounts)
    failed = [(shard, row) for shard, row in shards if not _compared(row)]
    if failed:
        if all(row.get("outcome") == "skipped" for _, row in shards):
            merged["outcome"] = merged["status"] = "skipped"
            merged["verdict"] = str(first.get("verdict", "skipped"))
            return merged
        merged["outcome"] = merged["status"] = "failed"
        merged["verdict"] = str(failed[0][1].get("verdict") or failed[0][1].get("outcome"))
        merged["failed_shards"] = [
            {"shard": str(shard), "nodeid": row.get("nodeid"), "verdict": row.get("verdict")}
            for shard, row in failed
        ]
        return merged
    parts = [
        Part.from_json(row["per_sample"], f"{row.get('nodeid')} per_sample") for _, row in shards
    ]
    tolerances = _tolerances(first)
    comparison = combine(parts, tolerances)
    decision = accuracy_decision(
        writes=False,
        has_golden=True,
        within_tolerance=comparison.ok,
        # A shard whose part of the data changed: the whole item fails as a data change.
        data_changed=any(row.get("data_changed") for _, row in shards),
    )
    merged.update(metrics(comparison))
    if not comparison.ok:  # what the report shows of a failed comparison (classes unnamed)
        merged["outside_tolerance"] = list(comparison.failures)
        merged["changed_samples"] = changed_samples(comparison.changed, None)
    merged["verdict"] = "pass" if decision.action == "pass" else decision.reason
    merged["outcome"] = merged["status"] = "passed" if decision.action == "pass" else "failed"
    merged["per_sample"] = merged_part(parts).to_json()
    return merged


def metrics(comparison: Comparison) -> dict[str, Any]:
    """The row fields of a comparison, rounded as the accuracy item rounds them."""
    out: dict[str, Any] = {
        "samples": comparison.samples + len(comparison.extra),
        "top1": round(comparison.now_top1, 4),
        "top5": round(comparison.now_top5, 4),
        "agreement": round(comparison.agreement, 6),
        "golden_top1": round(comparison.golden_top1, 4),
        "golden_top5": round(comparison.golden_top5, 4),
    }
    if math.isfinite(comparison.max_score_diff):
        out["max_score_diff"] = float(f"{comparison.max_score_diff:.3g}")
    return out


def _tolerances(row: Mapping[str, Any]) -> Tolerances:
    value = row.get("tolerances")
    if not isinstance(value, Mapping):
        raise ShardMergeError(f"{row.get('nodeid')}: the row has no 'tolerances'")
    try:
        return Tolerances(**{k: float(value[k]) for k in ("top1", "top5", "agreement", "score")})
    except (KeyError, TypeError, ValueError) as exc:
        raise ShardMergeError(f"{row.get('nodeid')}: bad 'tolerances' {value!r}: {exc}") from None
