"""allure-pytest: a drift is a failed test, not a broken one (the plugin's failures are assertion
failures), and items that differ only in their brackets have distinct historyIds (their parameters
are given to Allure), so Allure does not fold them into one test with retries (issue 30, 5)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from compat_helpers import LATENCY, needs
from helpers import PREPROCESS_BGR, Project

pytestmark = needs("allure_pytest", "allure-pytest")


def allure_results(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*-result.json"))]


def test_items_differing_in_brackets_have_distinct_history_ids(serial_project: Project) -> None:
    serial_project.make(
        {"tiny_onnx.yaml": serial_project.manifest("tiny_onnx", extra=LATENCY)},
        goldens=["tiny_onnx"],
    )
    result = serial_project.run("--alluredir", "allure", "--mlrepro-update")
    # A latency golden may stay unrecorded on a loaded machine (a skip): the outcome is not the
    # point, the identities are.
    assert result.ret == 0, result.stdout.str()
    tests = allure_results(serial_project.path / "allure")
    assert sorted(t["name"] for t in tests) == [
        "accuracy[cpu]",
        "latency[cpu-b1]",
        "latency[cpu-b2]",
    ]
    assert len({t["historyId"] for t in tests}) == 3
    # Allure shows a parameter's value as its repr ('2').
    latency = {
        t["name"]: {p["name"]: p["value"].strip("'") for p in t["parameters"]} for t in tests
    }
    assert latency["latency[cpu-b2]"] == {"device": "cpu", "batch": "2"}


def test_a_drift_is_failed_not_broken(serial_project: Project) -> None:
    # The recorded golden, and the manifest's decode changed to BGR: a drift.
    serial_project.make(
        {"tiny_onnx.yaml": serial_project.manifest("tiny_onnx", decode=PREPROCESS_BGR)},
        goldens=["tiny_onnx"],
    )
    result = serial_project.run("--alluredir", "allure", "--mlrepro-no-diagnose")
    result.assert_outcomes(failed=1)
    (test,) = allure_results(serial_project.path / "allure")
    assert test["status"] == "failed", test["status"]
    assert "drifted" in test["statusDetails"]["message"]
