"""pytest-repeat: ``--count N`` parametrizes test functions (``pytest_generate_tests``), which
manifest items are not; the run says so once, and what to use instead, and the manifest items run
once beside the repeated functions (issue 30, 2)."""

from __future__ import annotations

from compat_helpers import needs
from helpers import Project

pytestmark = needs("pytest_repeat", "pytest-repeat")


def test_count_says_once_what_to_use_for_manifest_items(serial_project: Project) -> None:
    serial_project.make(
        {"tiny_onnx.yaml": serial_project.manifest("tiny_onnx")}, goldens=["tiny_onnx"]
    )
    (serial_project.path / "test_plain.py").write_text("def test_plain():\n    pass\n")
    result = serial_project.run("--count", "3", "manifests", "test_plain.py")
    # The function three times, the manifest item once.
    result.assert_outcomes(passed=4)
    out = result.stdout.str()
    assert out.count("(pytest-repeat) repeats test functions only") == 1
    assert "determinism:" in out and "--reruns" in out


def test_no_word_without_count(serial_project: Project) -> None:
    serial_project.make(
        {"tiny_onnx.yaml": serial_project.manifest("tiny_onnx")}, goldens=["tiny_onnx"]
    )
    result = serial_project.run()
    result.assert_outcomes(passed=1)
    assert "pytest-repeat" not in result.stdout.str()
