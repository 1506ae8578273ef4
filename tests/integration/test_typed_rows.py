"""Each check builds its typed ``results.Row``: every field it writes is one ``Row`` declares
(``Row.extra`` stays empty), the row survives xdist (JSON on the report, rebuilt on the
controller), JUnit XML shows a view of it, and the top-k columns are headed by the row's k."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET

import pytest
from helpers import Project

from pytest_mlrepro.latency import LatencyFacts
from pytest_mlrepro.results import Row, load_results, record, row_json

LATENCY = (
    "latency: {batch_sizes: [1], min_rounds: 5, min_time: 0.01, max_time: 1,"
    " warmup_rounds: 1, warmup_time: 0, attempts: 1, tolerance: {p50: 4.0}}\n"
    "determinism: {runs: 2}\n"
)


def test_an_undeclared_field_lands_in_extra() -> None:
    """What the test below relies on: a field ``Row`` does not declare is kept in ``extra``."""
    row = record(Row, {"nodeid": "a", "outcome": "passed", "not_a_field": 1})
    assert row.extra == {"not_a_field": 1}
    assert record(Row, row_json(row)) == row


def test_every_latency_fact_is_a_row_field() -> None:
    """The latency check (which cannot import ``results``) writes a typed record whose every
    field is one ``Row`` declares: the plugin makes the row of it by name."""
    rows = {f.name: f for f in dataclasses.fields(Row)}
    assert {f.name for f in dataclasses.fields(LatencyFacts)} <= set(rows)


@pytest.mark.about_xdist  # the row travels from the workers as JSON, rebuilt on the controller
def test_every_field_a_check_writes_is_declared(project: Project) -> None:
    """Accuracy, latency and determinism rows (passes and a skip), serial and under xdist:
    nothing in ``extra``, and the file's rows read back equal to what was written."""
    project.make(
        {"tiny_onnx.yaml": project.manifest("tiny_onnx", extra=LATENCY)}, goldens=["tiny_onnx"]
    )
    with open(project.path / "pytest.ini", "a") as fh:
        fh.write("mlrepro_latency_max_contention = 1\n")
    run = project.run("--mlrepro-json", "out.json", "--junitxml", "junit.xml")
    run.assert_outcomes(passed=2, skipped=1)  # the latency item has no golden yet
    document = load_results(project.path / "out.json")
    kinds = {row.kind for row in document.results}
    assert kinds == {"accuracy", "latency", "determinism"}
    for row in document.results:
        assert row.extra == {}, (row.nodeid, row.extra)
        assert record(Row, row_json(row)) == row
    latency = next(row for row in document.results if row.kind == "latency")
    assert latency.verdict == "no golden" and latency.batch == 1 and latency.hardware_slug
    suite = {
        p.get("name"): json.loads(p.get("value", "{}"))
        for p in ET.parse(project.path / "junit.xml").getroot().iter("property")
    }
    accuracy = next(row for row in document.results if row.kind == "accuracy")
    (view,) = [v for k, v in suite.items() if str(k).endswith("accuracy[cpu]")]
    assert view["verdict"] == accuracy.verdict and view["top1"] == accuracy.top1


def test_top_k_columns_are_headed_by_the_rows_k(project: Project) -> None:
    """With ``top_k: 3`` the row says its k, and the summary's column is ``top-3``."""
    text = project.manifest("tiny_onnx", extra="postprocess: {softmax: true, top_k: 3}\n")
    project.make({"tiny_onnx.yaml": text})
    project.run("--mlrepro-update").assert_outcomes(passed=1)
    run = project.run("--mlrepro-json", "out.json")
    run.assert_outcomes(passed=1)
    (row,) = load_results(project.path / "out.json").results
    assert row.top_k == 3
    header = next(line for line in run.outlines if "top-1" in line)
    assert "top-3" in header and "top-5" not in header, header
    five = dataclasses.replace(row, top_k=None, per_sample=None)
    assert five.k == 5 and row.k == 3
