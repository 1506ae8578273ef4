"""Which validating decoder reads goldens and results files back: each candidate against
``json.loads`` of the same bytes (the baseline), measured in the same run.

    python benchmarks/validators.py [ROUNDS]

Candidates, on the example's golden (1,000 samples), a 50,000-sample golden made from it and a
results file of one 50,000-sample accuracy row: jsonschema's own validator (value by value);
the hand-written one-pass check in front of it (``_json_schema.py`` of commit ``BEFORE``, before
issue 46, read with git); fastjsonschema compiling the same schema; msgspec decoding
the bytes into typed structs (goldens only: a results row keeps unknown fields, which msgspec
drops). Each figure is parse + validate over the parse alone; the median of ROUNDS rounds
(default 5) and their spread (min-max). The machine may be shared: only the ratios count.
"""

# (no "from __future__ import annotations": msgspec reads the local structs' annotations)

import json
import statistics
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from results_read import _document  # noqa: E402  (the 50,000-sample results row)

Run = Callable[[bytes], object]
BEFORE = "d2af2f7"


def _before() -> Any:
    """The hand-written validator as it was at ``BEFORE`` (a module of the package)."""
    text = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{BEFORE}:pytest_mlrepro/_json_schema.py"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    module = types.ModuleType("pytest_mlrepro._json_schema_before")
    module.__package__ = "pytest_mlrepro"
    exec(compile(text, "_json_schema_before.py", "exec"), module.__dict__)
    return module


def timed(run: Run, raw: bytes) -> float:
    start = time.perf_counter()
    run(raw)
    return time.perf_counter() - start


def golden_bytes(samples: int) -> bytes:
    raw = (REPO / "golden" / "efficientnet_lite0_onnx.json").read_bytes()
    if samples <= 1000:
        return raw
    data = json.loads(raw)
    rows = data["samples"]
    data["samples"] = [[f"{c}/{r[0]}", *r[1:]] for c in range(samples // len(rows)) for r in rows]
    data.pop("data", None)
    data.pop("pixels", None)
    return json.dumps(data).encode()


def msgspec_golden() -> Run:
    import msgspec

    class Dataset(msgspec.Struct):
        classes: int

    class Recorded(msgspec.Struct):
        dataset: Dataset

    class Metrics(msgspec.Struct):
        samples: int
        top1: float
        top5: float

    class GoldenFile(msgspec.Struct):
        format: Literal[1]
        name: str
        manifest: Recorded
        environment: dict[str, Any]
        metrics: Metrics
        samples: list[tuple[str, int, list[int], list[float]]]
        data: dict[str, str] | None = None
        pixels: dict[str, str] | None = None
        probes: dict[str, Any] | None = None
        manifest_file: str | None = None

    decoder = msgspec.json.Decoder(GoldenFile)
    return decoder.decode


def candidates(schema: dict[str, Any], strict: bool, golden: bool) -> dict[str, Run]:
    import fastjsonschema
    import jsonschema

    from pytest_mlrepro import _json_schema

    library = jsonschema.Draft202012Validator(schema)
    runs: dict[str, Run] = {
        "json.loads (baseline)": json.loads,
        "jsonschema": lambda raw: library.validate(json.loads(raw)),
    }
    fast = _before().validator(schema, strict_integers=strict)
    runs["hand one-pass + jsonschema"] = lambda raw: fast.validate(json.loads(raw))
    compiled = fastjsonschema.compile(_json_schema.draft07(schema))
    runs["fastjsonschema"] = lambda raw: compiled(json.loads(raw))
    if golden:
        runs["msgspec typed decode"] = msgspec_golden()
    return runs


def report(what: str, raw: bytes, runs: dict[str, Run], rounds: int) -> None:
    """Each round times every candidate once, then divides by that round's json.loads."""
    print(f"\n{what}, {len(raw) / 2**20:.1f} MiB: ratio to json.loads, median (min-max); ms")
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            times[name].append(timed(run, raw))
    base = times["json.loads (baseline)"]
    for name, taken in times.items():
        ratios = [t / b for t, b in zip(taken, base)]
        print(
            f"  {name:28} ×{statistics.median(ratios):6.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
            f"  {statistics.median(taken) * 1e3:8.1f}"
        )


def compile_cost(schema: dict[str, Any], what: str) -> None:
    """What the first read of a file pays once per process: compiling the schema."""
    import fastjsonschema

    from pytest_mlrepro._json_schema import draft07

    start = time.perf_counter()
    fastjsonschema.compile(draft07(schema))
    taken = (time.perf_counter() - start) * 1e3
    print(f"  fastjsonschema compiles the {what} schema in {taken:.0f} ms")


def main(argv: list[str]) -> int:
    from pytest_mlrepro.goldens import _store
    from pytest_mlrepro.results import results_schema

    rounds = int(argv[0]) if argv else 5
    golden_schema = json.loads(_store.SCHEMA_FILE.read_text())
    for samples in (1000, 50_000):
        runs = candidates(golden_schema, strict=True, golden=True)
        report(f"golden, {samples} samples", golden_bytes(samples), runs, rounds)
    runs = candidates(results_schema(), strict=False, golden=False)
    report("results file, 50,000 samples", json.dumps(_document(50_000)).encode(), runs, rounds)
    print()
    compile_cost(golden_schema, "golden")
    compile_cost(results_schema(), "results")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
