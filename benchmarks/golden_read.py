"""Reading a golden back (``goldens.read``: the bounded reader, JSON, the golden's JSON Schema by
jsonschema and the checks no schema can say) against parsing the same bytes with ``json.loads``.

    python benchmarks/golden_read.py [GOLDEN]

GOLDEN (default: the example's ``golden/efficientnet_lite0_onnx.json``, 1,000 samples) is read
as it is, then as a golden of 50,000 samples (ImageNet's validation set: its rows repeated under
new ids, written by the store to a temporary folder). Both timings are taken in this run, on this
machine (the best of three): the ratio is the figure, since the machine may be shared.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

from pytest_mlrepro.goldens import Results, read, write  # noqa: E402

SAMPLES = 50_000


def best_of_three(run: Callable[[], object]) -> float:
    times = []
    for _ in range(3):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def measure(path: Path) -> None:
    raw = path.read_bytes()
    parse = best_of_three(lambda: json.loads(raw))
    whole = best_of_three(lambda: read(path))
    golden = read(path)
    assert golden is not None
    print(
        f"{len(golden.results.ids):>6} samples, {len(raw) / 2**20:5.1f} MiB: "
        f"read {whole * 1e3:7.0f} ms, json.loads {parse * 1e3:5.0f} ms, ratio {whole / parse:4.1f}"
    )


def main(argv: list[str]) -> int:
    path = Path(argv[0]) if argv else REPO / "golden" / "efficientnet_lite0_onnx.json"
    measure(path)
    golden = read(path)
    assert golden is not None
    r = golden.results
    copies = -(-SAMPLES // len(r.ids))
    big = Results(
        ids=tuple(f"{c}/{i}" for c in range(copies) for i in r.ids)[:SAMPLES],
        labels=np.tile(r.labels, copies)[:SAMPLES],
        topk=np.tile(r.topk, (copies, 1))[:SAMPLES],
        topk_scores=np.tile(r.topk_scores, (copies, 1))[:SAMPLES],
    )
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "big.json"
        write(target, dataclasses.replace(golden, results=big, data=None, pixels=None))
        measure(target)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
