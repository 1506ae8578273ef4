"""False-alarm and miss rates of the latency verdict on the example's ONNX manifest (issue 41).

Each run is a fresh ``pytest`` process over one latency item of a copy of
``manifests/efficientnet_lite0_onnx.yaml`` in a temporary project, judged against the golden
committed in ``golden/latency/`` (recorded on another VM of this class: the newcomer's case), in
interleaved rounds of the conditions (the order rotated per round, so that a machine that slows
down meanwhile affects every condition alike):

  unchanged     the manifest as committed;
  slower-host   the same, with the run's process group throttled from outside: stopped for
                ``--throttle`` of every 10 ms (SIGSTOP/SIGCONT), a host that is uniformly that
                much slower, as another VM of the class can be (×1.25 at 0.2);
  threads-1     ``--mlrepro-threads 1`` (two threads recorded);
  no-graph-opt  ``runtime.graph_optimization: disabled``;
  added-op      the model with one more operator on its path (a 5×5 convolution of the input,
                48 channels, reduced to a scalar and added to the logits times zero: the same
                predictions, more work);
  *+slower-host each regression again on the throttled host.

A false alarm is a ``regression`` of an unchanged or slower-host run; a miss is anything but a
``regression`` for the others. ``inconclusive`` and ``contended`` are counted apart.

    MLREPRO_DATA=../shared/data python benchmarks/latency_error_rates.py [--runs 5] [--batch 1]
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = "efficientnet_lite0_onnx"
PERIOD = 0.010  # the throttle's period: shorter than a model call, so every call pays its share

REGRESSIONS = ("threads-1", "no-graph-opt", "added-op")
SLOW = "+slower-host"


def throttle(pgid: int, fraction: float, stop: threading.Event) -> None:
    """Stop the process group for ``fraction`` of every period until ``stop`` is set."""
    while not stop.is_set():
        try:
            os.killpg(pgid, signal.SIGSTOP)
            time.sleep(PERIOD * fraction)
            os.killpg(pgid, signal.SIGCONT)
        except ProcessLookupError:
            return
        time.sleep(PERIOD * (1 - fraction))


def added_operator_model(source: Path, target: Path) -> str:
    """``source`` with a costly operator added on its output path; returns its sha256."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    inp, out = graph.input[0].name, graph.output[0].name
    weights = np.random.default_rng(0).standard_normal((48, 3, 5, 5)).astype(np.float32)
    graph.initializer.extend(
        [
            numpy_helper.from_array(weights, "extra_w"),
            numpy_helper.from_array(np.zeros((), np.float32), "extra_zero"),
        ]
    )
    for node in graph.node:  # the old output becomes an intermediate
        node.output[:] = [f"{out}_before" if o == out else o for o in node.output]
    graph.node.extend(
        [
            helper.make_node("Conv", [inp, "extra_w"], ["extra_conv"], pads=[2, 2, 2, 2]),
            helper.make_node("ReduceMean", ["extra_conv"], ["extra_mean"], keepdims=0),
            helper.make_node("Mul", ["extra_mean", "extra_zero"], ["extra_scaled"]),
            helper.make_node("Add", [f"{out}_before", "extra_scaled"], [out]),
        ]
    )
    onnx.save(model, str(target))
    return hashlib.sha256(target.read_bytes()).hexdigest()


def project(tmp: Path, data: Path) -> dict[str, Path]:
    """A project per condition, each with the manifest, its labels and the committed golden."""
    source = (ROOT / "manifests" / f"{MANIFEST}.yaml").read_text()
    model = next((data / "models").glob("efficientnet_lite0-opset17.onnx"))
    variants = {
        "unchanged": source,
        "no-graph-opt": source.replace("runtime:\n", "runtime:\n  graph_optimization: disabled\n"),
    }
    root = tmp / "added-op"
    (root / "models").mkdir(parents=True)
    sha = added_operator_model(model, root / "models" / "lite0_plus.onnx")
    start, end = source.index("model:\n"), source.index("inputs:\n")
    variants["added-op"] = (
        source[:start]
        + f"model:\n  format: onnx\n  file: {{path: ../models/lite0_plus.onnx, sha256: {sha}}}\n"
        + source[end:]
    )
    folders = {}
    for name, text in variants.items():
        folder = tmp / name
        (folder / "manifests").mkdir(parents=True, exist_ok=True)
        (folder / "manifests" / f"{MANIFEST}.yaml").write_text(text)
        shutil.copytree(ROOT / "manifests" / "datasets", folder / "manifests" / "datasets")
        shutil.copytree(ROOT / "golden" / "latency", folder / "golden" / "latency")
        (folder / "pytest.ini").write_text("[pytest]\n")
        folders[name] = folder
    folders["threads-1"] = folders["slower-host"] = folders["unchanged"]
    return folders


