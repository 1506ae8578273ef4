"""A manifest whose ``reference:`` is refused (outside the project) records no golden: the
refusal comes before anything is written, as for a refused model."""

from __future__ import annotations

from helpers import Project


def test_a_reference_outside_the_project_records_no_golden(serial_project: Project) -> None:
    project = serial_project
    project.make(
        {"tiny_onnx.yaml": project.manifest("tiny_onnx", extra="reference: ../../elsewhere.yaml\n")}
    )
    result = project.run("--mlrepro-update")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*reference: '../../elsewhere.yaml' resolves to *, outside the project*",
            "*manifests/tiny_onnx.yaml [[]cpu]: golden not recorded (golden/tiny_onnx.json is "
            "left as it was)*",
        ]
    )
    assert not project.golden("tiny_onnx").exists()
