"""JUnit XML under pytest's default family, xunit2: the file is valid against the xunit2 schema
(no per-test ``<properties>``; each item's properties one test-suite property, JSON), with a
passing item, a drifting one, and an item run twice by pytest-rerunfailures where it is installed
(issue 30, 5)."""

from __future__ import annotations

import importlib.util
import json
import xml.etree.ElementTree as ET

import pytest
from compat_helpers import junit_schema, needs, two_manifests
from helpers import Project

pytestmark = needs("xmlschema", "xmlschema")


@pytest.fixture
def schema() -> object:
    import xmlschema

    path = junit_schema()
    if path is None:
        pytest.skip(
            "pytest's junit-10.xsd is not there (set MLREPRO_JUNIT_XSD; .ci/run fetches it)"
        )
    return xmlschema.XMLSchema(str(path))


def test_the_default_family_file_is_valid_and_carries_the_metrics(
    serial_project: Project, schema: object
) -> None:
    two_manifests(serial_project)
    result = serial_project.run("--junitxml", "junit.xml", "--mlrepro-no-diagnose")
    result.assert_outcomes(passed=1, failed=1)
    schema.validate(str(serial_project.path / "junit.xml"))  # type: ignore[attr-defined]
    root = ET.parse(serial_project.path / "junit.xml").getroot()
    suite = {p.get("name"): p.get("value") for p in root.iter("property")}
    drifted = json.loads(suite["mlrepro:manifests/tiny_loose.yaml::accuracy[cpu]"])
    passed = json.loads(suite["mlrepro:manifests/tiny_onnx.yaml::accuracy[cpu]"])
    assert passed["verdict"] == "pass" and drifted["verdict"] != "pass"
    assert isinstance(passed["top1"], float) and passed["hardware_key"]["device"] == "cpu"


@pytest.mark.skipif(
    importlib.util.find_spec("pytest_rerunfailures") is None,
    reason="pytest-rerunfailures is not installed",
)
def test_a_file_with_reruns_is_valid(serial_project: Project, schema: object) -> None:
    two_manifests(serial_project)
    result = serial_project.run("--junitxml", "junit.xml", "--mlrepro-no-diagnose", "--reruns", "1")
    assert result.parseoutcomes().get("rerun") == 1, result.stdout.str()
    schema.validate(str(serial_project.path / "junit.xml"))  # type: ignore[attr-defined]