def run(folder: Path, condition: str, batch: int, fraction: float, out: Path) -> dict[str, object]:
    item = f"manifests/{MANIFEST}.yaml::latency[cpu-b{batch}]"
    args = [sys.executable, "-m", "pytest", item, "-p", "no:xdist", "-p", "no:randomly", "-q"]
    args += ["-p", "no:cacheprovider", "--mlrepro-json", str(out)]
    if condition.startswith("threads-1"):
        args += ["--mlrepro-threads", "1"]
    started = time.perf_counter()
    # A session of its own: the throttle stops and continues its whole process group.
    proc = subprocess.Popen(
        args,
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        text=True,
    )
    stop = threading.Event()
    slowed = condition == "slower-host" or condition.endswith(SLOW)
    thread = threading.Thread(target=throttle, args=(proc.pid, fraction, stop), daemon=True)
    if slowed:
        thread.start()
    output, _ = proc.communicate()
    stop.set()
    if slowed:
        thread.join()
    rows = json.loads(out.read_text())["results"] if out.exists() else []
    row = next((r for r in rows if str(r.get("nodeid", "")).split("@")[0] == item), None)
    verdict = str((row or {}).get("verdict", "no result"))
    return {
        "condition": condition,
        "verdict": verdict.split(" ")[0],
        "decided_by": (row or {}).get("decided_by"),
        "seconds": round(time.perf_counter() - started, 1),
        "tail": output.strip().splitlines()[-1] if output.strip() else "",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--throttle", type=float, default=0.2)
    parser.add_argument("--conditions", default="")
    parser.add_argument("--json", type=Path, help="write every run's verdict here")
    args = parser.parse_args()
    data = Path(os.environ.get("MLREPRO_DATA", ROOT.parent / "shared" / "data")).resolve()
    os.environ["MLREPRO_DATA"] = str(data)
    conditions = ["unchanged", "slower-host", *REGRESSIONS, *(c + SLOW for c in REGRESSIONS)]
    if args.conditions:
        conditions = args.conditions.split(",")
    lines = Path("/proc/cpuinfo").read_text().splitlines()
    names = [line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")]
    cpu = names[0] if names else "unknown"
    print(f"CPU: {cpu}, {os.cpu_count()} CPUs; batch {args.batch}; throttle {args.throttle}")
    runs: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folders = project(Path(tmp), data)
        for round_ in range(args.runs):
            order = conditions[round_ % len(conditions) :] + conditions[: round_ % len(conditions)]
            for condition in order:
                folder = folders[condition.removesuffix(SLOW)]
                result = run(folder, condition, args.batch, args.throttle, Path(tmp) / "r.json")
                runs.append(result)
                print(
                    f"round {round_ + 1} {condition:26} {result['verdict']:12} "
                    f"{result['seconds']:6.1f} s  {result['decided_by']}",
                    flush=True,
                )
    columns = ("pass", "regression", "inconclusive", "contended")
    print("\n" + f"{'condition':26} " + "  ".join(f"{c:>12}" for c in (*columns, "other")))
    for condition in conditions:
        verdicts = [str(r["verdict"]) for r in runs if r["condition"] == condition]
        counts = collections.Counter("pass" if v == "faster" else v for v in verdicts)
        other = sum(n for v, n in counts.items() if v not in columns)
        cells = [counts[c] for c in columns] + [other]
        print(f"{condition:26} " + "  ".join(f"{n:>12}" for n in cells))
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))


if __name__ == "__main__":
    main()
