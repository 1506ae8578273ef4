"""The per-phase account of each item's call (issue 34): kept in the results file
(``timing.phases`` beside ``timing.call``, the session's ``one_time``), shown under ``-v`` and on
the HTML page. The phases partition the call: they add up to the duration pytest measured.
Structural checks on recorded numbers, never a timing threshold."""

from __future__ import annotations

import html
import json
import re

import pytest
from helpers import Project, drifted_project

from pytest_mlrepro.results import load_results, row_json

pytest.importorskip("onnxruntime")
pytest.importorskip("jinja2")

WORK = ("data verify", "model verify", "model load", "preprocessing", "model", "comparison")
"""The phases every evaluated accuracy item goes through."""


def test_each_item_accounts_for_its_call_by_phase(serial_project: Project) -> None:
    project = drifted_project(serial_project)
    results = project.path / "results.json"
    # A fresh process: the frameworks are imported at collection's end, the one-time cost.
    run = project.run(
        "-v", f"--mlrepro-json={results}", "--mlrepro-html=page.html", subprocess=True
    )
    run.assert_outcomes(passed=1, failed=1)

    loaded = load_results(results)  # the file's own validation accepts the accounts
    rows = {str(row.manifest): row_json(row) for row in loaded.results}
    assert set(rows) == {"tiny_onnx", "tiny_loose"}
    for name, row in rows.items():
        timing = row["timing"]
        phases, call = timing["phases"], timing["call"]
        assert set(WORK) <= set(phases), (name, phases)
        for times in phases.values():
            assert times["wall"] >= 0 and times["cpu"] >= 0
        wall = sum(t["wall"] for t in phases.values())
        # The phases partition the call: pytest's timer and the clock start and stop a few
        # hooks apart (microseconds idle; on a loaded machine a preemption between them can
        # take tens of milliseconds), and each phase is rounded to 0.1 ms.
        assert abs(wall - call) <= 0.03 * call + 0.05, (name, wall, call, phases)
        # The model's run over the data set lies inside the call's preprocessing and model.
        assert phases["model"]["wall"] <= timing["seconds"] + 0.005
    # Only the drifted item was diagnosed.
    assert "diagnosis" in rows["tiny_onnx"]["timing"]["phases"]
    assert "diagnosis" not in rows["tiny_loose"]["timing"]["phases"]
    # The session's one-time cost, not charged to the first item: the framework's import.
    document = json.loads(results.read_text())
    assert set(document["one_time"]) == {"framework import"}

    # The -v section: a row per item, the phases as columns.
    lines = run.stdout.lines
    start = next(i for i, line in enumerate(lines) if "mlrepro phases" in line)
    section = lines[start : start + 6]
    header = section[2]
    for column in ("call s", "phases s", *WORK, "diagnosis"):
        assert column in header, header
    for name in ("tiny_onnx.yaml::accuracy[cpu]", "tiny_loose.yaml::accuracy[cpu]"):
        printed = next(line for line in section if line.startswith(name))
        call = float(printed.split()[1])
        assert call == pytest.approx(rows[name.split(".")[0]]["timing"]["call"], abs=0.006)
    assert any(line.startswith("once for the session") for line in section)

    # The page: the same table.
    page = html.unescape((project.path / "page.html").read_text())
    section_html = re.search(r'<section id="phases">(.*?)</section>', page, re.S)
    assert section_html is not None
    for text in ("tiny_onnx.yaml::accuracy[cpu]", "tiny_loose.yaml::accuracy[cpu]", "diagnosis"):
        assert text in section_html.group(1)


def test_phases_are_shown_only_under_verbose(serial_project: Project) -> None:
    project = serial_project.make(
        {"tiny_onnx.yaml": serial_project.manifest("tiny_onnx")}, goldens=["tiny_onnx"]
    )
    quiet = project.run("-q")
    quiet.assert_outcomes(passed=1)
    assert not any("mlrepro phases" in line for line in quiet.stdout.lines)
    verbose = project.run("-v")
    assert any("mlrepro phases" in line for line in verbose.stdout.lines)
