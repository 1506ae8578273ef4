"""The main job against its compute bound, item by item and phase by phase (issue 34).

Configurations, each in a fresh process, in interleaved rounds (the order rotated per round, so
that a machine slowing down or speeding up meanwhile affects all of them alike):

  main job      ``pytest manifests/ -m mlrepro_accuracy`` with ``--mlrepro-json`` (the session's
                shared preprocessing on, as a CI job runs it): its wall and CPU time, and each
                item's call with its per-phase account (``timing.phases``) from the results file;
  model alone   per manifest: the runner over tensors preprocessed beforehand in that process,
                every batch once as the evaluation runs them (wall, its first call included
                and shown; glibc's allocator at its fastest for these models, set here:
                ``heap_blocks``), and that pipeline's preprocessing pass as
                an evaluation makes it (every core, ``evaluation.preprocessed``);
  imports       every framework the manifests need, imported (what a session does once).

Printed per round and as medians: each item's call against its model alone plus its share of
the one-time costs (one preprocessing pass and the imports, over the items; the item that pays
the session's shared pass for all, its ``shared preprocessing`` phase, has that phase left out
of its call), its phases against
its model alone; the main job against the sum of the models alone plus one preprocessing pass
(the largest of the pipelines' passes: the shared prefix is decoded once) plus the imports. Then
whether the results files of every round are equal apart from timings.

    MLREPRO_DATA=../shared/data python benchmarks/main_job.py [--rounds 3] [--quick]
    python benchmarks/main_job.py --compare BEFORE.json AFTER.json

About 6 minutes a round on 2 loaded cores; ``--quick`` is one round.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import main_job_seconds, without_timings  # noqa: E402

from pytest_mlrepro._phases import PHASES  # noqa: E402

TARGET = 1.10


def _child(args: list[str], data: Path) -> dict[str, Any]:
    """This script in a fresh process (``--alone`` or ``--imports``): its JSON line."""
    env = {**os.environ, "MLREPRO_DATA": str(data), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, __file__, *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def alone(manifest_path: str) -> dict[str, Any]:
    """In this (fresh) process: the manifest's preprocessing pass as an evaluation makes it, and
    its model alone over those tensors."""
    from evaluation_throughput import model_alone

    import conftest  # noqa: F401  (registers the example's model builders)
    from pytest_mlrepro.data import resolve_dataset
    from pytest_mlrepro.evaluation._evaluate import preprocessed
    from pytest_mlrepro.manifest import load_manifest
    from pytest_mlrepro.runners import import_frameworks, load_runner
    from pytest_mlrepro.settings import Settings, mirrors_from_env

    manifest = load_manifest(Path(manifest_path))
    import_frameworks([manifest.framework.name])
    settings = Settings.for_project(ROOT, data_mirrors=mirrors_from_env())
    dataset = resolve_dataset(manifest, settings)
    wall, cpu = time.perf_counter(), time.process_time()
    batches = list(
        preprocessed(manifest.pipeline, dataset.samples, manifest.runtime.batch_size, overlap=False)
    )
    prep_wall, prep_cpu = time.perf_counter() - wall, time.process_time() - cpu
    wall, cpu = time.perf_counter(), time.process_time()
    runner = load_runner(manifest, "cpu", settings, shares_cpu=True)
    load_wall, load_cpu = time.perf_counter() - wall, time.process_time() - cpu
    heap_blocks()
    # Every batch once, the first call included, as the evaluation runs them: the first call's
    # extra (each layer's kernels chosen and its buffers allocated on first use) is the
    # framework's, not the plugin's. Timed apart, to be shown.
    cpu, wall = time.process_time(), time.perf_counter()
    runner(batches[0])
    first = time.perf_counter() - wall
    model_wall = first + model_alone(runner, batches[1:])
    return {
        "manifest": manifest.name,
        "model": model_wall,
        "model_cpu": time.process_time() - cpu,
        "first_call": first,
        "preprocessing": prep_wall,
        "preprocessing_cpu": prep_cpu,
        "load": load_wall,
        "load_cpu": load_cpu,
    }


def heap_blocks() -> None:
    """glibc's allocator as fast as it gets for these models, whatever the code under test sets:
    blocks up to 512 MiB (a layer's activations) from the heap, and its free top kept, so that a
    batch reuses the previous batch's memory instead of faulting every page in again (measured:
    up to a third less CPU for torch and Keras than glibc's defaults). Other C libraries: as
    they are."""
    if not os.confstr("CS_GNU_LIBC_VERSION"):
        return
    libc = ctypes.CDLL(None)
    libc.mallopt(-3, 512 << 20)  # M_MMAP_THRESHOLD
    libc.mallopt(-1, 1024 << 20)  # M_TRIM_THRESHOLD


def imports() -> dict[str, Any]:
    """In this (fresh) process: every framework the example's manifests need, imported."""
    from pytest_mlrepro.manifest import load_manifest
    from pytest_mlrepro.runners import frameworks_of, import_frameworks

    manifests = [load_manifest(p) for p in sorted((ROOT / "manifests").glob("*.yaml"))]
    names = frameworks_of(manifests)
    wall, cpu = time.perf_counter(), time.process_time()
    import_frameworks(names)
    return {"imports": time.perf_counter() - wall, "imports_cpu": time.process_time() - cpu}


def _results(path: Path) -> dict[str, Any]:
    """A results file without its timings: every ``timing`` and the latency rows, which are
    measurements of time whole (their milliseconds, rounds, contention and verdict)."""
    document = without_timings(path)
    assert isinstance(document, dict)
    document["results"] = [r for r in document["results"] if r.get("kind") != "latency"]
    return document


def compare_files(before: Path, after: Path) -> int:
    """Whether two results files are equal apart from timings (:func:`_results`); the differing
    fields when not. 0: equal."""
    a, b = _results(before), _results(after)
    if a == b:
        print(f"{before} and {after}: equal apart from timings (latency rows left out)")
        return 0
    print(f"{before} and {after}: DIFFER")
    for key in sorted(set(a) | set(b)):
        if key != "results" and a.get(key) != b.get(key):
            print(f"  {key}: {a.get(key)!r} != {b.get(key)!r}"[:400])
    rows_a = {r["nodeid"]: r for r in a.get("results", [])}
    rows_b = {r["nodeid"]: r for r in b.get("results", [])}
    for nodeid in sorted(set(rows_a) | set(rows_b)):
        ra, rb = rows_a.get(nodeid, {}), rows_b.get(nodeid, {})
        for field in sorted(set(ra) | set(rb)):
            if ra.get(field) != rb.get(field):
                print(f"  {nodeid}: {field}: {ra.get(field)!r} != {rb.get(field)!r}"[:400])
    return 1


def cpu_words() -> str:
    """The CPU's vendor, model and the instruction-set flags that shape numerics (as goldens
    record them)."""
    from pytest_mlrepro.fingerprint import environment

    env = environment()
    flags = " ".join(env.get("cpu_flags") or []) or "none"
    return f"{env.get('cpu')} ({env.get('cpu_vendor')}; flags: {flags})"


def _ratio(values: list[float]) -> str:
    return f"×{statistics.median(values):.3f} (rounds {min(values):.3f}-{max(values):.3f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one round")
    parser.add_argument(
        "--compare",
        nargs=2,
        metavar=("BEFORE", "AFTER"),
        help="only say whether two results files are equal apart from timings (and where not)",
    )
    parser.add_argument("--alone", help=argparse.SUPPRESS)  # a child: one manifest's model
    parser.add_argument("--imports", action="store_true", help=argparse.SUPPRESS)  # a child
    args = parser.parse_args()
    if args.alone:
        print(json.dumps(alone(args.alone)))
        return 0
    if args.imports:
        print(json.dumps(imports()))
        return 0
    if args.compare:
        return compare_files(*map(Path, args.compare))

    data = Path(os.environ.get("MLREPRO_DATA", ROOT.parent / "shared" / "data")).resolve()
    rounds = 1 if args.quick else args.rounds
    manifests = [str(p) for p in sorted((ROOT / "manifests").glob("*.yaml"))]
    print(f"CPU: {cpu_words()}; {len(os.sched_getaffinity(0))} usable cores")
    print(f"load average at the start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    configs = ["main job", "imports", *manifests]
    ratios: dict[str, dict[str, list[float]]] = {}
    job: dict[str, list[float]] = {}
    files: list[Path] = []

    def keep(into: dict[str, list[float]], what: str, value: float) -> float:
        into.setdefault(what, []).append(value)
        return value

    with tempfile.TemporaryDirectory(prefix="mlrepro-main-job-") as tmp:
        for r in range(rounds):
            order = configs[r % len(configs) :] + configs[: r % len(configs)]
            models: dict[str, dict[str, Any]] = {}
            once: dict[str, Any] = {}
            for config in order:
                if config == "main job":
                    files.append(Path(tmp) / f"results-{r}.json")
                    job_wall, job_cpu = main_job_seconds(data, True, files[-1])
                elif config == "imports":
                    once = _child(["--imports"], data)
                else:
                    found = _child(["--alone", config], data)
                    models[found["manifest"]] = found
            document = json.loads(files[-1].read_text())
            rows = {
                row["manifest"]: row
                for row in document["results"]
                if row.get("kind") == "accuracy" and "timing" in row
            }
            # One preprocessing pass: the largest of the pipelines' (the session decodes the
            # shared prefix once; each pipeline repeats only its cheap tail).
            prep = max(models.values(), key=lambda m: m["preprocessing"])
            fixed = {
                "wall": prep["preprocessing"] + once["imports"],
                "cpu": prep["preprocessing_cpu"] + once["imports_cpu"],
            }
            total = {
                w: sum(m[f"model{s}"] for m in models.values())
                for w, s in (("wall", ""), ("cpu", "_cpu"))
            }
            loads = {
                w: sum(m[f"load{s}"] for m in models.values())
                for w, s in (("wall", ""), ("cpu", "_cpu"))
            }
            bound = total["wall"] + fixed["wall"]
            cpu_bound = total["cpu"] + fixed["cpu"]
            print(
                f"round {r + 1}: main job {job_wall:.1f} s wall, {job_cpu:.1f} s CPU; models "
                f"alone {total['wall']:.1f} s ({total['cpu']:.1f} s CPU), one preprocessing pass "
                f"{prep['preprocessing']:.1f} s ({prep['preprocessing_cpu']:.1f} s CPU), imports "
                f"{once['imports']:.1f} s ({once['imports_cpu']:.1f} s CPU), model loads "
                f"{loads['wall']:.1f} s ({loads['cpu']:.1f} s CPU)"
            )
            print(
                f"  main job / (models alone + one preprocessing pass + imports): "
                f"×{keep(job, 'wall', job_wall / bound):.3f} wall, "
                f"×{keep(job, 'cpu', job_cpu / cpu_bound):.3f} CPU; "
                f"with the model loads in the bound ×"
                f"{keep(job, 'wall+loads', job_wall / (bound + loads['wall'])):.3f} wall, ×"
                f"{keep(job, 'cpu+loads', job_cpu / (cpu_bound + loads['cpu'])):.3f} CPU"
            )
            for name, row in sorted(rows.items()):
                timing, m = row["timing"], models[name]
                phases = timing["phases"]
                into = ratios.setdefault(name, {})
                call_cpu = sum(t["cpu"] for t in phases.values())
                share = {w: v / len(rows) for w, v in fixed.items()}
                # The session's one shared preprocessing pass, paid by the first item through
                # it for every item: a one-time cost, counted in every item's share instead.
                paid = phases.get("shared preprocessing", {"wall": 0.0, "cpu": 0.0})
                item_wall = keep(
                    into,
                    "wall",
                    (timing["call"] - paid["wall"]) / (m["model"] + m["load"] + share["wall"]),
                )
                item_cpu = keep(
                    into,
                    "cpu",
                    (call_cpu - paid["cpu"]) / (m["model_cpu"] + m["load_cpu"] + share["cpu"]),
                )
                in_model = phases.get("model", {"wall": 0.0, "cpu": 0.0})
                model_wall = keep(into, "model wall", in_model["wall"] / m["model"])
                model_cpu = keep(into, "model cpu", in_model["cpu"] / m["model_cpu"])
                shown = ", ".join(
                    f"{p} {phases[p]['wall']:.2f}/{phases[p]['cpu']:.2f}"
                    for p in PHASES
                    if p in phases
                )
                if paid["wall"]:
                    print(
                        f"  {name} paid the session's shared preprocessing pass: "
                        f"{paid['wall']:.2f} s ({paid['cpu']:.2f} s CPU), left out of its call "
                        "below (each item's share of the one-time costs includes it)"
                    )
                print(
                    f"  {name}: call {timing['call'] - paid['wall']:.2f} s "
                    f"({call_cpu - paid['cpu']:.2f} s CPU) against model "
                    f"alone {m['model']:.2f} s ({m['model_cpu']:.2f}; its first call "
                    f"{m['first_call']:.2f} s) + load {m['load']:.2f} s "
                    f"({m['load_cpu']:.2f}) + share {share['wall']:.2f} s ({share['cpu']:.2f}): "
                    f"×{item_wall:.3f} wall, ×{item_cpu:.3f} CPU; model phase / model alone "
                    f"×{model_wall:.3f} wall, ×{model_cpu:.3f} CPU"
                )
                print(f"    phases (wall/CPU s): {shown}")
            sys.stdout.flush()
        same = all(_results(f) == _results(files[0]) for f in files[1:])
    print(f"medians over {rounds} round(s):")
    for name in sorted(ratios):
        got = ratios[name]
        verdict = "within" if statistics.median(got["wall"]) <= TARGET else "ABOVE"
        print(
            f"  {name}: call / (model alone + load + share) {_ratio(got['wall'])} wall "
            f"({verdict} ×{TARGET:.2f}), {_ratio(got['cpu'])} CPU; model phase / model alone "
            f"{_ratio(got['model wall'])} wall, {_ratio(got['model cpu'])} CPU"
        )
    verdict = "within" if statistics.median(job["wall"]) <= TARGET else "ABOVE"
    print(
        f"  main job / (models alone + one preprocessing pass + imports) {_ratio(job['wall'])} "
        f"wall ({verdict} ×{TARGET:.2f}), {_ratio(job['cpu'])} CPU; with the model loads "
        f"{_ratio(job['wall+loads'])} wall, {_ratio(job['cpu+loads'])} CPU"
    )
    if len(files) > 1:
        print(f"  results files of every round equal apart from timings: {same}")
    print(f"load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
