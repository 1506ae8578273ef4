"""Wall time of the example's accuracy item split over two pytest-xdist workers, against the
same item unsharded in one process.

Runs ``pytest`` on a copy of the example project (the EfficientNet-Lite0 ONNX manifest over the
1000-image ImageNet sample, its committed golden) two ways, in interleaved rounds (the order
alternates from round to round, so that a machine slowing down or speeding up meanwhile affects
both alike):

  (a) unsharded, serial: ``pytest manifests/efficientnet_lite0_onnx.yaml -m mlrepro_accuracy``;
  (b) sharded: the same with ``-n 2 --mlrepro-shards 2`` (two shard items, one per worker,
      merged on the controller into the item's verdict).

Each is the whole ``pytest`` process, start-up, collection, model loading and xdist's workers
included: what a user waits for. Each round prints both times and the ratio (b) / (a); the last
line prints the median ratio. Both runs must pass (the verdict is the same).

    MLREPRO_CACHE=/work/.mlrepro_cache MLREPRO_DATA=../shared/data \\
        python benchmarks/sharding.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = "efficientnet_lite0_onnx"


def make_project(folder: Path) -> None:
    (folder / "manifests").mkdir()
    shutil.copytree(ROOT / "manifests" / "datasets", folder / "manifests" / "datasets")
    shutil.copy(ROOT / "manifests" / f"{MANIFEST}.yaml", folder / "manifests")
    (folder / "golden").mkdir()
    shutil.copy(ROOT / "golden" / f"{MANIFEST}.json", folder / "golden")
    shutil.copy(ROOT / "conftest.py", folder)
    shutil.copytree(ROOT / "examples", folder / "examples")
    (folder / "pytest.ini").write_text("[pytest]\n")


def timed(folder: Path, extra: list[str]) -> float:
    command = [
        sys.executable,
        "-m",
        "pytest",
        f"manifests/{MANIFEST}.yaml",
        "-m",
        "mlrepro_accuracy",
        "--mlrepro-device=cpu",
        "-p",
        "no:cacheprovider",
        "-q",
        *extra,
    ]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(extra) or 'unsharded'} failed:\n{done.stdout}{done.stderr}")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not os.environ.get("MLREPRO_DATA"):
        raise SystemExit("set MLREPRO_DATA to the folder holding imagenet-sample/")
    sharded = ["-n", "2", "--mlrepro-shards", "2"]
    with tempfile.TemporaryDirectory(prefix="mlrepro-sharding-") as tmp:
        folder = Path(tmp)
        make_project(folder)
        timed(folder, [])  # warm-up: builds the model into the cache if it is not there yet
        ratios = []
        print(f"CPUs usable: {len(os.sched_getaffinity(0))}")
        for round_ in range(1, args.rounds + 1):
            order = [("unsharded", []), ("sharded", sharded)]
            if round_ % 2 == 0:
                order.reverse()
            times = {name: timed(folder, extra) for name, extra in order}
            ratio = times["sharded"] / times["unsharded"]
            ratios.append(ratio)
            print(
                f"round {round_}: unsharded serial {times['unsharded']:.1f} s, "
                f"-n 2 with 2 shards {times['sharded']:.1f} s, ratio sharded/unsharded {ratio:.3f}"
            )
        median = statistics.median(ratios)
        print(f"median ratio sharded/unsharded over {len(ratios)} rounds: {median:.3f}")


if __name__ == "__main__":
    main()
