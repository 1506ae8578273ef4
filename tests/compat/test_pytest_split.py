"""pytest-split: durations stored for manifest items, and the groups it makes from them split the
items between them, each item in one group (issue 30: it works; the import of a framework is not
in any item's duration since the frameworks load at collection's end:
tests/integration/test_framework_preload.py)."""

from __future__ import annotations

import json

from compat_helpers import needs, two_manifests
from helpers import Project

pytestmark = needs("pytest_split", "pytest-split")


def selected(project: Project, group: int) -> set[str]:
    # Every group's run must order the items alike: pytest-randomly, where installed, would
    # shuffle each run its own way (pytest-split's advice: a fixed seed, or randomly off).
    result = project.run(
        "--splits", "2", "--group", str(group), "--collect-only", "-q", "-p", "no:randomly"
    )
    return {line for line in result.stdout.lines if "::" in line}


def test_durations_and_groups_cover_the_manifest_items(serial_project: Project) -> None:
    two_manifests(serial_project)
    stored = serial_project.run("--store-durations", "--mlrepro-no-diagnose")
    stored.assert_outcomes(passed=1, failed=1)
    durations = json.loads((serial_project.path / ".test_durations").read_text())
    items = {
        "manifests/tiny_onnx.yaml::accuracy[cpu]",
        "manifests/tiny_loose.yaml::accuracy[cpu]",
    }
    assert items <= set(durations)
    first, second = selected(serial_project, 1), selected(serial_project, 2)
    assert first | second == items and not first & second
