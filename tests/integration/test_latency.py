"""Latency: the hardware key, the latency block, the per-key golden store, verdicts over
attempts, the pytest-benchmark JSON, and the items through pytester (serial and ``-n 2``).

Verdicts through pytester use a model whose latency the test controls: ``sleepy``, a registered
PyTorch builder whose forward sleeps ``SLEEPY_MS`` milliseconds. Slowdowns are 15×, far beyond any
noise of this machine; nothing asserts on a real model's wall-clock time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from helpers import CHILD_TIMEOUT_S, Project, manifest_text, sha256, short_reference

from pytest_mlrepro import fingerprint
from pytest_mlrepro._yaml import load_yaml
from pytest_mlrepro.errors import GoldenError, ManifestError
from pytest_mlrepro.fingerprint import hardware_key, installed_version
from pytest_mlrepro.goldens import _latency_store as latency_goldens
from pytest_mlrepro.latency import LatencyOutcome
from pytest_mlrepro.latency import _benchjson as benchjson
from pytest_mlrepro.latency import _measure as lat
from pytest_mlrepro.latency._timing import Measurement
from pytest_mlrepro.manifest._spec import Manifest, parse_manifest
from pytest_mlrepro.report import explain_latency
from pytest_mlrepro.settings import Settings

# --- the hardware key -------------------------------------------------------------------------

SLUG = re.compile(r"^cpu-[a-z0-9.-]+-\d+cpu-onnxruntime-1\.20\.0-threads-default-[0-9a-f]{8}$")


def test_hardware_key_is_stable_and_readable() -> None:
    a = hardware_key("cpu", "onnxruntime", "1.20.0", None, None)
    b = hardware_key("cpu", "onnxruntime", "1.20.0", None, None)
    assert a == b and a.slug == b.slug
    assert SLUG.match(a.slug), a.slug
    f = a.fields
    assert f["cpu"] == fingerprint.cpu_model() and f["cpu_count"] == os.cpu_count()
    assert f["usable_cpus"] == fingerprint.usable_cpu_count() >= 1
    assert f["intra_op_threads"] == f["inter_op_threads"] == "default"
    assert f["gpu"] is None and "gpu_driver" not in f  # a CPU latency does not depend on a GPU
    assert json.loads(json.dumps(f)) == f


def test_hardware_key_changes_with_threads_framework_cpu_and_cores(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base = hardware_key("cpu", "onnxruntime", "1.20.0", None, None)
    threads = hardware_key("cpu", "onnxruntime", "1.20.0", 2, 1)
    upgraded = hardware_key("cpu", "onnxruntime", "1.21.0", None, None)
    other_framework = hardware_key("cpu", "torch", "1.20.0", None, None)
    assert "intra2-inter1" in threads.slug
    monkeypatch.setattr(
        fingerprint, "cpu_model", lambda: "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz"
    )
    other_cpu = hardware_key("cpu", "onnxruntime", "1.20.0", None, None)
    assert "-intel-xeon-gold-6338-" in other_cpu.slug
    monkeypatch.undo()
    monkeypatch.setattr(fingerprint, "usable_cpu_count", lambda: 97)
    fewer_cores = hardware_key("cpu", "onnxruntime", "1.20.0", None, None)
    assert "-97cpu-" in fewer_cores.slug
    slugs = [k.slug for k in (base, threads, upgraded, other_framework, other_cpu, fewer_cores)]
    assert len(set(slugs)) == len(slugs)
    # Same machine, other software: still a usable baseline; another CPU never is.
    assert base.same_hardware(threads.fields) and base.same_hardware(upgraded.fields)
    assert not base.same_hardware(other_cpu.fields) and not base.same_hardware(fewer_cores.fields)
    assert threads.differences(base.fields) == {
        "intra_op_threads": ("default", 2),
        "inter_op_threads": ("default", 1),
    }


def test_gpu_model_and_driver_come_from_nvidia_smi_and_key_cuda_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "nvidia-smi"
    fake.write_text(
        "#!/bin/sh\n"
        '[ "$1" = "--query-gpu=name,driver_version" ] || exit 3\n'
        'echo "NVIDIA H100 80GB HBM3, 550.54.15"\necho "NVIDIA H100 80GB HBM3, 550.54.15"\n'
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    fingerprint.gpu_info.cache_clear()
    try:
        assert fingerprint.gpu_info() == {"gpu": "NVIDIA H100 80GB HBM3", "gpu_driver": "550.54.15"}
        cuda = hardware_key("cuda", "torch", "2.13.0", None, None)
        cpu = hardware_key("cpu", "torch", "2.13.0", None, None)
    finally:
        fingerprint.gpu_info.cache_clear()
    assert cuda.fields["gpu"] == "NVIDIA H100 80GB HBM3"
    assert cuda.fields["gpu_driver"] == "550.54.15"
    assert "-nvidia-h100-80gb-hbm3-" in cuda.slug
    assert cpu.fields["gpu"] is None and "nvidia" not in cpu.slug


# --- the latency block ------------------------------------------------------------------------


def parse(text: str) -> Manifest:
    data, lines = load_yaml(text.encode(), "m.yaml")
    return parse_manifest(data, "m.yaml", lines)


def base_text(extra: str = "", framework: str = "onnxruntime") -> str:
    return manifest_text(
        "m", framework, sha="a" * 64, model_path="m.onnx", assets=Path("."), extra=extra
    )


def test_latency_block_defaults_and_validation_name_file_line_field() -> None:
    m = parse(base_text("latency: {batch_sizes: [1, 32]}\n"))
    assert m.latency is not None and m.latency.batch_sizes == (1, 32)
    assert m.latency.measure == ("model", "end_to_end") and m.latency.tolerance == {"p50": 1.25}
    assert parse(base_text()).latency is None
    text = base_text("latency:\n  batch_sizes: [1]\n  tolerance: {p50: 1.3, p95: 2}\n")
    with pytest.raises(ManifestError) as err:
        parse(text)
    assert str(err.value).startswith(f"m.yaml:{text.count(chr(10))}: latency.tolerance.p95: ")
    assert "unknown statistic" in str(err.value)
    for extra, field, words in [
        ("latency: {batch_sizes: [1, 1]}\n", "latency.batch_sizes[1]", "listed twice"),
        ("latency: {tolerance: {p50: 0.9}}\n", "latency.tolerance.p50", "above 1"),
        ("latency: {min_time: 5, max_time: 1}\n", "latency.max_time", "at least min_time"),
        ("latency: {measure: [model, model]}\n", "latency.measure", "each once"),
        ("latency: {min_rounds: 1}\n", "latency.min_rounds", "between 3"),
        ("latency: {measure: [gpu]}\n", "latency.measure[0]", "not one of"),
    ]:
        with pytest.raises(ManifestError, match=re.escape(field) + ".*" + words):
            parse(base_text(extra))


def test_latency_block_is_not_part_of_what_accuracy_goldens_record() -> None:
    plain = parse(base_text())
    with_latency = parse(base_text("latency: {batch_sizes: [4]}\n"))
    assert with_latency.normalized() == plain.normalized()


def test_graph_optimization_reaches_onnx_runtime_and_is_onnx_only(
    mlrepro_assets: Path, tmp_path: Path
) -> None:
    from pytest_mlrepro.runners.onnx import OnnxRunner

    model = mlrepro_assets / "models" / "tiny.onnx"
    shutil.copy(model, tmp_path / "tiny.onnx")
    text = manifest_text("t", model_path="tiny.onnx", assets=mlrepro_assets)
    text = text.replace("runtime: {", "runtime: {graph_optimization: disabled, ")
    (tmp_path / "t.yaml").write_text(text)
    from pytest_mlrepro.manifest._spec import load_manifest

    m = load_manifest(tmp_path / "t.yaml")
    runner = OnnxRunner.load(m, "cpu", Settings.for_project(tmp_path, cache_dir=tmp_path / "c"))
    assert runner.info["graph_optimization_level"] == "ORT_DISABLE_ALL"
    options = runner.session.get_session_options()
    assert str(options.graph_optimization_level).endswith("ORT_DISABLE_ALL")
    with pytest.raises(
        ManifestError, match=r"runtime\.graph_optimization: an ONNX Runtime setting"
    ):
        parse(
            base_text(framework="torch").replace(
                "runtime: {", "runtime: {graph_optimization: all, "
            )
        )


# --- the golden store and the verdict over attempts -------------------------------------------

REFERENCE = {"workload": "matmul", "threads": 2, "numpy": "test"}


def measured(ms: float, seed: int, n: int = 60) -> Measurement:
    values = np.random.default_rng(seed).lognormal(np.log(ms * 1e6), 0.03, n)
    return Measurement(values.astype(np.int64), "min_rounds_and_time", 3, 1000, 10.0, 11.0)


def attempt(
    model_ms: float, ref_ms: float = 2.0, contention: float = 0.02, seed: int = 0, blocks: int = 10
):
    """An attempt of two measurements whose reference ran in ``blocks`` blocks of 4 rounds."""
    return lat.Attempt(
        measurements={
            "model": measured(model_ms, seed),
            "end_to_end": measured(3 * model_ms, seed + 1),
        },
        reference_blocks=tuple(measured(ref_ms, seed + 2 + i, 4).seconds for i in range(blocks)),
        reference=dict(REFERENCE),
        contention=contention,
        started=10.0,
        finished=12.0,
    )


@pytest.fixture
def store(tmp_path: Path) -> tuple[Settings, Manifest]:
    m = parse(base_text("latency: {batch_sizes: [1, 8]}\n"))
    return Settings.for_project(tmp_path, cache_dir=tmp_path / "cache"), m


def record(store: tuple[Settings, Manifest], key, batch: int, a: lat.Attempt) -> Path:
    settings, m = store
    assert m.latency is not None
    settings_now = {"framework_version": key.fields["framework_version"], "intra_op_threads": 2}
    entry = lat.entry_for(a, settings_now, m.latency, batch)
    return latency_goldens.record(settings, m, key, batch, entry, settings_now)


def test_goldens_are_kept_per_key_and_a_second_key_leaves_the_first_alone(store) -> None:
    settings, m = store
    key_a = hardware_key("cpu", "onnxruntime", "1.20.0", None, None)
    key_b = hardware_key("cpu", "onnxruntime", "1.20.0", 1, None)
    path_a = record(store, key_a, 1, attempt(10.0))
    assert path_a == settings.golden_dir / "latency" / "m" / f"{key_a.slug}.json"
    record(store, key_a, 8, attempt(40.0, seed=5))  # a second batch size joins the same file
    before = path_a.read_bytes()
    path_b = record(store, key_b, 1, attempt(17.0))
    assert path_b != path_a and path_a.read_bytes() == before
    data = latency_goldens.read_golden(path_a)
    assert data is not None and sorted(data["batches"]) == ["1", "8"]
    assert data["key"] == key_a.fields and data["slug"] == key_a.slug
    own_a = latency_goldens.find_baseline(settings, m, key_a, 1)
    own_b = latency_goldens.find_baseline(settings, m, key_b, 1)
    assert own_a is not None and own_a.exact and own_a.path == path_a
    assert own_b is not None and own_b.exact and own_b.path == path_b
    assert np.median(own_a.measurements["model"].samples) == pytest.approx(0.010, rel=0.02)
    assert np.median(own_b.measurements["model"].samples) == pytest.approx(0.017, rel=0.02)
    # No file for this key: the same machine's golden with the fewest differences stands in.
    key_c = hardware_key("cpu", "onnxruntime", "1.20.0", 1, 1)
    nearest = latency_goldens.find_baseline(settings, m, key_c, 1)
    assert nearest is not None and not nearest.exact and nearest.path == path_b
    assert (
        latency_goldens.find_baseline(settings, m, key_c, 8) is not None
    )  # only key A has batch 8
    assert latency_goldens.find_baseline(settings, m, key_c, 4) is None


def test_another_machines_golden_is_never_a_baseline(
    store, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, m = store
    record(store, hardware_key("cpu", "onnxruntime", "1.20.0", None, None), 1, attempt(10.0))
    monkeypatch.setattr(fingerprint, "cpu_model", lambda: "Some Other CPU 9000")
    assert (
        latency_goldens.find_baseline(
            settings, m, hardware_key("cpu", "onnxruntime", "1.20.0", None, None), 1
        )
        is None
    )


def test_golden_file_is_reviewable_json_with_one_line_per_sample_list(store) -> None:
    key = hardware_key("cpu", "onnxruntime", "1.20.0", None, None)
    text = record(store, key, 1, attempt(10.0)).read_text()
    data = json.loads(text)
    assert text == latency_goldens.dumps(data)  # stable: sorted keys, re-serialises identically
    sample_lines = [line for line in text.splitlines() if '"samples_ms": [' in line]
    assert len(sample_lines) == 3 and all(
        line.rstrip().endswith(("],", "]")) for line in sample_lines
    )
    entry = data["batches"]["1"]
    assert entry["reference"]["workload"] == REFERENCE and entry["contention"] == 0.02
    assert entry["measurements"]["model"]["stats"]["rounds"] == 60
    assert entry["measurements"]["model"]["stats"]["p50"] == pytest.approx(10.0, rel=0.02)  # ms
    assert entry["latency"]["batch_sizes"] == [1, 8] and entry["settings"]["intra_op_threads"] == 2


def test_invalid_own_golden_is_an_error_and_other_keys_invalid_files_are_skipped(store) -> None:
    settings, m = store
    key = hardware_key("cpu", "onnxruntime", "1.20.0", None, None)
    other = hardware_key("cpu", "onnxruntime", "1.20.0", 3, None)
    own = latency_goldens.golden_file(settings, m, key)
    own.parent.mkdir(parents=True)
    latency_goldens.golden_file(settings, m, other).write_text("{not json")
    assert latency_goldens.find_baseline(settings, m, key, 1) is None
    own.write_text('{"format": 1, "kind": "latency", "key": {}, "batches": {"1": {}}}')
    with pytest.raises(GoldenError, match="not a valid latency golden"):
        latency_goldens.find_baseline(settings, m, key, 1)


def test_a_regression_must_hold_in_every_attempt_and_busy_machines_are_not_judged(store) -> None:
    settings, m = store
    key = hardware_key("cpu", "onnxruntime", "1.20.0", None, None)
    record(store, key, 1, attempt(10.0))
    baseline = latency_goldens.find_baseline(settings, m, key, 1)
    assert baseline is not None
    tol = {"p50": 1.25}
    same = lat.assess(attempt(10.0, seed=20), baseline, tol, 0.25)
    slow = lat.assess(attempt(20.0, seed=30), baseline, tol, 0.25)
    busy_machine = lat.assess(
        attempt(20.0, ref_ms=4.0, contention=0.15, seed=40), baseline, tol, 0.25
    )
    # An idle host that is slower as a whole (another VM of the class): the same.
    slower_host = lat.assess(
        attempt(20.0, ref_ms=4.0, contention=0.0, seed=40), baseline, tol, 0.25
    )
    # A real slowdown on that slower host: still one.
    slower_model_on_slower_host = lat.assess(
        attempt(36.0, ref_ms=4.0, contention=0.0, seed=45), baseline, tol, 0.25
    )
    contended = lat.assess(attempt(20.0, contention=0.6, seed=50), baseline, tol, 0.25)
    # On a busy machine, a slowdown the reference explains is not judged either (the two suffer
    # from contention differently); within tolerance, a busy machine still passes.
    busy_and_slower = lat.assess(
        attempt(20.0, ref_ms=4.0, contention=0.6, seed=80), baseline, tol, 0.25
    )
    busy_and_same = lat.assess(attempt(10.0, contention=0.6, seed=90), baseline, tol, 0.25)
    assert busy_and_slower.verdict == "contended" and busy_and_same.verdict == "pass"
    fast = lat.assess(attempt(5.0, seed=60), baseline, tol, 0.25)
    assert same.verdict == "pass" and same.normalised
    assert slow.verdict == "regression"
    assert {j.outcome for j in slow.judgements["end_to_end"]} == {"regression"}
    assert busy_machine.verdict == "pass"  # everything, the reference too, ran 2× slower
    assert slower_host.verdict == "pass" and slower_host.host is not None
    assert slower_host.host.low > 1.8
    assert slower_model_on_slower_host.verdict == "regression"
    assert contended.verdict == "contended"
    assert fast.verdict == "faster"
    assert lat.conclude([slow, same]).verdict == "pass"  # one clean attempt clears it
    assert lat.conclude([slow, contended]).verdict == "regression"
    assert lat.conclude([contended, contended]).verdict == "contended"
    # A reference of another kind cannot normalise: the absolute ratio decides.
    other_ref = attempt(20.0, seed=70)
    other_ref = dataclasses.replace(other_ref, reference={**REFERENCE, "threads": 7})
    judged = lat.assess(other_ref, baseline, tol, 0.25)
    assert not judged.normalised and judged.verdict == "regression"
    # The same reference under another numpy may convict but not acquit: a slower host is then
    # inconclusive, and an inconclusive attempt keeps a regression from being concluded.
    numpy = {**REFERENCE, "numpy": "other"}
    slower_host_numpy = dataclasses.replace(slower_host.attempt, reference=numpy)
    unsure = lat.assess(slower_host_numpy, baseline, tol, 0.25)
    assert unsure.normalised and not unsure.host_may_excuse and unsure.verdict == "inconclusive"
    assert lat.conclude([slow, unsure]).verdict == "inconclusive"
    assert (
        lat.assess(dataclasses.replace(slow.attempt, reference=numpy), baseline, tol, 0.25).verdict
        == "regression"
    )
    assert judged.judgements["model"][0].normalised is None
    failed = LatencyOutcome(
        end="fail",
        reason="regression",
        assessment=slow,
        baseline=baseline,
        changes={"intra_op_threads": ("default", 1)},
        assessments=3,
        golden_shown="g.json",
        max_contention=0.25,
    )
    text = explain_latency(failed, "CMD")
    assert text.startswith("latency regression: p50 beyond the tolerance in every one of 3")
    assert "intra_op_threads: default → 1" in text and text.rstrip().endswith("CMD")
    assert re.search(r"model +p50 +10\.\d ms +20\.\d ms +×[12]\.\d\d \[", text), text


# --- pytest-benchmark JSON --------------------------------------------------------------------


def keys_of(obj: object, prefix: str = "") -> set[str]:
    if isinstance(obj, dict):
        out = set()
        for k, v in obj.items():
            out.add(prefix + k)
            if k not in ("data", "extra_info", "params", "cpu", "mlrepro_hardware_keys"):
                out |= keys_of(v, prefix + k + ".")
        return out
    if isinstance(obj, list) and obj and isinstance(obj[0], dict):
        return keys_of(obj[0], prefix + "[].")
    return set()


def _skip_unless_pytest_benchmark_supports_this_pytest() -> None:
    """pytest-benchmark's own commands (the comparison) need the pytest it requires: CI's run
    with the oldest pytest the plugin admits (8.0) has a newer pytest-benchmark than that pytest."""
    from packaging.requirements import Requirement

    pytest.importorskip("pytest_benchmark")
    wanted = [
        Requirement(r)
        for r in importlib.metadata.requires("pytest-benchmark") or []
        if Requirement(r).name == "pytest" and Requirement(r).marker is None
    ]
    if any(pytest.__version__ not in r.specifier for r in wanted):
        pytest.skip(f"pytest-benchmark needs {wanted[0]}; this is pytest {pytest.__version__}")


def test_benchmark_json_has_pytest_benchmarks_shape_and_its_compare_reads_it(
    project_onnx: Project, tmp_path: Path
) -> None:
    _skip_unless_pytest_benchmark_supports_this_pytest()
    project = project_onnx
    # Written by the run that records the latency goldens: a run measures alike either way.
    run = project.run("--mlrepro-update", "--mlrepro-benchmark-json", "ours.json")
    run.assert_outcomes(passed=3)
    ours = json.loads((project.path / "ours.json").read_text())
    # pytest-benchmark's own file, from a one-line benchmark, in the same Python.
    theirs_dir = tmp_path / "theirs"
    theirs_dir.mkdir()
    (theirs_dir / "test_b.py").write_text("def test_sum(benchmark):\n    benchmark(sum, [1, 2])\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "test_b.py",
            "--benchmark-json=theirs.json",
            "--benchmark-max-time=0.01",
        ],
        cwd=theirs_dir,
        check=True,
        capture_output=True,
        timeout=CHILD_TIMEOUT_S,
        # Not an xdist worker's environment: pytest-benchmark disables itself under xdist and
        # reads that from these variables, which a test running on a worker would pass on.
        env={k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")},
    )
    theirs = json.loads((theirs_dir / "theirs.json").read_text())
    missing = keys_of(theirs) - keys_of(ours) - {"benchmarks.[].stats.data"}
    assert not missing, missing
    # The layout we mirror; the key check above is against whichever version is installed.
    assert ours["version"] == benchjson.FORMAT_VERSION
    names = sorted(b["name"] for b in ours["benchmarks"])
    # Each name says its manifest: two manifests' rows in pytest-benchmark's tables differ.
    assert names == [
        "tiny_onnx::latency[cpu-b1]::end_to_end",
        "tiny_onnx::latency[cpu-b1]::model",
        "tiny_onnx::latency[cpu-b2]::end_to_end",
        "tiny_onnx::latency[cpu-b2]::model",
    ]
    for b in ours["benchmarks"]:
        s = b["stats"]
        assert s["min"] <= s["q1"] <= s["median"] <= s["q3"] <= s["max"] and s["iterations"] == 1
        assert s["rounds"] == len(s["data"]) >= 5 and s["ops"] == pytest.approx(1 / s["mean"])
        assert b["fullname"] == f"manifests/tiny_onnx.yaml::{b['name'].split('::', 1)[1]}"
        assert b["params"]["measurement"] in ("model", "end_to_end")
        (key,) = ours["machine_info"]["mlrepro_hardware_keys"]
        assert b["extra_info"]["hardware_key"] == fingerprint.HardwareKey(key).slug
    assert ours["machine_info"]["cpu"]["brand_raw"] == fingerprint.cpu_model()
    compare = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_benchmark",
            "compare",
            "ours.json",
            "--group-by",
            "param:measurement",
            "--columns",
            "min,median,rounds",
        ],
        cwd=project.path,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    assert compare.returncode == 0, compare.stderr
    assert "benchmark 'measurement=model': 2 tests" in compare.stdout, compare.stdout
    assert "latency[cpu-b2]::end_to_end" in compare.stdout


def test_commit_info_reads_git_without_writing_and_says_unversioned_elsewhere(
    tmp_path: Path,
) -> None:
    from pytest_mlrepro.latency._benchjson import commit_info

    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    info = commit_info(root)
    assert re.fullmatch(r"[0-9a-f]{40}", info["id"]) and isinstance(info["dirty"], bool)
    assert info["project"] == root.name and info["time"]
    assert commit_info(tmp_path) == {
        "id": "unversioned",
        "time": None,
        "author_time": None,
        "dirty": False,
        "project": tmp_path.name,
        "branch": "(unknown)",
    }


# --- the items, through pytester --------------------------------------------------------------

LATENCY_ONNX = (
    "latency: {batch_sizes: [1, 2], min_rounds: 5, min_time: 0.05, max_time: 2,"
    " warmup_rounds: 2, warmup_time: 0, attempts: 2, tolerance: {p50: 4.0}}\n"
)
# 15 rounds: on a loaded machine (a busy loop per core beside the tests) a few rounds of the 10 ms
# golden take many times that; of 5 rounds, three such made a 15x slowdown's bootstrap bounds too
# wide to call it a regression (an honest "pass": the plugin does not claim what it cannot tell).
LATENCY_SLEEPY = (
    "latency: {batch_sizes: [1], measure: [model], min_rounds: 15, min_time: 0.05, max_time: 5,"
    " warmup_rounds: 1, warmup_time: 0, attempts: 2, tolerance: {p50: 2.0}}\n"
)
QUIET_MACHINE = "mlrepro_latency_max_contention = 1\n"  # contention is its own test
SLEEPY_CONFTEST = '''\
import os
import time

import pytest_mlrepro


@pytest_mlrepro.model_builder("sleepy")
def sleepy():
    import torch

    class Sleepy(torch.nn.Module):
        """10 × the channel means, after sleeping SLEEPY_MS milliseconds."""

        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.tensor(10.0))

        def forward(self, x):
            time.sleep(float(os.environ.get("SLEEPY_MS", "10")) / 1000)
            return x.mean(dim=(2, 3)) * self.scale

    return Sleepy()
'''


@pytest.fixture(autouse=True)
def _short_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    short_reference(monkeypatch)


@pytest.fixture(scope="session")
def sleepy_weights(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    path = tmp_path_factory.mktemp("sleepy") / "sleepy.pt"
    torch.save({"scale": torch.tensor(10.0)}, path)
    return path


def latency_project(project: Project, extra: str = LATENCY_ONNX) -> Project:
    project.make(
        {"tiny_onnx.yaml": project.manifest("tiny_onnx", extra=extra)}, goldens=["tiny_onnx"]
    )
    with open(project.path / "pytest.ini", "a") as fh:
        fh.write(QUIET_MACHINE)
    return project


def sleepy_project(project: Project, weights: Path) -> Project:
    text = project.manifest("sleepy", "torch", extra=LATENCY_SLEEPY)
    model = textwrap.dedent(f"""\
        model:
          format: state_dict
          builder: sleepy
          weights:
            path: ../models/sleepy.pt
            sha256: {sha256(weights)}
        """)
    text = re.sub(r"model:\n(?:  .*\n)+", model, text, count=1)
    project.make({"sleepy.yaml": text})
    shutil.copy(weights, project.path / "models" / "sleepy.pt")
    (project.path / "conftest.py").write_text(SLEEPY_CONFTEST)
    with open(project.path / "pytest.ini", "a") as fh:
        fh.write(QUIET_MACHINE)
    return project


def record_golden(project: Project) -> None:
    run = project.run("--mlrepro-update", "-k", "latency")
    run.assert_outcomes(passed=2)


def results(project: Project, file: str = "out.json") -> dict[str, dict]:
    data = json.loads((project.path / file).read_text())
    return {row["nodeid"].split("@")[0]: row for row in data["results"]}


def golden_files(project: Project, name: str) -> list[Path]:
    return sorted((project.path / "golden" / "latency" / name).glob("*.json"))


@pytest.fixture
def project_onnx(serial_project: Project) -> Project:
    return latency_project(serial_project)


def test_no_golden_for_this_machine_skips_with_the_command_that_records_one(
    project: Project,
) -> None:
    latency_project(project)
    first = project.run("-rs", "--mlrepro-json", "out.json")
    first.assert_outcomes(passed=1, skipped=2)  # the accuracy item still runs
    key = hardware_key("cpu", "onnxruntime", installed_version("onnxruntime") or "", None, None)
    for batch in (1, 2):
        first.stdout.fnmatch_lines(
            [
                f"SKIPPED [[]1[]] manifests/tiny_onnx.yaml:1: no latency golden for this machine "
                f"and settings ({fingerprint.cpu_model()}, * CPUs, onnxruntime *, threads "
                f"default/default): no golden/latency/tiny_onnx/{key.slug}.json; record one with",
                f"  pytest 'manifests/tiny_onnx.yaml::latency[[]cpu-b{batch}[]]' --mlrepro-update",
            ]
        )
    rows = results(project)
    assert rows["manifests/tiny_onnx.yaml::latency[cpu-b1]"]["verdict"] == "no golden"
    assert rows["manifests/tiny_onnx.yaml::latency[cpu-b1]"]["hardware_slug"] == key.slug
    assert rows["manifests/tiny_onnx.yaml::latency[cpu-b1]"]["hardware_key"] == key.fields
    assert not (project.path / "golden" / "latency").exists()
    strict = project.run("--mlrepro-strict", "-k", "latency")
    strict.assert_outcomes(failed=2)
    strict.stdout.fnmatch_lines(
        [
            "no latency golden for this machine*",
            "  pytest 'manifests/tiny_onnx.yaml::latency[[]cpu-b1[]]' --mlrepro-update",
            "(a failure because of --mlrepro-strict)",
        ]
    )

    # The printed command records exactly that item's entry; then it passes.
    recorded = project.run("manifests/tiny_onnx.yaml::latency[cpu-b1]", "--mlrepro-update")
    recorded.assert_outcomes(passed=1)
    recorded.stdout.fnmatch_lines(
        [
            "tiny_onnx *cpu *1 *model *- *ms *- *- *[0-9]* *golden recorded "
            "*not compared: no latency golden*"
        ]
    )
    (path,) = golden_files(project, "tiny_onnx")
    assert path.name == f"{key.slug}.json"
    assert sorted(json.loads(path.read_text())["batches"]) == ["1"]
    again = project.run("-k", "latency", "--mlrepro-json", "out.json")
    again.assert_outcomes(passed=1, skipped=1)
    again.stdout.fnmatch_lines(
        [
            "=* mlrepro latency =*",
            "manifest *device *batch *measure *golden *now *×golden *×norm *rounds *verdict "
            "*decided by",
            "tiny_onnx *cpu *1 *model *ms p50 *ms *×* *×* *pass*",
        ]
    )
    row = results(project)["manifests/tiny_onnx.yaml::latency[cpu-b1]"]
    model = row["measurements"]["model"]
    assert row["verdict"].startswith("pass") and model["rounds"] >= 5
    assert row["golden"] == f"golden/latency/tiny_onnx/{key.slug}.json"
    (p50,) = [j for j in model["judgements"] if j["statistic"] == "p50"]
    assert p50["ratio"] > 0 and "normalised" in p50


def test_a_second_hardware_key_does_not_disturb_the_first(serial_project: Project) -> None:
    # One batch size: the keys are the subject (batch sizes sharing a key's file:
    # test_goldens_are_kept_per_key_and_a_second_key_leaves_the_first_alone).
    project = latency_project(serial_project, LATENCY_ONNX.replace("[1, 2]", "[1]"))
    project.run("--mlrepro-update", "-k", "latency").assert_outcomes(passed=1)
    (first,) = golden_files(project, "tiny_onnx")
    state = (first.read_bytes(), first.stat().st_ino, first.stat().st_mtime_ns)
    # --mlrepro-update with nothing changed leaves a latency golden alone (no churn from noise).
    same = project.run("-k", "latency", "--mlrepro-update", "--mlrepro-json", "out.json")
    same.assert_outcomes(passed=1)
    assert results(project)["manifests/tiny_onnx.yaml::latency[cpu-b1]"]["verdict"] == "pass"
    assert (first.read_bytes(), first.stat().st_ino, first.stat().st_mtime_ns) == state
    other = project.run("-k", "latency", "--mlrepro-update", "--mlrepro-threads", "1")
    other.assert_outcomes(passed=1)
    files = golden_files(project, "tiny_onnx")
    assert len(files) == 2 and first in files
    assert (first.read_bytes(), first.stat().st_ino, first.stat().st_mtime_ns) == state
    (second,) = [f for f in files if f != first]
    assert "-intra1-interdefault-" in second.name
    assert json.loads(second.read_text())["key"]["intra_op_threads"] == 1
    # Each key compares with its own golden; a third, unrecorded one with the nearest.
    for threads, expected in (("1", second), ("", first)):
        args = ["--mlrepro-threads", threads] if threads else []
        run = project.run("-k", "latency", "--mlrepro-json", "out.json", *args)
        run.assert_outcomes(passed=1)
        row = results(project)["manifests/tiny_onnx.yaml::latency[cpu-b1]"]
        assert row["golden"] == f"golden/latency/tiny_onnx/{expected.name}"
        assert "vs" not in row["verdict"]
    third = project.run("-k", "latency", "--mlrepro-json", "out.json", "--mlrepro-threads", "1,1")
    third.assert_outcomes(passed=1)
    row = results(project)["manifests/tiny_onnx.yaml::latency[cpu-b1]"]
    assert row["golden"] == f"golden/latency/tiny_onnx/{second.name}"
    assert row["verdict"].startswith(f"pass (vs {second.stem})")
    assert row["changed"]["inter_op_threads"] == ["default", 1]
    assert (first.read_bytes(), first.stat().st_ino, first.stat().st_mtime_ns) == state


def test_bad_thread_option_and_contention_setting_stop_the_run(serial_project: Project) -> None:
    project = latency_project(serial_project)
    bad = project.run("--mlrepro-threads", "two")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--mlrepro-threads 'two': expected INTRA or INTRA,INTER*"])
    worse = project.run("-o", "mlrepro_latency_max_contention=2")
    assert worse.ret == pytest.ExitCode.USAGE_ERROR


def test_unchanged_passes_and_a_slowdown_is_a_regression_with_golden_now_and_settings(
    project: Project, sleepy_weights: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sleepy_project(project, sleepy_weights)
    monkeypatch.setenv("SLEEPY_MS", "10")
    recorded = project.run("-k", "latency", "--mlrepro-update")
    recorded.assert_outcomes(passed=1)
    (golden,) = golden_files(project, "sleepy")
    state = golden.read_bytes()
    same = project.run("-k", "latency", "--mlrepro-json", "out.json")
    same.assert_outcomes(passed=1)
    assert results(project)["manifests/sleepy.yaml::latency[cpu-b1]"]["verdict"].startswith("pass")

    # 15× slower, and on one thread: a regression, with the numbers and what changed.
    monkeypatch.setenv("SLEEPY_MS", "150")
    slow = project.run("-k", "latency", "--mlrepro-threads", "1", "--mlrepro-json", "out.json")
    slow.assert_outcomes(failed=1)
    slow.stdout.fnmatch_lines(
        [
            "manifests/sleepy.yaml [[]cpu, batch 1[]]: latency regression: p50 beyond the "
            "tolerance in every one of 2 attempts, both absolutely and relative to the "
            "reference workload",
            "  measurement *stat *golden *now *now/golden *normalised *tolerance",
            "  model *p50 *ms *ms *×* [[]*[]] *×* [[]*[]] *≤×2 *✗",
            "  reference workload p50: * at recording (* blocks), * now (* blocks, "
            "slowest/fastest ×*): host ×*",
            "  changed since the golden:",
            "    intra_op_threads: default → 1",
            f"  golden: golden/latency/sleepy/{golden.name} (recorded with other settings on "
            "this machine), recorded *",
            "  if the change is intended, record a new golden:",
            "    pytest 'manifests/sleepy.yaml::latency[[]cpu-b1[]]' --mlrepro-update "
            "--mlrepro-threads 1",
        ]
    )
    row = results(project)["manifests/sleepy.yaml::latency[cpu-b1]"]
    assert row["verdict"] == "regression" and row["attempts"] == 2
    (p50,) = [j for j in row["measurements"]["model"]["judgements"] if j["statistic"] == "p50"]
    assert p50["ratio"] > 5 and p50["normalised"] > 2
    assert row["intra_op_threads"] == 1
    assert golden.read_bytes() == state
    # Accepting it records the new key's golden; the first stays as it was.
    accept = project.run("-k", "latency", "--mlrepro-threads", "1", "--mlrepro-update")
    accept.assert_outcomes(passed=1)
    accept.stdout.fnmatch_lines(["sleepy *cpu *1 *model *ms p50 *ms *×* *golden recorded *ratio*"])
    assert len(golden_files(project, "sleepy")) == 2 and golden.read_bytes() == state


def test_latency_is_never_timed_while_another_worker_runs_an_item(
    pytester: pytest.Pytester, mlrepro_assets: Path, _mlrepro_env: None
) -> None:
    project = latency_project(Project(pytester, mlrepro_assets, []))
    record_golden(project)  # in this process: the subject is the xdist run that follows
    project.xdist = ["-n", "2"]
    (project.path / "test_busy.py").write_text(
        textwrap.dedent("""\
            import json
            import time

            import pytest


            @pytest.mark.parametrize("n", range(4))
            def test_busy(n):
                start = time.time()
                while time.time() - start < 0.3:  # a CPU-bound test in the other worker
                    pass
                with open(f"busy{n}.json", "w") as fh:
                    json.dump([start, time.time()], fh)
            """)
    )
    run = project.run("manifests", "test_busy.py", "--mlrepro-json", "out.json")
    run.assert_outcomes(passed=7)
    busy = [json.loads((project.path / f"busy{n}.json").read_text()) for n in range(4)]
    rows = results(project)
    windows = [rows[f"manifests/tiny_onnx.yaml::latency[cpu-b{b}]"]["window"] for b in (1, 2)]
    for start, end in windows:
        for b_start, b_end in busy:
            assert end <= b_start or b_end <= start, (windows, busy)


def test_loadgroup_sends_the_latency_items_to_one_worker_with_any_pytest(
    pytester: pytest.Pytester, mlrepro_assets: Path, _mlrepro_env: None
) -> None:
    """``--dist loadgroup``: both latency items carry the group in their node ids (set by the
    plugin: pytest 9.2 ignores the one xdist's marker sets) and run in one worker; without it,
    no group, and no marker that ``--strict-markers`` would refuse without pytest-xdist."""
    project = latency_project(Project(pytester, mlrepro_assets, []))
    record_golden(project)
    plain = project.run("--strict-markers", "-p", "no:xdist", "--mlrepro-json", "plain.json")
    plain.assert_outcomes(passed=3)
    nodeids = json.loads((project.path / "plain.json").read_text())["results"]
    assert all("@" not in row["nodeid"] for row in nodeids)
    project.xdist = ["-n", "2", "--dist", "loadgroup"]
    grouped = project.run("manifests", "-v", "--mlrepro-json", "out.json")
    grouped.assert_outcomes(passed=3)
    workers = {
        line.split("]", 1)[0].lstrip("[")
        for line in grouped.outlines
        if "::latency[cpu-b" in line and " PASSED " in line
    }
    assert len(workers) == 1, grouped.outlines
    rows = json.loads((project.path / "out.json").read_text())["results"]
    latency = [row["nodeid"] for row in rows if "::latency[" in row["nodeid"]]
    assert len(latency) == 2 and all(n.endswith("@mlrepro-latency") for n in latency), latency


@contextlib.contextmanager
def cpu_hogs() -> Iterator[None]:
    """One busy-looping process per usable CPU, stopped (by their handles) on exit."""
    procs = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(fingerprint.usable_cpu_count())
    ]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


@pytest.mark.slow  # loads every core for its whole length: a minute or more
def test_a_busy_machine_records_nothing_and_a_slowdown_there_is_contended_not_failed(
    serial_project: Project, sleepy_weights: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = sleepy_project(serial_project, sleepy_weights)
    busy_ini = (project.path / "pytest.ini").read_text().replace(QUIET_MACHINE, "")
    quiet_ini = busy_ini + QUIET_MACHINE
    (project.path / "pytest.ini").write_text(busy_ini)  # the default limit, 0.25
    monkeypatch.setenv("SLEEPY_MS", "10")
    with cpu_hogs():
        refused = project.run(
            "-k", "latency", "--mlrepro-update", "-rs", "--mlrepro-json", "o.json"
        )
    refused.assert_outcomes(skipped=1)
    refused.stdout.fnmatch_lines(
        [
            "SKIPPED *latency not recorded: the machine was busy in every attempt (other processes "
            "used at least *% of the CPUs, more than mlrepro_latency_max_contention = 0.25)*"
        ]
    )
    assert not golden_files(project, "sleepy")
    row = results(project, "o.json")["manifests/sleepy.yaml::latency[cpu-b1]"]
    assert row["verdict"] == "not recorded" and row["contention"] > 0.25

    (project.path / "pytest.ini").write_text(quiet_ini)
    project.run("-k", "latency", "--mlrepro-update").assert_outcomes(passed=1)
    (project.path / "pytest.ini").write_text(busy_ini)
    monkeypatch.setenv("SLEEPY_MS", "150")
    with cpu_hogs():
        busy = project.run("-k", "latency", "-rs", "--mlrepro-json", "o.json")
    busy.assert_outcomes(skipped=1)
    busy.stdout.fnmatch_lines(
        [
            "SKIPPED *latency not judged: the machine was busy (other processes used *% of the "
            "CPUs, more than 25%) in every one of 2 attempts, and the model measured slower than "
            "the golden allows*"
        ]
    )
    assert (
        results(project, "o.json")["manifests/sleepy.yaml::latency[cpu-b1]"]["verdict"]
        == "contended"
    )


def test_a_slowdown_a_loosely_measured_host_might_explain_is_inconclusive_not_a_verdict(
    project: Project, sleepy_weights: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The golden is edited so that today's model runs ×3 slower absolutely (a sleep: no load
    # makes it less), while its reference blocks say the recording host was ×3 faster with a
    # spread (×10,000 between its two blocks) that bounds the host factor only within thousands,
    # whatever today's reference measures (preempted on a loaded host, its reference rounds can
    # run tens of times slower; with a ×100 spread the test failed once on a loaded machine).
    # The normalised ratio's bounds then straddle the tolerance: neither a pass nor a
    # regression, a skip that says why and how to settle it; a failure under --mlrepro-strict.
    sleepy_project(project, sleepy_weights)
    monkeypatch.setenv("SLEEPY_MS", "20")
    project.run("-k", "latency", "--mlrepro-update").assert_outcomes(passed=1)
    (golden,) = golden_files(project, "sleepy")
    data = json.loads(golden.read_text())
    entry = data["batches"]["1"]
    model = entry["measurements"]["model"]
    model["samples_ms"] = [v / 3 for v in model["samples_ms"]]
    counts = ("rounds", "iqr_outliers", "stddev_outliers")
    model["stats"] = {k: v if k in counts else v / 3 for k, v in model["stats"].items()}
    block = float(np.median(entry["reference"]["blocks_ms"])) / 3
    entry["reference"]["blocks_ms"] = [block / 100, block * 100]
    golden.write_text(latency_goldens.dumps(data))
    run = project.run("-k", "latency", "-rs", "--mlrepro-json", "out.json")
    run.assert_outcomes(skipped=1)
    run.stdout.fnmatch_lines(
        [
            "SKIPPED *latency inconclusive: p50 beyond the tolerance absolutely, in 2 attempts, "
            "but the reference workload could not tell whether this host or the model is slower",
            "*to settle it, measure again alone on this host*",
            "*pytest 'manifests/sleepy.yaml::latency[[]cpu-b1[]]' -p no:xdist",
        ]
    )
    row = results(project)["manifests/sleepy.yaml::latency[cpu-b1]"]
    assert row["verdict"] == "inconclusive" and row["status"] == "skipped"
    assert row["decided_by"].startswith("inconclusive: model p50: absolute ×")
    assert "straddle ≤×2" in row["decided_by"]
    strict = project.run("-k", "latency", "--mlrepro-strict")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(["*(a failure because of --mlrepro-strict)*"])


def test_the_baseline_pools_the_reference_of_every_batch_size_recorded(store) -> None:
    # One short reference measurement can be a lucky one; the golden file's batch sizes were
    # recorded on the same machine in the same session, so all of them make the baseline.
    settings, m = store
    key = hardware_key("cpu", "onnxruntime", "1.20.0", None, None)
    record(store, key, 1, attempt(10.0, ref_ms=2.0, seed=1))
    record(store, key, 8, attempt(10.0, ref_ms=3.0, seed=2))
    one = latency_goldens.find_baseline(settings, m, key, 1)
    eight = latency_goldens.find_baseline(settings, m, key, 8)
    assert one is not None and eight is not None
    assert one.reference_samples.size == eight.reference_samples.size == 80
    assert np.median(one.reference_samples) == pytest.approx(2.5e-3, rel=0.1)
    # Every block of both recordings bounds the host factor: 10 blocks each.
    assert one.reference_blocks.size == eight.reference_blocks.size == 20
    assert sorted(np.round(one.reference_blocks * 1e3).astype(int).tolist()) == [2] * 10 + [3] * 10
    assert one.measurements["model"].samples.size != 0
