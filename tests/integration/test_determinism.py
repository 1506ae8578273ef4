"""Determinism: the determinism item runs the evaluation twice and requires the same scores (or a
declared tolerance); the manifest's controls (seed, threads, ONNX Runtime's graph optimisation,
deterministic ops) are applied and recorded; repeated runs give the same results file, timings
aside.

The nondeterministic model is a registered builder whose forward adds ``torch.rand`` noise
(1e-4) to the logits: unseeded, two runs differ; with ``runtime.seed`` they are identical, because
the seed is applied again before each evaluation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import (
    BUILDERS_CONFTEST,
    Project,
    make_empty_weights,
    state_dict_manifest,
    tiny_manifest,
)

from pytest_mlrepro.evaluation._determinism import (
    RunsComparer,
    compare_runs,
    controls_in_force,
    seed_everything,
)

IDS = ("a.png", "b.png", "c.png")


def test_identical_runs_compare_equal() -> None:
    scores = np.random.default_rng(0).random((3, 4))
    c = compare_runs(IDS, [scores, scores.copy(), scores.copy()])
    assert c.identical and c.ok and c.max_abs_diff == 0 and c.worst_sample == ""
    assert c.runs == 3 and c.top1_agreement == 1.0


def test_a_difference_fails_unless_within_the_declared_tolerance() -> None:
    first = np.array([[0.1, 0.9], [0.6, 0.4], [0.5, 0.5]])
    second = first.copy()
    second[1] = [0.3, 0.7]  # top-1 changes
    second[2, 0] += 1e-7
    strict = compare_runs(IDS, [first, second])
    assert not strict.ok and not strict.identical
    assert strict.differing_samples == ["b.png", "c.png"]
    assert strict.top1_changed == ["b.png"] and strict.worst_sample == "b.png"
    assert strict.max_abs_diff == pytest.approx(0.3)
    assert compare_runs(IDS, [first, second], tolerance=0.5).ok
    tiny = first.copy()
    tiny[2, 0] += 1e-7
    assert not compare_runs(IDS, [first, tiny]).ok  # tolerance 0: bit-identical only
    assert compare_runs(IDS, [first, tiny], tolerance=1e-6).ok


def test_runs_compared_batch_by_batch_give_the_whole_comparison() -> None:
    """A streamed comparison (batches as they come out of the model, in any sizes) is the
    comparison of the whole score matrices."""
    rng = np.random.default_rng(1)
    ids = [f"s{i}.png" for i in range(50)]
    first = rng.random((50, 7))
    runs = [first, first.copy(), first.copy()]
    runs[1][[3, 17, 40]] += rng.normal(0, 1e-3, (3, 7))
    runs[2][17] = runs[2][17][::-1]  # its top-1 changes too
    whole = compare_runs(ids, runs, tolerance=1e-4)
    streamed = RunsComparer(ids, len(runs), tolerance=1e-4)
    for other in runs[1:]:
        for start, stop in ((0, 8), (8, 9), (9, 32), (32, 50)):
            streamed.update(start, first[start:stop], other[start:stop])
    assert streamed.comparison() == whole
    assert whole.differing_samples == ["s3.png", "s17.png", "s40.png"] and not whole.ok
    assert "s17.png" in whole.top1_changed


def test_nan_equals_nan_but_not_a_number() -> None:
    first = np.array([[np.nan, 1.0]])
    assert compare_runs(IDS[:1], [first, first.copy()]).identical
    other = np.array([[0.5, 1.0]])
    assert compare_runs(IDS[:1], [first, other], tolerance=10.0).max_abs_diff == np.inf


def test_seed_everything_seeds_python_and_numpy() -> None:
    import random

    seed_everything(11)
    a = (random.random(), np.random.random())
    seed_everything(11)
    assert (random.random(), np.random.random()) == a
    seed_everything(None)  # leaves them alone
    assert (random.random(), np.random.random()) != a


def test_controls_recorded_include_the_seed_and_the_runner_settings() -> None:
    manifest = tiny_manifest(seed=5, deterministic_ops=True)
    info = {
        "intra_op_threads": 1,
        "graph_optimization_level": "ORT_ENABLE_BASIC",
        "providers": ["CPUExecutionProvider"],  # not a control
    }
    assert controls_in_force(manifest, info) == {
        "intra_op_threads": 1,
        "graph_optimization_level": "ORT_ENABLE_BASIC",
        "seed": 5,
        "deterministic_ops": True,
    }


# --- through the plugin -------------------------------------------------------------------------


def _project(project: Project) -> dict[str, str]:
    models = project.path / "models"
    models.mkdir()
    sha = make_empty_weights(models / "empty.pt")
    assets = project.assets

    def torch_manifest(name: str, builder: str, extra: str) -> str:
        return state_dict_manifest(
            name, builder, "../models/empty.pt", sha, assets=assets, extra=extra
        )

    runtime = "runtime: {batch_size: 8, devices: [cpu]"
    manifests = {
        "onnx.yaml": project.manifest("det_onnx").replace(
            runtime, runtime + ", graph_optimization: basic, intra_op_threads: 1, seed: 7"
        )
        + "determinism: {}\n",
        "noisy.yaml": torch_manifest("det_noisy", "noisy", "determinism: {}\n"),
        "noisy_seeded.yaml": torch_manifest("det_noisy_seeded", "noisy", "determinism: {}\n"),
        "noisy_tolerant.yaml": torch_manifest(
            "det_noisy_tolerant", "noisy", "determinism: {runs: 3, tolerance: 0.01}\n"
        ),
        "deterministic_ops.yaml": torch_manifest("det_ops", "means", "determinism: {}\n"),
        "plain.yaml": project.manifest("det_plain"),
    }
    manifests["noisy_seeded.yaml"] = manifests["noisy_seeded.yaml"].replace(
        runtime, runtime + ", seed: 1"
    )
    manifests["deterministic_ops.yaml"] = manifests["deterministic_ops.yaml"].replace(
        runtime, runtime + ", deterministic_ops: true, intra_op_threads: 1"
    )
    project.make(manifests)
    (project.path / "conftest.py").write_text(BUILDERS_CONFTEST)
    return manifests


def _rows(path: Path) -> dict[str, dict[str, Any]]:
    return {row["nodeid"]: row for row in json.loads(path.read_text())["results"]}


def test_determinism_items_compare_runs_and_record_the_controls(project: Project) -> None:
    _project(project)
    result = project.run("--mlrepro-update", "--mlrepro-json", "out.json")
    result.assert_outcomes(passed=10, failed=1)  # 6 accuracy, 5 determinism
    result.stdout.fnmatch_lines(
        [
            "manifests/noisy.yaml [[]cpu[]]: 2 runs of the same evaluation differ: largest score "
            "difference * (sample img*), tolerance 0",
            "  */24 samples differ, 0 changed their top-1 class",
            "  controls in force: *deterministic_algorithms=False*seed=None*",
            "  to make runs repeatable set, under runtime:, *",
        ]
    )
    result.stdout.fnmatch_lines(["FAILED manifests/noisy.yaml::determinism[[]cpu[]]*"])
    rows = _rows(project.path / "out.json")
    verdicts = {node: row["verdict"] for node, row in rows.items() if "determinism" in node}
    assert verdicts == {
        "manifests/deterministic_ops.yaml::determinism[cpu]": "identical runs",
        "manifests/noisy.yaml::determinism[cpu]": "nondeterministic",
        "manifests/noisy_seeded.yaml::determinism[cpu]": "identical runs",
        "manifests/noisy_tolerant.yaml::determinism[cpu]": "within tolerance",
        "manifests/onnx.yaml::determinism[cpu]": "identical runs",
    }
    onnx = rows["manifests/onnx.yaml::determinism[cpu]"]
    assert onnx["controls"] == {
        "deterministic_compute": False,
        "deterministic_ops": False,
        "graph_optimization_level": "ORT_ENABLE_BASIC",
        "inter_op_threads": "default",
        "intra_op_threads": 1,
        "seed": 7,
    }
    assert onnx["runs"] == 2 and len(onnx["timing"]["seconds"]) == 2
    assert rows["manifests/onnx.yaml::accuracy[cpu]"]["controls"] == onnx["controls"]
    ops = rows["manifests/deterministic_ops.yaml::determinism[cpu]"]["controls"]
    assert ops["deterministic_algorithms"] is True and ops["deterministic_ops"] is True
    assert ops["intra_op_threads"] == 1
    tolerant = rows["manifests/noisy_tolerant.yaml::determinism[cpu]"]
    assert tolerant["runs"] == 3 and 0 < tolerant["max_score_diff"] <= 0.01
    assert "manifests/plain.yaml::determinism[cpu]" not in rows  # opt-in


def test_the_option_adds_a_determinism_item_to_every_manifest(project: Project) -> None:
    project.make({"plain.yaml": project.manifest("det_plain")})
    collected = project.run("--collect-only", "-q", "--mlrepro-determinism")
    collected.stdout.fnmatch_lines(
        ["manifests/plain.yaml::accuracy[[]cpu[]]", "manifests/plain.yaml::determinism[[]cpu[]]"]
    )
    without = project.run("--collect-only", "-q")
    without.stdout.no_fnmatch_line("*::determinism*")


def _without_timing(value: Any) -> Any:
    if isinstance(value, dict):
        # "created": when the file was written (the history's clock), a time like "timing";
        # "one_time": what the process paid once (its framework imports), timings too.
        return {
            k: _without_timing(v)
            for k, v in value.items()
            if k not in ("timing", "created", "one_time")
        }
    if isinstance(value, list):
        return [_without_timing(v) for v in value]
    return value


def test_three_runs_give_the_same_results_file_apart_from_timing(
    serial_project: Project,
) -> None:
    project = serial_project
    manifests = _project(project)
    for nondeterministic in ("noisy.yaml", "noisy_tolerant.yaml"):
        (project.path / "manifests" / nondeterministic).unlink()
    del manifests["noisy.yaml"], manifests["noisy_tolerant.yaml"]
    project.run("--mlrepro-update").assert_outcomes(passed=7)
    texts = []
    for i, xdist in enumerate(([], ["-n", "2"], [])):  # xdist reports arrive in any order
        result = project.run(*xdist, "--mlrepro-json", f"run{i}.json", subprocess=bool(xdist))
        result.assert_outcomes(passed=7)
        texts.append((project.path / f"run{i}.json").read_text())
    data = [json.loads(text) for text in texts]
    for run in data:
        rows = run["results"]
        order = [(r["manifest"], r["device"], r["nodeid"]) for r in rows]
        assert order == sorted(order)
        assert all("seconds" not in r and "timing" in r for r in rows)
        assert all(isinstance(r["timing"]["seconds"], (float, list)) for r in rows)
    canonical = [json.dumps(_without_timing(run), indent=2, sort_keys=True) for run in data]
    assert canonical[0] == canonical[1] == canonical[2]
    # Apart from the timing blocks, the files are byte-identical as written.
    stripped = ["\n".join(_drop_timing_lines(text)) for text in texts]
    assert stripped[0] == stripped[1] == stripped[2]


def _drop_timing_lines(text: str) -> list[str]:
    """The file's lines without each ``"timing": {...}`` block (as json.dumps(indent=2) writes
    it), the file's ``"one_time": {...}`` costs and its ``"created"`` time."""
    out: list[str] = []
    depth = 0
    for line in text.splitlines():
        if depth:
            depth += line.count("{") + line.count("[") - line.count("}") - line.count("]")
            continue
        if line.startswith('  "created": '):  # the file's own time (top level)
            continue
        if line.strip().startswith(('"timing": {', '"one_time": {')):
            depth = line.count("{") + line.count("[") - line.count("}") - line.count("]")
            continue
        out.append(line)
    return out
