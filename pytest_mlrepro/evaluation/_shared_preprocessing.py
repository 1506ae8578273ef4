"""Preprocessed samples shared across a session's evaluations, keyed by the sample's sha256 and
every prefix step (a wrong reuse is a silent wrong verdict); docs/design.md, "Decode once"."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from ..data import Sample
from ..errors import MlreproError, SampleError
from ..pipeline import Pipeline, Step, Tensor

Prefix = tuple[Hashable, tuple[str, ...]]
"""A data key and the keys of a pipeline's first steps."""


def step_key(step: Step) -> str:
    """What a step computes: its class and every parameter."""
    kind = type(step)
    return f"{kind.__module__}.{kind.__qualname__}:{step!r}"


def _keys(pipe: Pipeline) -> tuple[str, ...]:
    return tuple(step_key(step) for step in pipe.steps)


@dataclass
class ShareStats:
    """What sharing saved and cost in a session, for the terminal and the benchmarks."""

    reused: int = 0  # samples whose prefix was taken from another evaluation's work
    computed: int = 0  # samples whose shared prefix was computed for the others (kept or not)
    over_budget: int = 0  # samples computed and not kept: the budget was spent
    peak_bytes: int = 0


@dataclass
class _Node:
    uses_left: int
    tensors: dict[str, Tensor] = field(default_factory=dict)  # by sample sha256


class PreprocessingShare:
    """The session's shared prefixes: planned from every evaluation the session will run, filled
    by the first evaluation through each, read by the rest, dropped when the last is done."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self.stats = ShareStats()
        self._nodes: dict[Prefix, _Node] = {}
        self.held_bytes = 0
        self._spent = False  # a tensor did not fit in the budget: the rest will not either
        self._lock = threading.Lock()

    def plan(self, uses: Sequence[tuple[Hashable, Pipeline]]) -> None:
        """Plan for one ``(data key, pipeline)`` per evaluation: a prefix is kept where two or
        more pass through it and it ends on a costly step."""
        passes: Counter[Prefix] = Counter()
        for data, pipe in uses:
            keys = _keys(pipe)
            for depth in range(1, len(keys) + 1):
                passes[(data, keys[:depth])] += 1
        for data, pipe in uses:
            keys = _keys(pipe)
            shared = max(
                (d for d in range(1, len(keys) + 1) if passes[(data, keys[:d])] > 1), default=0
            )
            # Moved back past cheap steps: the uint8 image is kept, not its float32 copy.
            depth = shared
            while depth > 0 and pipe.steps[depth - 1].cheap:
                depth -= 1
            if depth:
                prefix = (data, keys[:depth])
                self._nodes.setdefault(prefix, _Node(uses_left=passes[prefix]))

    def loader(self, data: Hashable, pipe: Pipeline) -> SharedLoader | None:
        """How ``pipe`` loads a sample of ``data`` with the shares; None if it shares nothing."""
        keys = _keys(pipe)
        depths = [d for d in range(len(keys), 0, -1) if (data, keys[:d]) in self._nodes]
        if not depths:
            return None
        return SharedLoader(self, pipe, [(d, (data, keys[:d])) for d in depths])

    def finished(self, data: Hashable, pipe: Pipeline) -> None:
        """One evaluation is over (or will not run): a prefix nobody else needs is dropped."""
        keys = _keys(pipe)
        with self._lock:
            for depth in range(1, len(keys) + 1):
                prefix = (data, keys[:depth])
                node = self._nodes.get(prefix)
                if node is None:
                    continue
                node.uses_left -= 1
                if node.uses_left <= 0:
                    self.held_bytes -= sum(t.array.nbytes for t in node.tensors.values())
                    del self._nodes[prefix]

    def _get(self, prefix: Prefix, sha256: str, reuse: bool = True) -> Tensor | None:
        """The tensor kept for the sample, counted as reused unless only looked for."""
        with self._lock:
            node = self._nodes.get(prefix)
            kept = None if node is None else node.tensors.get(sha256)
            if kept is not None and reuse:
                self.stats.reused += 1
            return kept

    def _put(self, prefix: Prefix, sha256: str, tensor: Tensor) -> None:
        with self._lock:
            node = self._nodes.get(prefix)
            if node is None or sha256 in node.tensors:
                return
            self.stats.computed += 1
            if self.held_bytes + tensor.array.nbytes > self.budget_bytes:
                self.stats.over_budget += 1
                self._spent = True
                return
            # Read-only: a later step that wrote into its input would change what the next
            # evaluation reads (numpy raises instead).
            tensor.array.flags.writeable = False
            node.tensors[sha256] = tensor
            self.held_bytes += tensor.array.nbytes
            self.stats.peak_bytes = max(self.stats.peak_bytes, self.held_bytes)


class SharedLoader:
    """Load from the deepest kept prefix, keeping deeper planned prefixes for the others."""

    def __init__(
        self, share: PreprocessingShare, pipe: Pipeline, prefixes: list[tuple[int, Prefix]]
    ) -> None:
        self.share = share
        self.pipe = pipe
        self.prefixes = prefixes  # deepest first

    def __call__(self, sample: Sample) -> np.ndarray:
        if not sample.sha256:  # nothing says which bytes it was: never shared
            return self.pipe(read_sample(sample), sample.id)
        t, done = self._through_prefixes(sample, sample.sha256)
        return self.pipe.run(t, done, len(self.pipe.steps), sample.id).array

    def _through_prefixes(self, sample: Sample, sha256: str) -> tuple[Tensor, int]:
        """The sample's tensor at the deepest planned prefix, and the steps it has been through."""
        t: Tensor | None = None
        for depth, prefix in self.prefixes:  # deepest first
            t = self.share._get(prefix, sha256)
            if t is not None:
                done = kept = depth
                break
        if t is None:
            t = self.pipe.decode(read_sample(sample), sample.id)
            done, kept = 1, 0
        for depth, prefix in reversed(self.prefixes):  # the deeper ones not kept yet, on the way
            if depth > kept:
                t = self.pipe.run(t, done, depth, sample.id)
                done = depth
                self.share._put(prefix, sha256, t)
        return t, done

    def unfilled(self, samples: Sequence[Sample]) -> list[Sample]:
        """The samples whose deepest planned prefix :meth:`fill` would compute."""
        if self.share._spent:
            return []
        deepest = self.prefixes[0][1]
        kept = self.share._get
        return [s for s in samples if s.sha256 and kept(deepest, s.sha256, False) is None]

    def fill(self, samples: Sequence[Sample], workers: int) -> int:
        """Compute the deepest planned prefix of every sample not kept yet, up front on ``workers``
        threads; how many. A failing sample is left to the evaluation to report."""
        todo = self.unfilled(samples)
        if not todo:
            return 0

        def keep(sample: Sample) -> int:
            if self.share._spent:
                return 0
            try:
                self._through_prefixes(sample, sample.sha256)
            except MlreproError:  # the evaluation reports it, in its place
                return 0
            return 1

        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mlrepro-fill") as pool:
            # Interrupted (a time limit, Ctrl-C), ``map`` cancels the samples not started yet.
            return sum(pool.map(keep, todo))


def read_sample(sample: Sample) -> bytes:
    """The sample's bytes, verified in the read; unreadable: this sample's error."""
    try:
        return sample.read()
    except OSError as exc:
        raise SampleError(sample.id, f"cannot read {sample.path}: {exc.strerror}") from None
