"""pytest-timeout: its per-test timer (started in ``pytest_runtest_protocol``) never runs while a
framework is imported: the frameworks the selected items need are imported at collection's end,
so a timeout cannot leave torch half-imported for the rest of the session (issue 30, 3)."""

from __future__ import annotations

import json
import textwrap

import pytest
from compat_helpers import needs
from helpers import Project

pytestmark = [needs("pytest_timeout", "pytest-timeout"), needs("torch", "torch")]

# What is imported when pytest-timeout starts each item's timer (its protocol wrapper; this
# conftest's hook runs inside it).
RECORDING_CONFTEST = textwrap.dedent("""\
    import json
    import sys

    import pytest


    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(item):
        seen = {name: name in sys.modules for name in ("torch", "onnxruntime")}
        with open("imported.jsonl", "a") as fh:
            fh.write(json.dumps({"item": item.nodeid, **seen}) + "\\n")
    """)


@pytest.mark.parametrize("method", ["signal", "thread"])
def test_frameworks_are_imported_before_the_first_timer(
    serial_project: Project, method: str
) -> None:
    serial_project.make(goldens=["tiny_onnx"])  # tiny_onnx and tiny_torch
    (serial_project.path / "conftest.py").write_text(RECORDING_CONFTEST)
    # A fresh process (this one has torch loaded); a limit no item comes near.
    result = serial_project.run(
        "--timeout", "120", "--timeout-method", method, "--mlrepro-update", subprocess=True
    )
    result.assert_outcomes(passed=2)
    lines = (serial_project.path / "imported.jsonl").read_text().splitlines()
    assert all(json.loads(line)["torch"] and json.loads(line)["onnxruntime"] for line in lines)
