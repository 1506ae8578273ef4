"""JUnit XML under pytest's default family, xunit2: the file is valid against the xunit2 schema
(no per-test ``<properties>``; each item's properties one test-suite property, JSON), with a
passing item, a drifting one, and an item run twice by pytest-rerunfailures where it is installed
(issue 30, 5)."""

from __future__ import annotations

import importlib.util
import json
import xml.etree.ElementTree as ET

import pytest
from compat_helpers import XUNIT2_SCHEMA, needs, pytest_junit_schema, two_manifests
from helpers import Project

pytestmark = needs("xmlschema", "xmlschema")


@pytest.fixture
def schema() -> object:
    import xmlschema

    return xmlschema.XMLSchema(str(XUNIT2_SCHEMA))


def test_the_default_family_file_is_valid_and_carries_the_metrics(
    serial_project: Project, schema: object
) -> None:
    two_manifests(serial_project)
    result = serial_project.run("--junitxml", "junit.xml", "--mlrepro-no-diagnose")
    result.assert_outcomes(passed=1, failed=1)
    schema.validate(str(serial_project.path / "junit.xml"))  # type: ignore[attr-defined]
    root = ET.parse(serial_project.path / "junit.xml").getroot()
    suite = {p.get("name"): p.get("value", "") for p in root.iter("property")}
    drifted = json.loads(suite["mlrepro:manifests/tiny_loose.yaml::accuracy[cpu]"])
    passed = json.loads(suite["mlrepro:manifests/tiny_onnx.yaml::accuracy[cpu]"])
    assert passed["verdict"] == "pass" and drifted["verdict"] != "pass"
    assert isinstance(passed["top1"], float) and passed["hardware_key"]["device"] == "cpu"


@pytest.fixture(scope="session")
def pytest_schema(tmp_path_factory: pytest.TempPathFactory) -> object:
    import xmlschema

    return xmlschema.XMLSchema(str(pytest_junit_schema(tmp_path_factory.mktemp("pytest-sdist"))))


def test_the_file_is_valid_against_pytests_own_junit_schema(
    serial_project: Project, pytest_schema: object
) -> None:
    """pytest's own junit-10.xsd (from its source distribution; pytest validates its xunit2
    files against it), with a passing and a drifting item: what the plugin adds keeps the file
    pytest's."""
    two_manifests(serial_project)
    result = serial_project.run("--junitxml", "junit.xml", "--mlrepro-no-diagnose")
    result.assert_outcomes(passed=1, failed=1)
    pytest_schema.validate(str(serial_project.path / "junit.xml"))  # type: ignore[attr-defined]
    root = ET.parse(serial_project.path / "junit.xml").getroot()
    assert any((p.get("name") or "").startswith("mlrepro") for p in root.iter("property"))


@pytest.mark.skipif(
    importlib.util.find_spec("pytest_rerunfailures") is None,
    reason="pytest-rerunfailures is not installed",
)
def test_a_file_with_reruns_is_valid(serial_project: Project, schema: object) -> None:
    two_manifests(serial_project)
    result = serial_project.run("--junitxml", "junit.xml", "--mlrepro-no-diagnose", "--reruns", "1")
    assert result.parseoutcomes().get("rerun") == 1, result.stdout.str()
    schema.validate(str(serial_project.path / "junit.xml"))  # type: ignore[attr-defined]


def test_the_schema_refuses_per_test_properties(serial_project: Project, schema: object) -> None:
    """The schema is not vacuous: the xunit1 file of the same run (per-test properties, file and
    line attributes), which is what an xunit2 file held before, fails it."""
    import xmlschema

    two_manifests(serial_project)
    result = serial_project.run(
        "--junitxml", "junit1.xml", "-o", "junit_family=xunit1", "--mlrepro-no-diagnose"
    )
    result.assert_outcomes(passed=1, failed=1)
    root = ET.parse(serial_project.path / "junit1.xml").getroot()
    assert all(case.find("properties") is not None for case in root.iter("testcase"))
    with pytest.raises(xmlschema.XMLSchemaValidationError, match=r"properties|file|line"):
        schema.validate(str(serial_project.path / "junit1.xml"))  # type: ignore[attr-defined]
