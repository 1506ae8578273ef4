"""How much the plugin's latency measurement adds to what it measures.

Times EfficientNet-Lite0 on ONNX Runtime (CPU) two ways in the same process, on the same session
and the same prepared input: the plugin's model-only measurement (``latency.prepare`` +
``timing.measure``, exactly what a ``latency[cpu-bN]`` item runs) and a bare ``session.run`` loop
timed with ``time.perf_counter``, each block after the same 3 warm-up calls. Short blocks
alternate (plugin, bare, bare, plugin, ...) so that a machine slowing down or speeding up
meanwhile affects both alike. Prints, per batch size, both pooled p50s and their ratio, the median
of the per-pair ratios (adjacent blocks: robust to drift), the ratio of the minima (the least
disturbed rounds: the best view of the harness's own overhead on a busy machine), and the share of
the CPUs other processes used meanwhile (a loaded machine makes every figure here noisier).

    MLREPRO_CACHE=/tmp/mlcache MLREPRO_DATA=../shared/data \\
        python benchmarks/latency_overhead.py [--batches 1 32] [--blocks 12] [--block-time 0.75]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import conftest  # noqa: E402, F401  (registers the example's model builders)
from pytest_mlrepro.data._datasets import resolve_dataset  # noqa: E402
from pytest_mlrepro.latency import _measure as latency  # noqa: E402
from pytest_mlrepro.latency import _timing as timing  # noqa: E402
from pytest_mlrepro.manifest._spec import load_manifest  # noqa: E402
from pytest_mlrepro.settings import Settings, mirrors_from_env  # noqa: E402

WARMUP = 3


def bare_loop(session: object, output: list[str], feed: dict[str, np.ndarray], rounds: int) -> list:
    """The loop anyone would write by hand."""
    run = session.run  # type: ignore[attr-defined]
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run(output, feed)
        times.append(time.perf_counter() - start)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--manifest", default=str(ROOT / "manifests/efficientnet_lite0_onnx.yaml"))
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 32])
    parser.add_argument("--blocks", type=int, default=12, help="blocks per side (even)")
    parser.add_argument("--block-time", type=float, default=0.75, help="seconds per block")
    parser.add_argument("--min-rounds", type=int, default=5, help="rounds per block, at least")
    args = parser.parse_args()

    manifest = load_manifest(args.manifest)
    if manifest.framework.name != "onnxruntime":
        parser.error("this benchmark compares against a bare ONNX Runtime loop")
    settings = Settings.for_project(ROOT, data_mirrors=mirrors_from_env())
    dataset = resolve_dataset(manifest, settings)
    print(f"model: {manifest.name}, data: {dataset.origin}")
    print(
        f"machine: {os.cpu_count()} CPUs; threads: ONNX Runtime default (manifest: "
        f"{manifest.runtime.intra_op_threads or 'default'})"
    )
    rule = timing.StopRule(
        min_rounds=args.min_rounds,
        min_time=args.block_time,
        max_time=max(10 * args.block_time, 30.0),
        warmup_rounds=WARMUP,
        warmup_time=0.0,
    )
    print(
        f"{'batch':>5}  {'plugin p50':>11}  {'bare p50':>11}  {'ratio':>6}  {'paired':>6}  "
        f"{'min ratio':>9}  "
        f"{'per image':>10}  {'rounds':>13}  others' CPU"
    )
    for batch in args.batches:
        prepared = latency.prepare(manifest, "cpu", batch, settings, dataset, ["model"])
        runner = prepared.runner
        call = prepared.calls["model"]
        # The same session and input the plugin's call holds.
        feed = call.args[1]  # type: ignore[attr-defined]
        output = call.args[0]  # type: ignore[attr-defined]
        session = runner.session  # type: ignore[attr-defined]
        plugin: list[np.ndarray] = []
        bare: list[np.ndarray] = []
        before = timing.cpu_times()
        for block in range(args.blocks):
            order = ("plugin", "bare") if block % 2 == 0 else ("bare", "plugin")
            for side in order:
                if side == "plugin":
                    m = timing.measure(call, rule)
                    plugin.append(m.seconds)
                else:
                    rounds = plugin[-1].size if plugin else args.min_rounds
                    bare_loop(session, output, feed, WARMUP)  # the plugin's warm-up, alike
                    bare.append(np.asarray(bare_loop(session, output, feed, rounds)))
        load = timing.other_load(before, timing.cpu_times())
        p_all, b_all = np.concatenate(plugin), np.concatenate(bare)
        p50, b50 = float(np.median(p_all)), float(np.median(b_all))
        paired = float(np.median([np.median(p) / np.median(b) for p, b in zip(plugin, bare)]))
        print(
            f"{batch:>5}  {p50 * 1e3:>8.3f} ms  {b50 * 1e3:>8.3f} ms  {p50 / b50:>6.3f}  "
            f"{paired:>6.3f}  {p_all.min() / b_all.min():>9.3f}  "
            f"{p50 / batch * 1e3:>7.2f} ms  {p_all.size:>6}/{b_all.size:<6}  "
            f"{'unknown' if load is None else f'{load:.0%}'}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
