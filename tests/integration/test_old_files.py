"""Files written before issue 32 still load and are judged the same.

``tests/data/old/`` holds goldens and a results file that the code of ``main`` wrote before the
golden's and the results file's validation moved to JSON Schemas (its README says how). They are
read by today's code, never regenerated:

* the old goldens, put in the tiny project, judge today's run as the old run was judged: the same
  verdicts, figures and diagnosis (the old results file says what they were), untouched;
* the old results file merges (``mlrepro merge --csv``) to the figures and verdicts it holds;
* the old latency golden loads with the baseline it records.

The run uses the tiny project of tests/helpers.py, whose files the old goldens record (their
sha256 in ``data``): a change to how the helpers make the images shows here as ``data changed``.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import PREPROCESS_BGR, Project

from pytest_mlrepro.cli import main
from pytest_mlrepro.goldens import _latency_store as latency_store
from pytest_mlrepro.goldens import _store as golden_store
from pytest_mlrepro.results import load_results

OLD = Path(__file__).resolve().parents[1] / "data" / "old"
# The manifests of the old run that have an old golden here; tiny_swapped drifted (see README).
MANIFESTS = ("tiny_onnx", "tiny_swapped")
# The merged matrix's columns that say how a cell was judged (not when, nor on which host).
JUDGED = ("manifest_digest", "samples", "top1", "top5", "agreement", "verdict", "status")


def old_rows() -> dict[str, dict[str, Any]]:
    """The old results file's accuracy rows, by manifest."""
    data = json.loads((OLD / "results.json").read_text())
    return {row["manifest"]: row for row in data["results"] if row["kind"] == "accuracy"}


def merged_csv(results: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, str]]:
    """``mlrepro merge RESULTS --csv``: the result rows, by manifest."""
    out = results.with_suffix(".csv")
    capsys.readouterr()
    status = main(["merge", str(results), "--csv", str(out)])
    capsys.readouterr()
    assert status in (0, 1), status  # 2: the file did not load
    rows = csv.DictReader(io.StringIO(out.read_text()))
    return {row["manifest"]: row for row in rows if row["row"] == "result"}


@pytest.mark.parametrize("name", MANIFESTS)
def test_an_old_golden_reads_as_the_figures_it_stores(name: str) -> None:
    path = OLD / "golden" / f"{name}.json"
    stored = json.loads(path.read_text())
    golden = golden_store.read(path)
    assert golden is not None
    assert golden.name == stored["name"] == name
    assert golden.metrics == stored["metrics"]
    assert list(golden.results.ids) == [row[0] for row in stored["samples"]]
    assert golden.results.topk.tolist() == [row[2] for row in stored["samples"]]
    assert golden.results.topk_scores.tolist() == [row[3] for row in stored["samples"]]
    assert (golden.data, golden.pixels, golden.probes) == (
        stored["data"],
        stored["pixels"],
        stored["probes"],
    )


def test_old_goldens_judge_a_run_as_the_old_run_was_judged(
    serial_project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project = serial_project.make(
        {
            "tiny_onnx.yaml": serial_project.manifest("tiny_onnx"),
            # As in the old run: recorded decoding RGB, run decoding BGR.
            "tiny_swapped.yaml": serial_project.manifest("tiny_swapped", decode=PREPROCESS_BGR),
        }
    )
    for name in MANIFESTS:
        shutil.copy(OLD / "golden" / f"{name}.json", project.golden(name))
    before = {name: project.golden(name).read_bytes() for name in MANIFESTS}

    result = project.run("--mlrepro-json", "now.json", "--mlrepro-machine", "vm")

    old = old_rows()
    assert [old[name]["outcome"] for name in MANIFESTS] == ["passed", "failed"]
    result.assert_outcomes(passed=1, failed=1)
    now = {
        row["manifest"]: row
        for row in json.loads((project.path / "now.json").read_text())["results"]
    }
    # Today's file states each check's status; the old one's is derived from its verdict.
    assert [now[name]["status"] for name in MANIFESTS] == ["passed", "failed"]
    for name in MANIFESTS:
        for key in ("outcome", "verdict", "samples", "top1", "top5", "agreement", "diagnosis"):
            assert now[name].get(key) == old[name].get(key), (name, key)
        assert now[name]["golden_digest"] == old[name]["golden_digest"]  # the same file judged
    assert {name: project.golden(name).read_bytes() for name in MANIFESTS} == before

    judged_now = merged_csv(project.path / "now.json", capsys)
    shutil.copy(OLD / "results.json", project.path / "old.json")
    judged_then = merged_csv(project.path / "old.json", capsys)
    for name in MANIFESTS:
        assert {k: judged_now[name][k] for k in JUDGED} == {k: judged_then[name][k] for k in JUDGED}


def test_an_old_results_file_merges_to_the_figures_and_verdicts_it_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(OLD / "results.json", tmp_path / "old.json")
    merged = merged_csv(tmp_path / "old.json", capsys)
    old = old_rows()
    assert set(merged) == set(old)
    for name, row in old.items():
        cell = merged[name]
        assert cell["verdict"] == row["verdict"]
        assert cell["status"] == ("pass" if row["outcome"] == "passed" else "fail")
        assert float(cell["top1"]) == row["top1"]
        assert float(cell["agreement"]) == row["agreement"]
        assert int(cell["samples"]) == row["samples"]
        assert cell["manifest_digest"] == row["manifest_digest"]


def test_an_old_results_file_gets_each_status_derived_from_its_verdict() -> None:
    written = json.loads((OLD / "results.json").read_text())["results"]
    assert not [row for row in written if "status" in row]  # written before the field
    loaded = load_results(OLD / "results.json").results
    assert [(row.outcome, row.verdict, row.status) for row in loaded] == [
        ("passed", "pass", "passed"),
        ("passed", "pass", "passed"),
        ("failed", "drift", "failed"),
    ]


def test_an_old_latency_golden_loads_with_the_baseline_it_records() -> None:
    (path,) = (OLD / "golden" / "latency" / "efficientnet_lite0_onnx").glob("*.json")
    stored = json.loads(path.read_text())
    loaded = latency_store.read_golden(path)
    assert loaded == stored
