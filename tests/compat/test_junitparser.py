"""junitparser (what CI dashboards and scripts read JUnit files with): each test case is named so
that manifests can be told apart, and the items' properties are readable as JSON, per test case
under xunit1 and from the test suite under xunit2 (issue 30, 5)."""

from __future__ import annotations

import json

from compat_helpers import needs, two_manifests
from helpers import Project

pytestmark = needs("junitparser", "junitparser")


def cases_of(project: Project) -> dict[str, object]:
    # junitparser's pytest flavour (its xunit2 module) is the one whose test cases read
    # properties; its reader takes xunit1 files too.
    from junitparser.xunit2 import JUnitXml

    xml = JUnitXml.fromfile(str(project.path / "junit.xml"))
    return {case.name: case for suite in xml for case in suite}


def test_xunit1_test_cases_carry_json_properties(serial_project: Project) -> None:
    two_manifests(serial_project)
    serial_project.run(
        "--junitxml", "junit.xml", "-o", "junit_family=xunit1", "--mlrepro-no-diagnose"
    ).assert_outcomes(passed=1, failed=1)
    cases = cases_of(serial_project)
    # Names a viewer that shows only the name can tell apart.
    assert sorted(cases) == ["tiny_loose::accuracy[cpu]", "tiny_onnx::accuracy[cpu]"]
    case = cases["tiny_onnx::accuracy[cpu]"]
    values = {p.name: json.loads(p.value) for p in case.properties()}  # type: ignore[attr-defined]
    assert values["mlrepro.verdict"] == "pass" and values["mlrepro.top1"] == 100.0
    assert values["mlrepro.hardware_key"]["device"] == "cpu"  # a dict as JSON, not a repr


def test_xunit2_suite_properties_name_each_item(serial_project: Project) -> None:
    from junitparser import JUnitXml

    two_manifests(serial_project)
    serial_project.run("--junitxml", "junit.xml", "--mlrepro-no-diagnose")
    (suite,) = list(JUnitXml.fromfile(str(serial_project.path / "junit.xml")))
    props = {p.name: json.loads(p.value) for p in suite.properties()}
    assert props["mlrepro:manifests/tiny_onnx.yaml::accuracy[cpu]"]["verdict"] == "pass"
    assert sorted(case.name for case in suite) == [
        "tiny_loose::accuracy[cpu]",
        "tiny_onnx::accuracy[cpu]",
    ]
