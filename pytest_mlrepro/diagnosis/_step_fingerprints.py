"""Probe samples and per-step fingerprints (shape, dtype, hash, channel stats, thumbnail: one line
each), what a golden keeps to explain a drift; probes chosen by the sha256 of the id."""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import accumulate
from typing import Any, Literal, TypedDict

import numpy as np

from ..data import Sample
from ..pipeline import Pipeline, State, Step, channels_last

FORMAT = 1
STEP_PROBES = 8  # samples whose per-step fingerprints a golden keeps
PROBES = 64  # samples re-run per counterfactual on a failure
THUMB = 4  # thumbnail grid (THUMB × THUMB block means per channel)


def select(ids: Sequence[str], n: int, prefer: Collection[str] = ()) -> list[str]:
    """``n`` of ``ids`` chosen by the sha256 of each id (stable everywhere), up to half from
    ``prefer`` (the samples a counterfactual has to bring back)."""
    if n <= 0:
        return []
    ranked = sorted(ids, key=lambda i: hashlib.sha256(i.encode("utf-8")).hexdigest())
    wanted = set(prefer)
    preferred = [i for i in ranked if i in wanted][: n // 2]
    taken = set(preferred)
    return preferred + [i for i in ranked if i not in taken][: n - len(preferred)]


def states(steps: Sequence[Step]) -> list[State]:
    """The state (channel order, layout, dtype) after each step."""
    return list(accumulate(steps, lambda state, step: step.transition(state), initial=State()))[1:]


def _sig(value: float, digits: int) -> float:
    return float(f"{value:.{digits}g}") if np.isfinite(value) else 0.0


def digest(array: np.ndarray) -> str:
    """16 hex digits of the sha256 of the exact bytes, shape and dtype."""
    h = hashlib.sha256(f"{array.shape}|{array.dtype.str}|".encode())
    h.update(np.ascontiguousarray(array).tobytes())
    return h.hexdigest()[:16]


class _Identity(TypedDict):
    dtype: str
    shape: list[int]
    sha256: str


class Fingerprint(_Identity, total=False):
    """One step's output for one probe, as a golden keeps it (JSON). The statistics are there
    only for an output with channels (an image-like array); ``thumb`` is one grid per channel."""

    mean: list[float]
    std: list[float]
    detail: list[float]
    thumb: list[list[float]]


def fingerprint(array: np.ndarray, layout: str = "HWC") -> Fingerprint:
    """Shape, dtype, exact hash, per-channel mean/std/detail and a thumbnail of one output."""
    fp: Fingerprint = {
        "dtype": str(array.dtype),
        "shape": [int(d) for d in array.shape],
        "sha256": digest(array),
    }
    image = channels_last(array, layout)
    if image is None or image.size == 0:
        return fp
    # One contiguous float32 plane per channel: reductions over planes are fast; sums in float64.
    planes = np.ascontiguousarray(image.transpose(2, 0, 1), dtype=np.float32)
    flat = planes.reshape(planes.shape[0], -1)
    mean = flat.mean(axis=1, dtype=np.float64)
    fp["mean"] = [_sig(v, 6) for v in mean]
    fp["std"] = [_sig(v, 6) for v in flat.std(axis=1, dtype=np.float64)]
    detail = np.zeros(planes.shape[0])
    if planes.shape[2] > 1:
        detail += np.abs(np.diff(planes, axis=2)).mean(axis=(1, 2), dtype=np.float64)
    if planes.shape[1] > 1:
        detail += np.abs(np.diff(planes, axis=1)).mean(axis=(1, 2), dtype=np.float64)
    fp["detail"] = [_sig(v, 6) for v in detail / 2]
    fp["thumb"] = [[_sig(v, 4) for v in thumbnail(plane)] for plane in planes]
    return fp


def thumbnail(plane: np.ndarray, grid: int = THUMB) -> list[float]:
    """Block means of one H × W channel on a ``grid`` × ``grid`` grid, row by row."""
    rows = np.array_split(np.arange(plane.shape[0]), min(grid, plane.shape[0]))
    cols = np.array_split(np.arange(plane.shape[1]), min(grid, plane.shape[1]))
    return [
        float(plane[r[0] : r[-1] + 1, c[0] : c[-1] + 1].mean(dtype=np.float64))
        for r in rows
        for c in cols
    ]


def trace(steps: Sequence[Step], sample: Sample) -> list[np.ndarray]:
    """The output of every step for one sample (SampleError names it when a step fails)."""
    return [array for _, array in Pipeline(steps).trace(sample.read(), sample.id)]


def record(
    steps: Sequence[Step], samples: Sequence[Sample], n: int = STEP_PROBES
) -> dict[str, Any] | None:
    """What a golden keeps: the step probes' ids and their per-step fingerprints."""
    if n <= 0 or not samples:
        return None
    by_id = {s.id: s for s in samples}
    ids = select([s.id for s in samples], n)
    layouts = [s.layout for s in states(steps)]
    rows = [
        [sample_id, index, steps[index].op, fingerprint(array, layouts[index])]
        for sample_id in ids
        for index, array in enumerate(trace(steps, by_id[sample_id]))
    ]
    return {"format": FORMAT, "samples": ids, "steps": [s.op for s in steps], "fingerprints": rows}


def up_to_date(probes: Any, steps: Sequence[Step], samples: Sequence[Sample], n: int) -> bool:
    """Whether a golden's probes were made for these steps and this choice of probe samples
    (``--mlrepro-update`` re-records a golden whose probes are missing or outdated)."""
    if n <= 0:
        return True
    if not isinstance(probes, Mapping) or probes.get("format") != FORMAT:
        return False
    ids = select([s.id for s in samples], n)
    return probes.get("samples") == ids and probes.get("steps") == [s.op for s in steps]


# --- comparing ------------------------------------------------------------------------------


# Why a step report compares nothing: the probes could not be traced, the golden keeps no step
# fingerprints, none of its step probes is in this run's data set.
StepNote = Literal["error", "unrecorded", "absent"]


@dataclass(frozen=True)
class Delta:
    """How one step's output differs on ``differing`` of ``count`` probes: in shape or dtype
    (golden's, now), else by the numbers, in the units of ``dtype``."""

    differing: int
    count: int
    shape: tuple[str, str] | None = None
    dtype: tuple[str, str] | None = None
    unit: str = ""  # the dtype the differences are of
    order: tuple[int, ...] | None = None  # the channels permuted (channel_order)
    alpha: float | None = None  # every colour mean × this, alpha the same (premultiplied)
    thumb: float | None = None  # thumbnail mean |Δ|
    shift: tuple[float, ...] = ()  # channel means, now − golden
    detail: tuple[float, float] | None = None  # (golden's, now)
    # Measured on the full arrays (the golden reproduced here): mean |Δ|, max |Δ|, share changed.
    full: tuple[float, float, float] | None = None


@dataclass
class StepDiff:
    """One step, now against the golden, over the step probes."""

    op: str
    now_index: int | None  # None: the step is gone
    golden_index: int | None  # None: a new step
    compared: int = 0
    differing: int = 0
    delta: Delta | None = None  # how it differs (None: added, removed, or none compared)

    @property
    def status(self) -> str:
        if self.now_index is None:
            return "removed"
        if self.golden_index is None:
            return "added"
        if self.compared == 0:
            return "unknown"
        return "differs" if self.differing else "identical"


@dataclass
class StepReport:
    """Which preprocessing step's output first differs from the golden's, and by how much."""

    probes: int
    steps: list[StepDiff] = field(default_factory=list)
    note: StepNote | None = None  # why there is nothing to compare, when there is not
    error: str = ""  # (note "error") why the probes could not be traced
    # With the recorded manifest run here: the first step whose output differs from the golden's
    # although its parameters did not change (the environment changed it), if any.
    environment_step: StepDiff | None = None

    @property
    def first(self) -> StepDiff | None:
        return next((s for s in self.steps if s.status in ("differs", "added", "removed")), None)

    def compared_outputs(self, diff: StepDiff) -> tuple[int | None, int | None]:
        """(golden index, now index) of the outputs that show ``diff``: the step's on both
        sides; for a step on one side only, the other side's output of the step before it."""
        before = self.steps[: self.steps.index(diff)][::-1]
        golden, now = diff.golden_index, diff.now_index
        if golden is None:
            golden = next((s.golden_index for s in before if s.golden_index is not None), None)
        if now is None:
            now = next((s.now_index for s in before if s.now_index is not None), None)
        return golden, now


def describe_difference(
    golden: Sequence[Mapping[str, Any]], now: Sequence[Mapping[str, Any]]
) -> Delta:
    differing = [
        i for i, (g, n) in enumerate(zip(golden, now)) if g.get("sha256") != n.get("sha256")
    ]
    delta = Delta(len(differing), len(golden))
    if not differing:
        return delta
    g0, n0 = golden[differing[0]], now[differing[0]]
    if g0.get("shape") != n0.get("shape"):
        return replace(delta, shape=(_shape(g0.get("shape")), _shape(n0.get("shape"))))
    if g0.get("dtype") != n0.get("dtype"):
        return replace(delta, dtype=(str(g0.get("dtype")), str(n0.get("dtype"))))
    thumbs, means, details = [], [], []
    for i in differing:
        g, n = golden[i], now[i]
        try:
            thumbs.append(np.abs(np.asarray(g["thumb"]) - np.asarray(n["thumb"])).mean())
            means.append(np.asarray(n["mean"]) - np.asarray(g["mean"]))
            details.append((np.asarray(g["detail"]).mean(), np.asarray(n["detail"]).mean()))
        except (KeyError, ValueError, TypeError):
            continue
    if not thumbs:
        return delta
    # The per-channel means (golden's, now) of the probes whose output differs.
    pairs = [
        (np.asarray(g["mean"], np.float64), np.asarray(n["mean"], np.float64))
        for g, n in zip(golden, now)
        if g.get("sha256") != n.get("sha256") and "mean" in g and "mean" in n
    ]
    g_detail, n_detail = (float(v) for v in np.mean(details, axis=0))
    return replace(
        delta,
        unit=str(n0.get("dtype")),
        order=channel_order(pairs),
        alpha=alpha_factor(pairs),
        thumb=float(np.mean(thumbs)),
        shift=tuple(float(v) for v in np.mean(means, axis=0)),
        detail=(g_detail, n_detail),
    )


def channel_order(pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[int, ...] | None:
    """The channels in another order on every probe (the same means, moved): ``order[i]`` is the
    golden's channel that channel ``i`` holds now (matched by their means). None otherwise."""
    if not pairs or any(g.shape != n.shape or g.size < 2 for g, n in pairs):
        return None
    orders = set()
    for g, n in pairs:
        if np.allclose(g, n, rtol=1e-6, atol=1e-9) or not np.allclose(
            np.sort(g), np.sort(n), rtol=1e-3, atol=1e-6
        ):
            return None
        orders.add(tuple(int(j) for j in np.argsort(g)[np.argsort(np.argsort(n))]))
    order = orders.pop() if len(orders) == 1 else None
    return order if order is not None and len(set(order)) == len(order) else None


def alpha_factor(pairs: Sequence[tuple[np.ndarray, np.ndarray]]) -> float | None:
    """The factor every colour mean was scaled by with alpha the same, on every probe (below 1:
    premultiplied by alpha, above: un-premultiplied); None when the means show no such thing."""
    if not pairs or channel_order(pairs) is not None:
        return None
    if not all(g.size == 4 and n.size == 4 for g, n in pairs):
        return None
    ratios = []
    for g, n in pairs:
        if abs(n[3] - g[3]) > 1e-3 * max(abs(g[3]), 1.0) or (g[:3] <= 0).any():
            return None
        ratio = n[:3] / g[:3]
        if np.ptp(ratio) > 0.05 * ratio.mean() or abs(ratio.mean() - 1) < 0.01:
            return None
        ratios.append(float(ratio.mean()))
    return float(np.mean(ratios))


def _shape(shape: Any) -> str:
    return "×".join(str(d) for d in shape) if isinstance(shape, list) else str(shape)


def _fingerprint_rows(probes: Any) -> list[list[Any]]:
    """A golden's well-formed ``[sample id, step index, op, fingerprint]`` rows."""
    rows = probes.get("fingerprints") if isinstance(probes, Mapping) else None
    rows = rows if isinstance(rows, list) else []
    return [r for r in rows if isinstance(r, list) and len(r) == 4 and isinstance(r[3], dict)]


def same_outputs(probes: Any, fresh: Mapping[str, Any]) -> bool:
    """Whether a golden's step probes are ``fresh`` (this run's :func:`record`): the same probe
    samples and steps, and every step output hashing as the golden recorded it."""
    if not isinstance(probes, Mapping) or probes.get("format") != FORMAT:
        return False
    if probes.get("samples") != fresh["samples"] or probes.get("steps") != fresh["steps"]:
        return False
    then = {(str(r[0]), int(r[1])): r[3].get("sha256") for r in _fingerprint_rows(probes)}
    now = {(str(r[0]), int(r[1])): r[3]["sha256"] for r in fresh["fingerprints"]}
    return bool(now) and all(then.get(key) == sha for key, sha in now.items())


def decode_fingerprints(probes: Any) -> dict[str, Mapping[str, Any]]:
    """{sample id: its decode step's fingerprint} from a golden's step probes."""
    return {str(r[0]): r[3] for r in _fingerprint_rows(probes) if r[2] == "decode"}


def align_steps(
    golden_ops: Sequence[str], now_ops: Sequence[str]
) -> list[tuple[int | None, int | None]]:
    """(now index, golden index) pairs in pipeline order; None where a step is only on one side."""
    pairs: list[tuple[int | None, int | None]] = []
    matcher = difflib.SequenceMatcher(a=list(golden_ops), b=list(now_ops), autojunk=False)
    for tag, g1, g2, n1, n2 in matcher.get_opcodes():
        if tag == "equal":
            pairs += [(n1 + k, g1 + k) for k in range(g2 - g1)]
            continue
        # A replaced run: pair steps of the same op in order, the rest are added/removed.
        gs, ns = list(range(g1, g2)), list(range(n1, n2))
        for n in ns:
            match = next((g for g in gs if golden_ops[g] == now_ops[n]), None)
            if match is not None:
                gs.remove(match)
            pairs.append((n, match))
        pairs += [(None, g) for g in gs]
    # A step that moved (normalize before the cast instead of after it) reads as removed here
    # and added there: pair the two.
    for i, (now, golden) in enumerate(pairs):
        if now is not None or golden is None:
            continue
        op = golden_ops[golden]
        added = [
            k for k, (n, g) in enumerate(pairs) if g is None and n is not None and now_ops[n] == op
        ]
        if added:
            pairs[added[0]] = (pairs[added[0]][0], golden)
            pairs[i] = (None, None)
    return [p for p in pairs if p != (None, None)]


def compare_steps(
    probes: Any,
    steps: Sequence[Step],
    samples: Sequence[Sample],
    recorded_steps: Sequence[Step] | None = None,
) -> StepReport:
    """Against the golden's step probes; with ``recorded_steps``, whether this machine reproduces
    the golden and the first difference measured on full arrays. Never raises."""
    try:
        report, now_arrays = _compare(probes, steps, samples)
    except Exception as exc:  # report, do not hide the rest of the diagnosis
        return StepReport(0, note="error", error=str(exc))
    if recorded_steps is None or report.note:
        return report
    if [s.op for s in recorded_steps] != [str(op) for op in probes.get("steps", [])]:
        return report
    try:  # does this machine reproduce the golden with the golden's own pipeline?
        here, here_arrays = _compare(probes, recorded_steps, samples)
    except Exception:  # the recorded pipeline no longer runs here: nothing to refine
        return report
    report.environment_step = here.first
    if here.first is None:
        _measure_first(report, here_arrays, now_arrays)
    return report


def _compare(
    probes: Any, steps: Sequence[Step], samples: Sequence[Sample]
) -> tuple[StepReport, dict[str, list[np.ndarray]]]:
    """The comparison, and every step's outputs for each probe."""
    if not isinstance(probes, Mapping) or probes.get("format") != FORMAT:
        return StepReport(0, note="unrecorded"), {}
    golden_ops = [str(op) for op in probes.get("steps", [])]
    by_id = {s.id: s for s in samples}
    ids = [i for i in probes.get("samples", []) if i in by_id]
    if not ids:
        return StepReport(0, note="absent"), {}
    rows = {(str(r[0]), int(r[1])): r[3] for r in _fingerprint_rows(probes)}
    layouts = [s.layout for s in states(steps)]
    now_arrays = {i: trace(steps, by_id[i]) for i in ids}
    now_fps = {i: [fingerprint(a, layouts[k]) for k, a in enumerate(now_arrays[i])] for i in ids}
    report = StepReport(len(ids))
    for now_index, golden_index in align_steps(golden_ops, [s.op for s in steps]):
        op = steps[now_index].op if now_index is not None else golden_ops[golden_index or 0]
        diff = StepDiff(op, now_index, golden_index)
        report.steps.append(diff)
        if now_index is None or golden_index is None:
            continue
        pairs = [
            (rows[(i, golden_index)], now_fps[i][now_index])
            for i in ids
            if (i, golden_index) in rows
        ]
        if pairs:
            golden_fps, now_step_fps = zip(*pairs)
            diff.delta = describe_difference(golden_fps, now_step_fps)
            diff.compared, diff.differing = len(pairs), diff.delta.differing
    return report, now_arrays


def _measure_first(
    report: StepReport,
    here: dict[str, list[np.ndarray]],
    now_arrays: dict[str, list[np.ndarray]],
) -> None:
    """``here``: the recorded pipeline's outputs on this machine (the golden reproduced)."""
    first = next((s for s in report.steps if s.status in ("differs", "added")), None)
    # An added step's output is compared with the recorded output of the step before it.
    golden_index, now_index = report.compared_outputs(first) if first else (None, None)
    if first is None or golden_index is None or now_index is None:
        return
    deltas, maxima, changed, counted = [], [], 0, 0
    dtype = ""
    means: list[tuple[np.ndarray, np.ndarray]] = []
    for i, arrays in here.items():
        a = arrays[golden_index]
        b = now_arrays[i][now_index]
        if a.shape != b.shape:
            return
        if a.ndim == 3 and a.shape[2] <= 64:  # H×W×C: per-channel means, for the mechanism
            means.append((a.mean(axis=(0, 1), dtype=np.float64),
                          b.mean(axis=(0, 1), dtype=np.float64)))  # fmt: skip
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
        deltas.append(diff.mean())
        maxima.append(diff.max())
        changed += int(np.count_nonzero(diff))
        counted += diff.size
        dtype = str(b.dtype)
    differing = sum(1 for d in maxima if d > 0)
    if not differing:
        return
    pairs = [m for m in means if not np.array_equal(*m)]
    full = (float(np.mean(deltas)), float(np.max(maxima)), changed / counted)
    first.delta = Delta(
        differing, len(here), unit=dtype, order=channel_order(pairs), alpha=alpha_factor(pairs),
        full=full,
    )  # fmt: skip
