"""Which operators got slower, through the plugin: ``--mlrepro-update`` records the operator
profile with the latency golden, ``--mlrepro-enrich`` adds it to a golden without one (every
recorded figure byte-identical), and a regression names the operators in the terminal and the
results file.

No verdict here depends on this machine's speed: the regression is forced by a golden edited to
be 100× faster than any run, the enrichment's run passes under a tolerance of ×100.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
from helpers import Project

# Imported under the name pytest gives test_latency.py (its folder is on sys.path).
from test_latency import golden_files, latency_project, results

from pytest_mlrepro.goldens import _latency_store as latency_store
from pytest_mlrepro.results import results_schema

ITEM = "manifests/tiny_onnx.yaml::latency[cpu-b1]"
LATENCY = (
    "latency: {batch_sizes: [1], measure: [model], min_rounds: 5, min_time: 0.05, max_time: 2,"
    " warmup_rounds: 2, warmup_time: 0, attempts: 1, tolerance: {p50: TOLERANCE}}\n"
)
MODEL_KINDS = {"ReduceMean", "Flatten", "Mul"}  # the tiny model's nodes (tests/helpers.py)
COUNTS = ("rounds", "iqr_outliers", "stddev_outliers")


def recorded(project: Project) -> tuple[Path, dict[str, Any]]:
    project.run("-k", "latency", "--mlrepro-update").assert_outcomes(passed=1)
    (golden,) = golden_files(project, "tiny_onnx")
    return golden, json.loads(golden.read_text())


def write(golden: Path, data: dict[str, Any]) -> bytes:
    text = latency_store.dumps(data).encode()
    golden.write_bytes(text)
    return text


def test_update_records_the_profile_and_a_regression_names_the_operators(
    serial_project: Project,
) -> None:
    project = latency_project(serial_project, LATENCY.replace("TOLERANCE", "4.0"))
    golden, data = recorded(project)
    profile = data["batches"]["1"]["profile"]
    assert profile["runtime"] == "onnxruntime" and profile["calls"] == 15
    kinds = {o["kind"] for o in profile["operators"]}
    assert "ReduceMean" in kinds and kinds <= MODEL_KINDS
    assert {o["provider"] for o in profile["operators"]} == {"CPUExecutionProvider"}
    names = [o["name"] for o in profile["operators"]]
    assert names == sorted(names)
    assert latency_store.read_golden(golden) == data  # the store reads what it wrote

    # The golden edited to be 100× faster than the model runs: a regression whatever the machine.
    entry = data["batches"]["1"]
    model = entry["measurements"]["model"]
    model["samples_ms"] = [v / 100 for v in model["samples_ms"]]
    model["stats"] = {k: v if k in COUNTS else v / 100 for k, v in model["stats"].items()}
    for o in profile["operators"]:
        o["ms"] = o["ms"] / 100
    write(golden, data)
    slow = project.run("-k", "latency", "--mlrepro-json", "out.json", "--mlrepro-html", "r.html")
    slow.assert_outcomes(failed=1)
    slow.stdout.fnmatch_lines(
        [
            "*latency regression: p50 beyond the tolerance*",
            "  which operators got slower (onnxruntime's profiler, ms per call): operators * ms → "
            "* ms, +* ms added",
            "    th* operator* took *% of the added time:",
            "      operator *op type *golden *now *added *share",
        ]
    )
    document = json.loads((project.path / "out.json").read_text())
    jsonschema.Draft202012Validator(results_schema()).validate(document)
    ops = results(project)[ITEM]["operators"]
    assert ops["compared"] and ops["runtime"] == "onnxruntime" and ops["by_node"]
    assert ops["operators"] and {o["kind"] for o in ops["operators"]} <= MODEL_KINDS
    assert ops["golden_nodes"] == ops["now_nodes"] == len(profile["operators"])
    assert not ops["unfused"] and "changes" not in ops  # none: left out, as empty fields are
    assert ops["pattern"] in ("evenly", "concentrated")
    # The HTML page: a section per regression, its lead and the same lines.
    page = (project.path / "r.html").read_text()
    section = page.split('<section id="operators">')[1].split("</section>")[0]
    assert 'data-manifest="tiny_onnx"' in section and 'data-batch="1"' in section
    assert f"th{'ese' if len(ops['operators']) > 1 else 'is'} {len(ops['operators'])} " in section
    assert "which operators got slower (onnxruntime&#39;s profiler" in section
    assert all(o["name"] in section for o in ops["operators"])

    # A golden without a profile: the regression says so, with the command that adds one.
    del data["batches"]["1"]["profile"]
    write(golden, data)
    bare = project.run("-k", "latency", "--mlrepro-json", "out.json")
    bare.assert_outcomes(failed=1)
    bare.stdout.fnmatch_lines(
        [
            "  which operators got slower: the golden has no operator profile (recorded before "
            "profiles were kept); add one with a run that reproduces the golden:",
            "    pytest 'manifests/tiny_onnx.yaml::latency[[]cpu-b1[]]' --mlrepro-enrich",
            "  or record a new golden with it:",
            "    pytest 'manifests/tiny_onnx.yaml::latency[[]cpu-b1[]]' --mlrepro-update",
        ]
    )
    ops = results(project)[ITEM]["operators"]
    assert ops == {"runtime": "onnxruntime", "compared": False, "missing": "golden", "why": ""}


def test_enrich_adds_the_profile_and_changes_no_recorded_figure(serial_project: Project) -> None:
    project = latency_project(serial_project, LATENCY.replace("TOLERANCE", "100"))
    golden, data = recorded(project)
    # A golden recorded before profiles were kept.
    del data["batches"]["1"]["profile"]
    before = write(golden, data)
    run = project.run("-k", "latency", "--mlrepro-enrich", "--mlrepro-json", "out.json")
    run.assert_outcomes(passed=1)
    shown = f"golden/latency/tiny_onnx/{golden.name}"
    run.stdout.fnmatch_lines(
        [
            "*= mlrepro notes =*",
            f"tiny_onnx [[]cpu[]]: golden {shown} enriched with an operator profile (* operators);"
            " no figure changed",
        ]
    )
    row = results(project)[ITEM]
    assert row["verdict"] == "pass (golden enriched)"
    assert row["golden_enriched"] == ["operator profile"]
    after = json.loads(golden.read_text())
    added = after["batches"]["1"].pop("profile")
    assert {o["kind"] for o in added["operators"]} <= MODEL_KINDS and added["operators"]
    # Every recorded byte as it was: the file without its profile is the file before.
    assert after == data
    assert latency_store.dumps(after).encode() == before
    enriched = golden.read_bytes()

    # Enriched once: a second run has nothing to add and leaves the file alone.
    again = project.run("-k", "latency", "--mlrepro-enrich", "--mlrepro-json", "out.json")
    again.assert_outcomes(passed=1)
    assert results(project)[ITEM]["verdict"] == "pass (golden complete)"
    assert golden.read_bytes() == enriched

    # A run that does not reproduce the golden (here: a golden edited 10,000× faster, without a
    # profile) adds nothing: the regression offers the commands, the file stays as it was.
    model = data["batches"]["1"]["measurements"]["model"]
    model["samples_ms"] = [v / 10_000 for v in model["samples_ms"]]
    model["stats"] = {k: v if k in COUNTS else v / 10_000 for k, v in model["stats"].items()}
    edited = write(golden, data)
    slow = project.run("-k", "latency", "--mlrepro-enrich", "--mlrepro-json", "out.json")
    slow.assert_outcomes(failed=1)
    slow.stdout.fnmatch_lines(["  which operators got slower: the golden has no operator profile*"])
    assert golden.read_bytes() == edited
    assert "golden_enriched" not in results(project)[ITEM]
