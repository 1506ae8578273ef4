"""JUnit XML (pytest's ``--junitxml``) for manifest items: valid for the ``junit_family`` in force,
property values as JSON, test cases that name their manifest, and suite properties kept small."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from .._names import matches_patterns

PREFIX = "mlrepro."
SUITE_PROPERTY = "mlrepro:"  # an item's test suite property under xunit2: mlrepro:<node id>
PLUGIN_NAME = "mlrepro-junit"
SUITE_FIELDS = frozenset(
    {
        "kind", "manifest", "device", "shard", "framework", "framework_version",
        "hardware_key", "hardware_slug", "status", "verdict", "samples", "top1", "top5",
        "golden_top1", "golden_top5", "agreement", "max_score_diff",
        "outside_tolerance", "diagnosis", "reference_verdict",
    }
)  # fmt: skip
"""An item's properties in its test-suite property (xunit2): the verdict and its figures. The rest
(kilobytes an item) is the results file's: a viewer then shows a line an item, not 29 KB."""


def register(config: pytest.Config) -> None:  # whether a JUnit file is written: --junitxml
    config.pluginmanager.register(JunitGlue(config), PLUGIN_NAME)


def as_json(value: Any) -> str:  # a value JSON cannot hold as its text
    return json.dumps(value, sort_keys=True, default=str)


def junit_view(row: dict[str, Any]) -> list[tuple[str, object]]:
    """A row's JSON as ``mlrepro.*`` user properties (the per-sample results stay out)."""
    return [(PREFIX + k, v) for k, v in row.items() if k not in ("nodeid", "outcome", "per_sample")]


def test_case_key(nodeid: str) -> tuple[str, str]:
    """(classname, name) of the test case pytest writes for a manifest item's node id
    (``manifests/a.yaml::accuracy[cpu]``: ``manifests.a.yaml``, ``accuracy[cpu]``)."""
    path, _, rest = nodeid.partition("::")
    parts = [path.replace("/", "."), *rest.split("::")]
    return ".".join(parts[:-1]), parts[-1]


class JunitGlue:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.names: dict[tuple[str, str], str] = {}  # test case (classname, name) → its name
        self.suite: dict[str, str] = {}  # node id → test-suite property (xunit2), report order

    @property
    def _path(self) -> str | None:
        xmlpath = getattr(self.config.option, "xmlpath", None)
        # xdist workers write no file: their controller does.
        return None if not xmlpath or hasattr(self.config, "workerinput") else str(xmlpath)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        root = self.config.rootpath
        if self._path is None or not matches_patterns(
            root / report.nodeid.split("::", 1)[0], root, self.config.getini("mlrepro_manifests")
        ):
            return (yield)
        domain = report.location[2]
        if "::" in domain:
            self.names[test_case_key(report.nodeid)] = domain
        if report.when != "teardown":
            return (yield)
        # The teardown report is the one whose user properties pytest's reporter writes.
        original = report.user_properties
        ours = [(k, v) for k, v in original if isinstance(k, str) and k.startswith(PREFIX)]
        others = [(k, v) for k, v in original if not (isinstance(k, str) and k.startswith(PREFIX))]
        if str(self.config.getini("junit_family") or "xunit2") in ("xunit1", "legacy"):
            report.user_properties = [*others, *((k, as_json(v)) for k, v in ours)]
        else:
            report.user_properties = others
            values = {k[len(PREFIX) :]: v for k, v in ours if k[len(PREFIX) :] in SUITE_FIELDS}
            if values:
                self.suite[report.nodeid] = as_json(values)
        try:
            return (yield)
        finally:
            report.user_properties = original

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """The file pytest's reporter wrote (its own ``pytest_sessionfinish``), completed."""
        path = self._path
        if path is None or not (self.names or self.suite) or not os.path.isfile(path):
            return
        try:
            tree = ET.parse(path)
        except (ET.ParseError, OSError):
            return  # not the file pytest writes: left as it is
        for suite in tree.getroot().iter("testsuite"):
            self._complete(suite)
        scratch = Path(path).with_name(f".{Path(path).name}.mlrepro-tmp")
        tree.write(scratch, encoding="utf-8", xml_declaration=True)
        os.replace(scratch, path)

    def _complete(self, suite: ET.Element) -> None:
        """Test cases named by their manifest, one per item (the last attempt's); the items'
        properties in the suite's ``<properties>`` (xunit2)."""
        last: dict[tuple[str, str], ET.Element] = {}
        for case in list(suite.iter("testcase")):
            key = (case.get("classname", ""), case.get("name", ""))
            if key not in self.names:
                continue
            if key in last:  # pytest-rerunfailures: an earlier attempt's test case
                suite.remove(last[key])
            last[key] = case
            case.set("name", self.names[key])
        if not self.suite:
            return
        properties = suite.find("properties")
        if properties is None:
            properties = ET.Element("properties")
            suite.insert(0, properties)
        for nodeid, value in self.suite.items():
            ET.SubElement(properties, "property", name=SUITE_PROPERTY + nodeid, value=value)
