"""What the plugin costs a project that does not use it: pytest on a project with one trivial test
and no manifest, with the plugin installed (its entry point loaded) against ``-p no:mlrepro``.

Each measurement is one fresh ``python -m pytest`` process (interpreter start-up, plugin loading,
collection, the run, the summary), timed from outside. The two variants alternate, round after
round, so that a machine slowing down or speeding up meanwhile affects both alike; the last lines
print each variant's median and their ratio (the goal: at most 1.05), then what each imported of
the plugin's package and whether numpy was among it. The plugin under test is this checkout's
(``PYTHONPATH``), whatever is installed.

    python benchmarks/plugin_overhead.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CONFTEST = """\
import json, os, sys


def pytest_unconfigure(config):
    out = os.environ.get("PLUGIN_OVERHEAD_MODULES")
    if out:
        ours = sorted(m for m in sys.modules if m.split(".")[0] == "pytest_mlrepro")
        with open(out, "w") as fh:
            json.dump({"ours": ours, "numpy": "numpy" in sys.modules}, fh)
"""

# Other plugins of the environment off in both variants: what differs is ours alone.
COMMON = ["-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:benchmark"]
VARIANTS = {"with the plugin": [], "-p no:mlrepro": ["-p", "no:mlrepro"]}


def make_project(folder: Path) -> None:
    (folder / "test_trivial.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
    (folder / "conftest.py").write_text(CONFTEST)
    (folder / "pytest.ini").write_text("[pytest]\n")


def run_once(folder: Path, extra: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *COMMON, *extra],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"pytest failed ({done.returncode}):\n{done.stdout}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="measurements of each (>= 10)")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_ADDOPTS", "MLREPRO_DATA")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="plugin-overhead-") as tmp:
        folder = Path(tmp)
        make_project(folder)
        for extra in VARIANTS.values():  # warm-up: the file system cache, .pyc files
            run_once(folder, extra, env)
        for index in range(args.rounds):
            order = list(VARIANTS.items())
            if index % 2:
                order.reverse()
            for name, extra in order:
                times[name].append(run_once(folder, extra, env))
            print(
                f"round {index + 1:2d}: "
                + ", ".join(f"{name} {times[name][-1] * 1e3:6.0f} ms" for name in VARIANTS),
                flush=True,
            )
        imported = {}
        for name, extra in VARIANTS.items():
            out = folder / f"modules-{len(imported)}.json"
            run_once(folder, extra, {**env, "PLUGIN_OVERHEAD_MODULES": str(out)})
            imported[name] = json.loads(out.read_text())
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, median in medians.items():
        spread = statistics.quantiles(times[name], n=4)
        print(
            f"{name:>16}: median {median * 1e3:6.0f} ms "
            f"(quartiles {spread[0] * 1e3:.0f}-{spread[2] * 1e3:.0f} ms, {args.rounds} runs)"
        )
    ratio = medians["with the plugin"] / medians["-p no:mlrepro"]
    print(f"ratio (with the plugin / -p no:mlrepro): {ratio:.3f} (goal <= 1.05)")
    for name, found in imported.items():
        print(f"{name:>16}: imports {found['ours'] or 'nothing'} of ours; numpy: {found['numpy']}")


if __name__ == "__main__":
    main()
