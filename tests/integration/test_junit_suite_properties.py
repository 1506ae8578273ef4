"""JUnit XML's test-suite properties under pytest's default family (xunit2): an item's verdict and
figures, small (issue 44, 4)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from helpers import PREPROCESS_BGR, Project


def test_the_suite_properties_stay_small(serial_project: Project) -> None:
    """A drifting item's diagnosis, its manifest's content, its timings are the results file's:
    the test-suite property of an item holds its verdict and figures only, under a kilobyte
    (issue 44, 4: a viewer printed 29 KB of them before the first test)."""
    p = serial_project
    p.make(
        {
            "tiny_onnx.yaml": p.manifest("tiny_onnx"),
            "tiny_loose.yaml": p.manifest("tiny_loose", decode=PREPROCESS_BGR),
        },
        goldens=["tiny_onnx", "tiny_loose"],
    )
    result = serial_project.run("--junitxml", "junit.xml", "--mlrepro-json", "results.json")
    result.assert_outcomes(passed=1, failed=1)
    root = ET.parse(serial_project.path / "junit.xml").getroot()
    suite = {p.get("name"): p.get("value", "") for p in root.iter("property")}
    ours = {k: v for k, v in suite.items() if str(k).startswith("mlrepro:")}
    assert len(ours) == 2
    sizes = {k: {f: len(json.dumps(x)) for f, x in json.loads(v).items()} for k, v in ours.items()}
    assert all(len(v) < 1024 for v in ours.values()), sizes
    drifted = json.loads(ours["mlrepro:manifests/tiny_loose.yaml::accuracy[cpu]"])
    assert drifted["verdict"] == "drift" and drifted["diagnosis"]  # the cause, in a word
    # What the suite property leaves out is in the results file.
    rows = json.loads((serial_project.path / "results.json").read_text())["results"]
    assert any("diagnosis_summary" in row for row in rows)
