"""pytest-benchmark: the latency results in its format (``--mlrepro-benchmark-json``) name their
manifest, so that its ``compare`` tables, grouped as docs/latency.md shows, tell two manifests'
rows apart (issue 30, 5)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from compat_helpers import LATENCY, needs
from helpers import Project

pytestmark = needs("pytest_benchmark", "pytest-benchmark")


def test_rows_of_two_manifests_have_distinct_names(serial_project: Project) -> None:
    serial_project.make(
        {
            "tiny_onnx.yaml": serial_project.manifest("tiny_onnx", extra=LATENCY),
            "tiny_loose.yaml": serial_project.manifest("tiny_loose", extra=LATENCY),
        },
        goldens=["tiny_onnx", "tiny_loose"],
    )
    result = serial_project.run(
        "-k", "latency", "--mlrepro-update", "--mlrepro-benchmark-json", "bench.json"
    )
    assert result.ret == 0, result.stdout.str()
    names = [
        b["name"]
        for b in json.loads((serial_project.path / "bench.json").read_text())["benchmarks"]
    ]
    assert len(names) == len(set(names)) == 8  # 2 manifests × 2 batches × 2 measurements
    assert {n.split("::")[0] for n in names} == {"tiny_onnx", "tiny_loose"}
    compare = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_benchmark",
            "compare",
            "bench.json",
            "--group-by",
            "param:measurement",
            "--columns",
            "min,median,rounds",
        ],
        cwd=serial_project.path,
        capture_output=True,
        text=True,
        timeout=120,
        # pytest-benchmark reads xdist's variables to turn itself off: not a worker's here.
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")},
    )
    assert compare.returncode == 0, compare.stderr
    assert "tiny_onnx::latency[cpu-b1]::model" in compare.stdout
    assert "tiny_loose::latency[cpu-b1]::model" in compare.stdout
