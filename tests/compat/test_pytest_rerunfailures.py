"""pytest-rerunfailures: an item that fails and passes when run again is one row in the results
file, the summary table and the merge, with its final outcome and its number of attempts; its
properties are its last attempt's, not both attempts' (issue 30, 2)."""

from __future__ import annotations

import json
import textwrap
import xml.etree.ElementTree as ET

import pytest
from compat_helpers import needs
from helpers import Project

from pytest_mlrepro.cli import main

pytestmark = needs("pytest_rerunfailures", "pytest-rerunfailures")

# The first attempt of every manifest item fails after the item ran (its properties recorded):
# a flaky machine, as a nightly job meets one.
FLAKY_ONCE = textwrap.dedent("""\
    from pathlib import Path

    import pytest


    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(item):
        result = yield
        marker = Path(f"attempted-{item.name}")
        if item.path.suffix == ".yaml" and not marker.exists():
            marker.touch()
            raise AssertionError("flaky once")
        return result
    """)


@pytest.fixture
def flaky(serial_project: Project) -> Project:
    serial_project.make(
        {"tiny_onnx.yaml": serial_project.manifest("tiny_onnx")}, goldens=["tiny_onnx"]
    )
    (serial_project.path / "conftest.py").write_text(FLAKY_ONCE)
    return serial_project


def test_a_rerun_item_is_one_row_with_its_runs(
    flaky: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    result = flaky.run(
        "--reruns",
        "1",
        "--mlrepro-json",
        "results.json",
        "--junitxml",
        "junit.xml",
        "-o",
        "junit_family=xunit1",
    )
    outcomes = result.parseoutcomes()
    assert (outcomes.get("passed"), outcomes.get("rerun")) == (1, 1), result.stdout.str()
    rows = json.loads((flaky.path / "results.json").read_text())["results"]
    assert [(r["outcome"], r.get("runs")) for r in rows] == [("passed", 2)]
    # The summary table: one row, saying it took two attempts.
    table = [line for line in result.stdout.lines if line.startswith("tiny_onnx ")]
    assert len(table) == 1 and "pass (2 runs)" in table[0], result.stdout.str()
    # One test case, the last attempt's, with its properties alone.
    (case,) = ET.parse(flaky.path / "junit.xml").getroot().findall(".//testcase")
    assert case.find("failure") is None and case.get("name") == "tiny_onnx::accuracy[cpu]"
    names = [p.get("name") for p in case.iter("property")]
    assert names.count("mlrepro.verdict") == 1, names
    # The merge reads the file (a rerun row would be refused: 'rerun' is no outcome).
    capsys.readouterr()
    assert main(["merge", str(flaky.path / "results.json")]) == 0
    assert "tiny_onnx" in capsys.readouterr().out


def test_an_item_that_fails_every_attempt_is_one_failed_row(
    flaky: Project,
) -> None:
    """Its golden made unreadable: both attempts fail; one row, failed, two attempts."""
    flaky.golden("tiny_onnx").write_text("{not json")
    result = flaky.run("--reruns", "1", "--mlrepro-json", "results.json", "--junitxml", "junit.xml")
    outcomes = result.parseoutcomes()
    assert (outcomes.get("failed"), outcomes.get("rerun")) == (1, 1), result.stdout.str()
    rows = json.loads((flaky.path / "results.json").read_text())["results"]
    assert [(r["outcome"], r.get("runs")) for r in rows] == [("failed", 2)]
    (case,) = ET.parse(flaky.path / "junit.xml").getroot().findall(".//testcase")
    assert case.find("failure") is not None
