"""Reading a results file back: ``load_results`` (the bounded reader, the JSON Schema checked
with jsonschema, the rules beyond it) on one file of a 50,000-sample accuracy row (top-5, golden
and now), against the JSON parse alone and against the library's own value-by-value validator
of the same schema (what the reader would cost without its one-pass check of long lists of
numbers).

    python benchmarks/results_read.py [SAMPLES]

All three are timed in this run, on this machine: only their ratios are the figures (the machine
may be shared). The best of three rounds each.
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from golden_read import best_of_three  # noqa: E402  (the same best-of-three timer)


def _document(samples: int) -> dict[str, object]:
    rng = random.Random(0)
    ids = [f"n{i % 1000:05d}/ILSVRC2012_val_{i:08d}.JPEG" for i in range(samples)]
    results = {
        "ids": ids,
        "labels": [i % 1000 for i in range(samples)],
        "topk": [[(i + j) % 1000 for j in range(5)] for i in range(samples)],
        "topk_scores": [[round(rng.random(), 6) for _ in range(5)] for _ in range(samples)],
    }
    row = {
        "nodeid": "manifests/m.yaml::accuracy[cpu]",
        "outcome": "passed",
        "per_sample": {"now": results, "golden": results, "score_diff": dict.fromkeys(ids, 0.0)},
    }
    machine = {"name": "bench", "environment": {}}
    return {"format": 2, "machine": machine, "shard": None, "results": [row]}


def main(argv: list[str]) -> int:
    import jsonschema

    from pytest_mlrepro.results import load_results, results_schema

    samples = int(argv[0]) if argv else 50_000
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "results.json"
        path.write_text(json.dumps(_document(samples)))
        parse = best_of_three(lambda: json.loads(path.read_text()))
        reader = best_of_three(lambda: load_results(path))
        library = jsonschema.Draft202012Validator(results_schema())
        plain = best_of_three(lambda: library.validate(json.loads(path.read_text())))
        size = path.stat().st_size
    print(f"{samples} samples, {size / 2**20:.1f} MiB")
    print(f"json parse alone                 {parse:7.2f} s  ×1.00")
    print(f"load_results (the reader)        {reader:7.2f} s  ×{reader / parse:.2f}")
    print(f"parse + library validator alone  {plain:7.2f} s  ×{plain / parse:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
