"""The frameworks the selected items need are imported at collection's end, before the first
item's setup (so before any per-item time limit starts, ours or pytest-timeout's, and charged to
no item's duration), and only those (issue 30, 3). In a subprocess: this test process has every
framework loaded already."""

from __future__ import annotations

import json
import textwrap

import pytest
from helpers import Project

pytest.importorskip("torch")

# What is imported when each item's protocol starts (pytest-timeout starts its timer there).
RECORDING_CONFTEST = textwrap.dedent("""\
    import json
    import sys

    import pytest


    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(item):
        seen = {name: name in sys.modules for name in ("torch", "onnxruntime", "tensorflow")}
        with open("imported.jsonl", "a") as fh:
            fh.write(json.dumps({"item": item.nodeid, **seen}) + "\\n")
    """)


def imported(project: Project) -> list[dict[str, object]]:
    lines = (project.path / "imported.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_frameworks_of_selected_items_are_imported_before_the_first_item(
    serial_project: Project,
) -> None:
    serial_project.make(goldens=["tiny_onnx"])  # tiny_onnx and tiny_torch
    (serial_project.path / "conftest.py").write_text(RECORDING_CONFTEST)
    result = serial_project.run("--mlrepro-update", subprocess=True)
    result.assert_outcomes(passed=2)
    first = imported(serial_project)[0]
    assert first["torch"] is True and first["onnxruntime"] is True, first
    assert first["tensorflow"] is False, "no selected manifest needs TensorFlow"


def test_deselected_items_frameworks_are_not_imported(serial_project: Project) -> None:
    serial_project.make(goldens=["tiny_onnx"])
    (serial_project.path / "conftest.py").write_text(RECORDING_CONFTEST)
    result = serial_project.run("-k", "tiny_onnx", subprocess=True)
    result.assert_outcomes(passed=1, deselected=1)
    assert [r["torch"] for r in imported(serial_project)] == [False]
    assert [r["onnxruntime"] for r in imported(serial_project)] == [True]
