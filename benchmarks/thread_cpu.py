"""Where an evaluation's CPU goes, thread by thread: the profile behind ``shares_cpu``.

For one manifest (default: the example's ONNX model), in one process, it times in turn

  (a) the model alone over preprocessed tensors, as a latency measurement loads it;
  (b) an evaluation's schedule (each batch preprocessed by every core, then the model) with the
      runner loaded the same way;
  (c) the same schedule with the runner an evaluation loads (``load_runner(..., shares_cpu=True)``):
      for ONNX Runtime, pool threads that sleep between runs instead of spinning;

and prints, per measurement, the wall time and the CPU seconds of every thread of the process
that is alive at its end (from /proc/self/task: the runtime's own pool threads, which a Python
sampling profiler does not see, included). A runtime thread that uses more CPU in (b) than in
(a) spent the difference spinning on cores that preprocessing needed. Linux only.

    MLREPRO_CACHE=/work/.mlrepro_cache MLREPRO_DATA=../shared/data \\
        python benchmarks/thread_cpu.py [--manifest PATH] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from evaluation_throughput import batches_of  # noqa: E402

import conftest  # noqa: E402, F401  (registers the example's model builders)
from pytest_mlrepro.data import resolve_dataset  # noqa: E402
from pytest_mlrepro.evaluation._evaluate import preprocessed  # noqa: E402
from pytest_mlrepro.manifest import load_manifest  # noqa: E402
from pytest_mlrepro.runners import Runner, load_runner  # noqa: E402
from pytest_mlrepro.settings import Settings, mirrors_from_env  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu() -> dict[str, float]:
    """CPU seconds (user + system) of each live thread of this process, by thread id."""
    out: dict[str, float] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            stat = Path(f"/proc/self/task/{tid}/stat").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        fields = stat.rsplit(")", 1)[1].split()
        out[tid] = (int(fields[11]) + int(fields[12])) / TICK
    return out


def measured(what: str, work: Callable[[], object]) -> None:
    before = thread_cpu()
    start = time.perf_counter()
    work()
    wall = time.perf_counter() - start
    after = thread_cpu()
    used = {t: after[t] - before.get(t, 0.0) for t in after}
    busy = sorted((s for s in used.values() if s >= 0.05), reverse=True)
    shown = "  ".join(f"{s:.2f}" for s in busy)
    print(f"{what:<34} wall {wall:6.2f}s  CPU of live threads {sum(busy):6.2f}s: {shown}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", default=str(ROOT / "manifests/efficientnet_lite0_onnx.yaml"))
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    manifest = load_manifest(Path(args.manifest).resolve())
    settings = Settings.for_project(ROOT, data_mirrors=mirrors_from_env())
    dataset = resolve_dataset(manifest, settings)
    size, samples = manifest.runtime.batch_size, dataset.samples
    tensors = batches_of(manifest, dataset)
    plain = load_runner(manifest, "cpu", settings)
    sharing = load_runner(manifest, "cpu", settings, shares_cpu=True)
    for runner in (plain, sharing):
        runner(tensors[0])  # the first call allocates

    def alone(runner: Runner) -> None:
        for batch in tensors:
            runner(batch)

    def scheduled(runner: Runner) -> None:
        # The evaluation's CPU schedule (evaluation.run_model): prepare a batch, then run it.
        for batch in preprocessed(manifest.pipeline, samples, size, overlap=False):
            np.asarray(runner(batch))

    print(f"{manifest.name} ({manifest.framework.name}), {len(samples)} samples, batch {size}")
    for r in range(args.rounds):
        print(f"round {r + 1}")
        measured("(a) model alone", lambda: alone(plain))
        measured("(b) schedule, default runner", lambda: scheduled(plain))
        measured("(c) schedule, shares_cpu runner", lambda: scheduled(sharing))
    print(
        "The preprocessing pool's threads end with each schedule and are not listed; the runtime's "
        "threads are."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
