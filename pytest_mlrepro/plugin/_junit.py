"""JUnit XML (pytest's ``--junitxml``) for manifest items: valid for the ``junit_family`` in force,
property values as JSON, and test cases that name their manifest.

pytest writes a test's user properties as ``<properties>`` inside its ``<testcase>``, each value
``str()``-ed (a Python repr: ``{'top1': 0.5}``, ``None``), and names the test case by the last part
of its node id. For manifest items that made files that are

* invalid under the default family, ``xunit2``, whose schema has no per-test ``<properties>``:
  there the items' ``mlrepro.*`` properties go to the test suite's ``<properties>`` instead (which
  the schema allows), one property per item, named ``mlrepro:<node id>``, its value a JSON object
  of the item's verdict and figures (:data:`SUITE_FIELDS`, without the ``mlrepro.`` prefix);
* unreadable as data: under ``xunit1``/``legacy`` each ``mlrepro.*`` property stays in its test
  case, its value JSON;
* ambiguous where a viewer shows only a test case's name (``accuracy[cpu]`` of four manifests):
  the name is the item's report domain, ``<manifest name>::<item name>``.

Only the reports of manifests are touched, and only while pytest's JUnit reporter reads them: the
plugin's own rows read the same report unchanged. Loaded by the entry point (it imports nothing
of the engine); it does nothing in a run that writes no JUnit file.
"""

from __future__ import annotations

import json
from collections.abc import Generator
from typing import Any

import pytest
from _pytest.junitxml import LogXML, xml_key

from .._names import matches_patterns

PREFIX = "mlrepro."
SUITE_PROPERTY = "mlrepro:"
"""The test suite property of one item under xunit2: ``mlrepro:<node id>``."""
PLUGIN_NAME = "mlrepro-junit"
SUITE_FIELDS = frozenset(
    {
        "kind", "manifest", "device", "shard", "framework", "framework_version",
        "hardware_key", "hardware_slug", "status", "verdict", "samples", "top1", "top5",
        "golden_top1", "golden_top5", "agreement", "max_score_diff",
        "outside_tolerance", "diagnosis", "reference_verdict",
    }
)  # fmt: skip
"""An item's properties in its test-suite property (xunit2): the verdict and its figures. The
rest (the manifest's normalised content, the changed samples, the diagnosis's evidence, timings:
kilobytes an item)
is the results file's (``--mlrepro-json``); a viewer that prints the suite's properties first
(xunit-viewer) then shows a line an item, not 29 KB before the first test."""


def register(config: pytest.Config) -> None:
    """Register the JUnit glue (pytest's reporter is configured after the entry point: whether
    this run writes a JUnit file is asked per report)."""
    config.pluginmanager.register(JunitGlue(config), PLUGIN_NAME)


def as_json(value: Any) -> str:
    """A property value as JSON (a value JSON cannot hold, as its text)."""
    return json.dumps(value, sort_keys=True, default=str)


class JunitGlue:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._retried: set[str] = set()
        """Items whose current attempt pytest-rerunfailures runs again (outcome ``rerun``)."""

    def _of_a_manifest(self, report: pytest.TestReport) -> bool:
        file = report.nodeid.split("::", 1)[0]
        patterns = self.config.getini("mlrepro_manifests")
        root = self.config.rootpath
        return matches_patterns(root / file, root, patterns)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, None, None]:
        xml: LogXML | None = self.config.stash.get(xml_key, None)
        if xml is None or not self._of_a_manifest(report):
            return (yield)
        # Set before pytest's reporter opens the test case: it keeps attributes already set.
        domain = report.location[2]
        if report.when != "teardown" and "::" in domain:
            xml.node_reporter(report).add_attribute("name", domain)
        if str(report.outcome) == "rerun":  # pytest-rerunfailures: this attempt is retried
            self._retried.add(report.nodeid)
        if report.when != "teardown":
            return (yield)
        if report.nodeid in self._retried:
            self._retried.discard(report.nodeid)
            # The test case pytest's reporter has open for this item, by its own look-up (its
            # keys changed with pytest 9.2: structured node ids, not text).
            case = xml.node_reporter(report)
            try:
                return (yield)
            finally:
                _drop_case(xml, case)
        # The teardown report is the one whose user properties pytest's reporter writes.
        original = report.user_properties
        ours = [(k, v) for k, v in original if isinstance(k, str) and k.startswith(PREFIX)]
        others = [(k, v) for k, v in original if not (isinstance(k, str) and k.startswith(PREFIX))]
        if xml.family == "xunit1":
            report.user_properties = [*others, *((k, as_json(v)) for k, v in ours)]
        else:
            report.user_properties = others
            if ours:
                values = {k[len(PREFIX) :]: v for k, v in ours if k[len(PREFIX) :] in SUITE_FIELDS}
                xml.add_global_property(SUITE_PROPERTY + report.nodeid, as_json(values))
        try:
            return (yield)
        finally:
            report.user_properties = original


def _drop_case(xml: LogXML, case: object) -> None:
    """The test case of an attempt that was run again leaves the file: one test case per item,
    the last attempt's (pytest's reporter writes the retried attempt as a test case without
    its failure, and counted nothing for it). Its list of test cases is internal: left alone if
    it changes."""
    cases = getattr(xml, "node_reporters_ordered", None)
    if isinstance(cases, list) and case in cases:  # reporters compare by identity
        cases.remove(case)


__all__ = ["SUITE_PROPERTY", "as_json", "register"]
