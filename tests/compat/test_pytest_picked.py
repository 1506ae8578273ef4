"""pytest-picked runs the Python test files git says changed: a change of only a manifest, a model
or a golden ran no test at all. The manifests of the run's paths are put back and selected by
what they depend on (``--mlrepro-changed`` with picked's ref), and the header says so once
(issue 44, 1). On a real git history made here."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from compat_helpers import needs
from helpers import CHILD_TIMEOUT_S, Project

pytestmark = [
    needs("pytest_picked", "pytest-picked"),
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]
HEADER = "mlrepro: pytest-picked picks Python test files only: the manifests whose*since {}*"


def git(project: Project, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=project.path,
        capture_output=True,
        timeout=CHILD_TIMEOUT_S,
        check=True,
    )


@pytest.fixture
def committed(serial_project: Project) -> Project:
    """A passing manifest with a model file of its own, a passing one beside it, a plain test;
    committed on branch main."""
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
    (p.path / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    git(p, "init", "-q", "-b", "main")
    git(p, "add", "-A")
    git(p, "commit", "-q", "-m", "passing")
    return p


def break_the_model(project: Project) -> None:
    """Only the model file changes (other bytes: the pin no longer holds)."""
    shutil.copy(project.path / "models" / "tiny.pt", project.path / "models" / "tiny_a.onnx")


def test_a_changed_model_file_fails_the_picked_run(committed: Project) -> None:
    nothing = committed.run("--picked", "--mlrepro-no-diagnose", "-p", "no:randomly")
    nothing.assert_outcomes(deselected=2)  # nothing changed: no manifest runs
    break_the_model(committed)
    result = committed.run("--picked", "--mlrepro-no-diagnose", "-p", "no:randomly")
    result.stdout.fnmatch_lines([HEADER.format("HEAD")])
    result.assert_outcomes(failed=1, deselected=1)
    assert "FAILED manifests/tiny_onnx.yaml::accuracy[cpu]" in result.stdout.str()


def test_its_branch_mode_compares_with_the_parent_branch(committed: Project) -> None:
    git(committed, "checkout", "-q", "-b", "feature")
    break_the_model(committed)
    (committed.path / "test_plain.py").write_text("def test_plain():\n    assert 1\n")
    git(committed, "commit", "-q", "-am", "the model and a test")
    result = committed.run(
        "--picked", "--mode=branch", "--parent-branch=main", "--mlrepro-no-diagnose",
        "-p", "no:randomly", "-W", "ignore::UserWarning",
    )  # fmt: skip
    result.stdout.fnmatch_lines([HEADER.format("main")])
    # picked's own choice (the changed test file) and the manifest whose model changed.
    result.assert_outcomes(passed=1, failed=1, deselected=1)
