"""The N shard rows of one evaluation merged into the unsharded run's row, its comparison rebuilt
from the shards' per-sample results."""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..data import Shard
from ..errors import MlreproError
from ..goldens import Comparison, Results, accuracy_decision, comparison_of
from ..manifest import Tolerances
from ._fields import changed_samples
from ._format import Part
from ._record import FailedShard, PerSample, PhaseTimes, Row, Timing, record

EXAMPLES = 5
"""Shards or versions named in one message; the rest are counted."""
SHARD_SUFFIX = re.compile(r"\[shard(\d+)of(\d+)\]$")
"""The suffix of a shard item's node id (``accuracy[cpu][shard1of2]``)."""


class ShardMergeError(MlreproError):
    """Shard results that do not make one whole run (a shard missing or twice, manifests differ)."""


def unsharded_nodeid(nodeid: str) -> str:
    """The whole item's node id of a shard item's (itself for others)."""
    return SHARD_SUFFIX.sub("", nodeid)


def shard_results(results: Results, shard: Shard) -> Results:
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
    filled = [part for part in parts if len(part.ids)]  # an empty part's arrays may be 1-D
    widths = {part.topk.shape[1] for part in filled}
    if len(widths) > 1:
        raise ShardMergeError(
            f"the parts keep different numbers of top-k classes: {sorted(widths)}"
        )
    width = widths.pop() if widths else 0
    ids = [sample for part in parts for sample in part.ids]
    order = sorted(range(len(ids)), key=ids.__getitem__)

    def stacked(name: str, dtype: Any, shape: tuple[int, ...]) -> Any:
        return np.concatenate([np.zeros(shape, dtype), *(getattr(p, name) for p in filled)])[order]

    return Results(
        ids=tuple(ids[i] for i in order),
        labels=stacked("labels", np.int64, (0,)),
        topk=stacked("topk", np.int64, (0, width)),
        topk_scores=stacked("topk_scores", np.float64, (0, width)),
    )


def combine(parts: Sequence[Part], tolerances: Tolerances) -> Comparison:
    """Exactly what ``goldens.compare`` gives for the whole run the ``parts`` make up (samples in
    sample-id order, as a data set's are)."""
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
    goldens = [part.golden for part in parts if part.golden is not None]
    diffs: dict[str, float] = {}
    for part in parts:
        diffs.update(part.score_diff)
    return Part(
        now=_union([part.now for part in parts], "run's"),
        golden=_union(goldens, "golden's") if len(goldens) == len(parts) else None,
        score_diff=dict(sorted(diffs.items())),
    )


def check_shards(rows: Sequence[Row]) -> list[tuple[Shard, Row]]:
    """The rows by shard when they are exactly shards 1..N of one evaluation; else
    ShardMergeError naming the shards missing or twice, or the field that differs."""
    if not rows:
        raise ShardMergeError("no shard rows to merge")
    shards = []
    for row in rows:
        if row.shard is None:
            raise ShardMergeError(f"{row.nodeid}: not a shard's row (it has no 'shard')")
        shards.append((row.shard, row))
    what = f"{rows[0].manifest} [{rows[0].device}]"
    kinds = sorted({row.kind or "accuracy" for row in rows} - {"accuracy"})
    if kinds:
        raise ShardMergeError(
            f"{what}: only accuracy rows are merged, not {', '.join(kinds)} rows (each of those "
            "is a verdict of its own)"
        )
    for key in ("manifest", "manifest_digest", "device", "kind"):
        values = sorted({str(getattr(row, key)) for row in rows})
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
        values = sorted({str(getattr(row, key)) for row in rows} - {"None"})
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
        absent = (index for index in range(1, count + 1) if index not in seen)
        problems.append("missing shard " + _listed(absent, count - len(seen), count))
    if twice:
        problems.append(f"shard {_listed(iter(twice), len(twice), count)} given twice")
    if problems:
        raise ShardMergeError(
            f"{what}: cannot merge: {'; '.join(problems)} (a merge needs each of the {count} "
            f"shards once: pytest --mlrepro-shard I/{count} for I = 1..{count})"
        )
    return sorted(shards, key=lambda pair: pair[0].index)


def _listed(indices: Iterator[int], total: int, count: int) -> str:
    """The first :data:`EXAMPLES` indices as ``i/count``, the rest counted."""
    shown = list(itertools.islice(indices, EXAMPLES))
    more = total - len(shown)
    return ", ".join(f"{i}/{count}" for i in shown) + (f" and {more} more" if more > 0 else "")


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
)
"""The fields the shards of one evaluation share, and the merged row keeps (the first's)."""


def _timing(shards: Sequence[Row]) -> Timing | None:
    """The shards' durations (and phases) added up; None unless each has one."""
    timings = [row.timing for row in shards if row.timing is not None]
    if len(timings) < len(shards) or not all(isinstance(t.seconds, (int, float)) for t in timings):
        return None
    phases: dict[str, PhaseTimes] | None = None
    if all(t.phases is not None for t in timings):
        phases = {}
        for t in timings:
            for name, times in (t.phases or {}).items():
                into = phases.get(name, PhaseTimes(0.0, 0.0))
                phases[name] = PhaseTimes(
                    round(into.wall + times.wall, 4), round(into.cpu + times.cpu, 4)
                )
    return Timing(seconds=round(sum(t.seconds for t in timings), 3), phases=phases)


def merge_shards(rows: Sequence[Row]) -> Row:
    """The unsharded run's row, with its exact metrics and verdict, of its N shard rows."""
    shards = check_shards(rows)
    first = shards[0][1]
    merged = Row(
        nodeid=unsharded_nodeid(first.nodeid),
        outcome="failed",
        status="failed",
        shards=len(shards),
        timing=_timing([row for _, row in shards]),
        controls=first.controls,
        **{key: getattr(first, key) for key in COMMON},
    )
    # A shard failed on its own unless it passed and was compared (its golden's part is kept).
    failed = [
        (shard, row)
        for shard, row in shards
        if row.outcome != "passed" or row.per_sample is None or row.per_sample.golden is None
    ]
    if failed and all(row.outcome == "skipped" for _, row in shards):
        verdict = "skipped" if first.verdict is None else first.verdict
        return replace(merged, outcome="skipped", status="skipped", verdict=verdict)
    if failed:
        return replace(
            merged,
            verdict=str(failed[0][1].verdict or failed[0][1].outcome),
            failed_shards=tuple(FailedShard(str(s), r.nodeid, r.verdict) for s, r in failed),
        )
    parts = [Part.of(row.per_sample) for _, row in shards if row.per_sample is not None]
    if first.tolerances is None:
        raise ShardMergeError(f"{first.nodeid}: the row has no 'tolerances'")
    comparison = combine(parts, first.tolerances)
    decision = accuracy_decision(
        writes=False,
        has_golden=True,
        within_tolerance=comparison.ok,
        # A shard whose part of the data changed: the whole item fails as a data change.
        data_changed=any(row.data_changed for _, row in shards),
    )
    passed = decision.action == "pass"
    return replace(
        merged,
        **metrics(comparison),
        # What the report shows of a failed comparison (classes unnamed).
        outside_tolerance=() if comparison.ok else tuple(comparison.failures),
        changed_samples=None if comparison.ok else changed_samples(comparison.changed, None),
        verdict="pass" if passed else decision.reason,
        outcome="passed" if passed else "failed",
        status="passed" if passed else "failed",
        per_sample=record(PerSample, merged_part(parts).to_json()),
    )


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
