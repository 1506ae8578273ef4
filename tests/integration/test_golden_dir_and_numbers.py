"""The golden store writes only inside the project, and trusts no number it did not write.

* A golden directory that is itself a symlink to a folder outside the project is refused by
  ``--mlrepro-update`` before anything runs (before: the goldens were written there).
* ``NaN`` or ``Infinity`` anywhere in a golden (Python's JSON parser accepts both; the store
  never writes them) fails the item naming the field.
"""

from __future__ import annotations

import shutil

import pytest
from helpers import Project


def test_update_refuses_a_golden_directory_that_links_outside_the_project(
    serial_project: Project, tmp_path_factory: pytest.TempPathFactory
) -> None:
    project = serial_project.make({"tiny_onnx.yaml": serial_project.manifest("tiny_onnx")})
    outside = tmp_path_factory.mktemp("elsewhere")
    shutil.rmtree(project.path / "golden")
    (project.path / "golden").symlink_to(outside, target_is_directory=True)
    result = project.run("--mlrepro-update")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"*the golden directory {project.path / 'golden'} leads (through a symbolic link) "
            f"to {outside.resolve()}, outside the project*Nothing was run.*"
        ]
    )
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_a_non_finite_metric_in_a_golden_fails_naming_the_field(
    serial_project: Project, value: str
) -> None:
    project = serial_project.make(
        {"tiny_onnx.yaml": serial_project.manifest("tiny_onnx")}, goldens=["tiny_onnx"]
    )
    golden = project.golden("tiny_onnx")
    text = golden.read_text()
    start = text.index('"top1": ', text.index('"metrics"'))
    end = text.index(",", start)
    golden.write_text(text[:start] + f'"top1": {value}' + text[end:])
    before = golden.read_bytes()
    result = project.run()
    result.assert_outcomes(failed=1)
    shown = {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}[value]
    result.stdout.fnmatch_lines(
        [f"*golden/tiny_onnx.json*: metrics.top1: {shown} is not a finite number: a golden holds "
         "only finite numbers (the file was edited or tampered with)*"]
    )
    assert golden.read_bytes() == before
