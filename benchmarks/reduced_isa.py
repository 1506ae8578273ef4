"""Cross-machine evidence on one machine: the example's six manifests run with the frameworks held
to fewer instruction sets, compared per sample with the committed goldens.

A nightly matrix wants to know which runtimes give the same predictions on every CPU generation.
Where a framework lets a process use fewer instruction sets than the CPU has, one machine can
stand in for an older one:

* ``ONEDNN_MAX_CPU_ISA`` caps oneDNN, which PyTorch's convolutions and TensorFlow's (oneDNN
  optimisations on, TensorFlow's default on x86 Linux) run on;
* ``ATEN_CPU_CAPABILITY`` caps PyTorch's own vectorised kernels (``default``, ``avx2``,
  ``avx512``);
* ``TF_ENABLE_ONEDNN_OPTS=0`` runs TensorFlow on its Eigen kernels instead of oneDNN's.

ONNX Runtime (MLAS) and LiteRT (XNNPACK) offer no such setting: they pick their kernels from the
CPU's flags at start, so their rows show what any run on this CPU gives, and only another CPU
tests them (the nightly matrix, ``mlrepro merge``).

Each setting is one ``pytest manifests/ -m mlrepro_accuracy --mlrepro-json`` run in a fresh
process (the settings are read when the libraries load). The baseline, the unchanged environment,
is measured in the same run, first; each row prints per-sample top-1 agreement with the golden and
the largest score difference, and the verdict. A runtime is stable across the settings when its
agreement stays 1.0000 and its score difference within the manifest's tolerance.

    MLREPRO_CACHE=/tmp/mlrepro-cache MLREPRO_DATA=../shared/data python benchmarks/reduced_isa.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

SETTINGS: dict[str, dict[str, str]] = {
    "baseline (this CPU, every ISA)": {},
    "oneDNN ≤ AVX2, ATen ≤ avx2": {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"},
    "oneDNN ≤ SSE4.1, ATen default": {
        "ONEDNN_MAX_CPU_ISA": "SSE41",
        "ATEN_CPU_CAPABILITY": "default",
    },
    "TensorFlow without oneDNN": {"TF_ENABLE_ONEDNN_OPTS": "0"},
}
# The variables every setting controls: unset in the baseline, whatever the caller's shell has.
CONTROLLED = sorted({name for env in SETTINGS.values() for name in env})


def run_setting(
    name: str, extra: dict[str, str], folder: Path
) -> tuple[list[dict[str, Any]], float]:
    results = folder / f"{len(list(folder.iterdir()))}.json"
    env = {k: v for k, v in os.environ.items() if k not in CONTROLLED}
    env.update(extra)
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", "manifests/", "-m", "mlrepro_accuracy", "-q",
            "-p", "no:randomly", "-p", "no:cacheprovider", f"--mlrepro-json={results}",
        ],
        cwd=ROOT, env=env, capture_output=True, text=True,
    )  # fmt: skip
    wall = time.perf_counter() - started
    if not results.is_file():
        sys.exit(f"{name}: pytest wrote no results file (exit {done.returncode}):\n{done.stdout}")
    rows = json.loads(results.read_text())["results"]
    return [row for row in rows if row.get("kind", "accuracy") == "accuracy"], wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="setting names to run (default: all)")
    args = parser.parse_args()
    chosen = {k: v for k, v in SETTINGS.items() if not args.only or k in args.only}
    table: dict[str, dict[str, dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in chosen.items():
            rows, wall = run_setting(name, extra, Path(tmp))
            shown = " ".join(f"{k}={v}" for k, v in extra.items()) or "(none)"
            print(f"{name}: {shown}: {len(rows)} items in {wall:.0f} s", flush=True)
            table[name] = {str(row["manifest"]): row for row in rows}
    manifests = sorted({m for rows in table.values() for m in rows})
    baseline = next(iter(table.values()))
    print()
    print(f"{'manifest':32} {'setting':32} {'top-1':>6} {'agreement':>9} {'max diff':>9}  verdict")
    for manifest in manifests:
        for name, rows in table.items():
            row = rows.get(manifest)
            if row is None:
                print(f"{manifest:32} {name:32} {'-':>6} {'-':>9} {'-':>9}  not run")
                continue
            top1 = row.get("top1")
            agreement = row.get("agreement")
            diff = row.get("max_score_diff")
            base = baseline.get(manifest, {}).get("agreement")
            verdict = row.get("verdict") or row.get("outcome")
            ratio = (
                f" (×{agreement / base:.4f} of baseline)"
                if isinstance(agreement, float) and isinstance(base, float) and base
                else ""
            )
            print(
                f"{manifest:32} {name:32} "
                f"{top1 if top1 is not None else '-':>6} "
                f"{f'{agreement:.4f}' if agreement is not None else '-':>9} "
                f"{f'{diff:.2g}' if diff is not None else '-':>9}  {verdict}{ratio}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
