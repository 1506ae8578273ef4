"""Many preprocessing variants of one manifest on one loaded model: a prefix tree walked a chunk at
a time (each prefix once), a byte-identical batch reusing its scores."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

import numpy as np

from ..data import Sample
from ..errors import SampleError, SignatureError
from ..evaluation import postprocessed, step_key
from ..goldens import nonfinite_rows
from ..manifest import Manifest
from ..pipeline import Decode, Step, Tensor
from ..runners import Runner


@dataclass
class Outcome:
    """What one pipeline gave: the scores of every sample, or why it could not run."""

    scores: np.ndarray | None  # (samples, classes), as the manifest's results are made of
    error: str | None = None


class _Failed(Exception):
    """A step or the model failed for a whole subtree of pipelines."""


def score_pipelines(
    runner: Runner,
    manifest: Manifest,
    samples: Sequence[Sample],
    pipelines: Sequence[Sequence[Step]],
    *,
    chunk: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[Outcome]:
    """A failing pipeline gets an :class:`Outcome` with ``error`` set; the others are unaffected."""
    chunk = chunk or max(1, manifest.runtime.batch_size)
    workers = max(1, min(4, os.cpu_count() or 1))
    parts: list[list[np.ndarray]] = [[] for _ in pipelines]
    errors: list[str | None] = [None] * len(pipelines)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="mlrepro-cf") as pool:
        walker = _Walker(runner, manifest, [tuple(p) for p in pipelines], pool)
        for start in range(0, len(samples), chunk):
            part = samples[start : start + chunk]
            results = walker.run(part, [i for i, e in enumerate(errors) if e is None])
            for index, value in results.items():
                if isinstance(value, str):
                    errors[index] = errors[index] or value
                else:
                    parts[index].append(value)
            if progress is not None:
                progress(min(start + chunk, len(samples)))
    return [
        Outcome(None, error)
        if error
        else Outcome(np.concatenate(part) if part else np.zeros((0, 0)))
        for part, error in zip(parts, errors)
    ]


@dataclass
class _Walker:
    runner: Runner
    manifest: Manifest
    pipelines: list[tuple[Step, ...]]
    pool: ThreadPoolExecutor
    memo: dict[bytes, np.ndarray] = field(default_factory=dict)  # batch digest → scores, a chunk's
    checked: set[tuple[int, ...]] = field(default_factory=set)

    def run(self, samples: Sequence[Sample], active: list[int]) -> dict[int, np.ndarray | str]:
        """Scores (or an error) of each active pipeline on one chunk of samples."""
        out: dict[int, np.ndarray | str] = {}
        self.memo = {}
        try:
            blobs = list(self.pool.map(_read, samples))
        except _Failed as exc:
            return dict.fromkeys(active, str(exc))
        self._walk(samples, blobs, active, 0, out)
        return out

    def _walk(
        self,
        samples: Sequence[Sample],
        inputs: list[Any],  # the files' bytes at depth 0 (the decode's), then tensors
        group: list[int],
        depth: int,
        out: dict[int, np.ndarray | str],
    ) -> None:
        done = [i for i in group if len(self.pipelines[i]) == depth]
        if done:
            try:
                scores: np.ndarray | str = self._score(samples, inputs, done)
            except _Failed as exc:
                scores = str(exc)
            out.update(dict.fromkeys(done, scores))
        rest = [i for i in group if len(self.pipelines[i]) > depth]
        ids = [sample.id for sample in samples]
        for step, sub in _group(self.pipelines, rest, depth):
            apply: Callable[..., Tensor] = step.apply
            args: tuple[list[Any], ...] = (inputs,)
            if depth == 0:  # pipelines start with their decode, which also takes the sample id
                assert isinstance(step, Decode)
                apply, args = step.decode, (inputs, ids)
            try:
                following = list(self.pool.map(_guard, ids, repeat(step.op), repeat(apply), *args))
            except _Failed as exc:
                out.update(dict.fromkeys(sub, str(exc)))
                continue
            self._walk(samples, following, sub, depth + 1, out)

    def _score(
        self, samples: Sequence[Sample], tensors: list[Tensor], group: list[int]
    ) -> np.ndarray:
        shapes = {t.array.shape for t in tensors}
        if len(shapes) > 1:
            raise _Failed(
                f"the pipeline produces arrays of different shapes ({sorted(shapes)[:2]} ...)"
            )
        batch = np.stack([t.array for t in tensors])
        digest = hashlib.blake2b(
            f"{batch.shape}{batch.dtype}".encode() + batch.tobytes(), digest_size=20
        ).digest()
        cached = self.memo.get(digest)
        if cached is not None:
            return cached
        key = tuple(group)
        try:
            if key not in self.checked:
                self.runner.check_batch(batch, self.manifest.input.layout)
                self.checked.add(key)
            size = max(1, self.manifest.runtime.batch_size)
            raw = [
                np.asarray(self.runner(batch[i : i + size]), np.float32)
                for i in range(0, len(batch), size)
            ]
        except SignatureError as exc:
            raise _Failed(f"the model rejects it: {exc}") from None
        except Exception as exc:  # a framework error on this input: this variant cannot run
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise _Failed(f"the model fails on it: {first}") from None
        outputs = np.concatenate(raw)
        if outputs.ndim != 2 or outputs.shape[0] != len(batch):
            raise _Failed(f"the model's output has shape {outputs.shape}")
        bad = nonfinite_rows(outputs)
        if len(bad):  # no ranking is made of NaN/Inf: this variant has no result
            shown = ", ".join(samples[i].id for i in bad[:3])
            raise _Failed(
                f"the model produced non-finite outputs for {len(bad)} of {len(batch)} "
                f"samples ({shown})"
            )
        scores = postprocessed(self.manifest, outputs)
        self.memo[digest] = scores
        return scores


def _group(
    pipelines: list[tuple[Step, ...]], indices: list[int], depth: int
) -> list[tuple[Step, list[int]]]:
    """Pipelines grouped by their step at ``depth``, in first-seen order."""
    groups: dict[str, tuple[Step, list[int]]] = {}
    for index in indices:
        step = pipelines[index][depth]
        # By what the step computes (a custom step may hold a list: not hashable).
        groups.setdefault(step_key(step), (step, []))[1].append(index)
    return list(groups.values())


def _read(sample: Sample) -> bytes:
    try:
        return sample.read()
    except OSError as exc:
        raise _Failed(f"{sample.id}: cannot read {sample.path}: {exc.strerror}") from None


def _guard(sample: str, op: str, fn: Callable[..., Tensor], *args: object) -> Tensor:
    try:
        return fn(*args)
    except SampleError as exc:
        raise _Failed(str(exc)) from None
    except Exception as exc:
        raise _Failed(f"{sample}: {op} failed: {exc}") from None
