"""pytest-testmon selects tests by the Python code they ran: a manifest whose model file changed
looked unchanged to it ("changed files: 0"), and its item was deselected, a stale pass. Under its
selection manifest items always run, and the header says so once (issue 44, 1)."""

from __future__ import annotations

import shutil

import pytest
from compat_helpers import needs
from helpers import Project

pytestmark = needs("testmon", "pytest-testmon")
# testmon reads the last-failed cache: the cache provider the tiny project's runs leave out, on.
TESTMON = ["-p", "cacheprovider", "--testmon"]
HEADER = "mlrepro: pytest-testmon follows Python code only: manifest items always run*"


@pytest.fixture
def passing(serial_project: Project) -> Project:
    """A passing manifest with a model file of its own, a passing one beside it, a plain test."""
    p = serial_project
    p.make(
        {
            "tiny_onnx.yaml": p.manifest("tiny_onnx", model_path="../models/tiny_a.onnx"),
            "tiny_loose.yaml": p.manifest("tiny_loose"),
        },
        goldens=["tiny_onnx", "tiny_loose"],
    )
    shutil.copy(p.path / "models" / "tiny.onnx", p.path / "models" / "tiny_a.onnx")
    (p.path / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    return p


def test_a_changed_model_file_fails_the_next_selected_run(passing: Project) -> None:
    first = passing.run(*TESTMON, "--mlrepro-no-diagnose", subprocess=True)
    first.assert_outcomes(passed=3)
    # Only the model file changes (other bytes: the pin no longer holds).
    shutil.copy(passing.path / "models" / "tiny.pt", passing.path / "models" / "tiny_a.onnx")
    second = passing.run(*TESTMON, "--mlrepro-no-diagnose", subprocess=True)
    second.stdout.fnmatch_lines([HEADER])
    # testmon leaves out the unchanged Python test; both manifests run, the changed one fails.
    second.assert_outcomes(passed=1, failed=1)
    assert "test_plain" not in second.stdout.str()
    assert "FAILED manifests/tiny_onnx.yaml::accuracy[cpu]" in second.stdout.str()


def test_without_its_selection_nothing_is_said(passing: Project) -> None:
    result = passing.run(
        "-p", "cacheprovider", "--testmon-noselect", "--mlrepro-no-diagnose", subprocess=True
    )
    result.assert_outcomes(passed=3)
    assert "pytest-testmon follows" not in result.stdout.str()
