"""Names in the session's HTML report (machine, manifest, class, sample) are text: a machine
named like TeX (``$\\foo{$``) is neither parsed by matplotlib's mathtext (which crashed on it and
lost the report) nor taken as markup by the page."""

from __future__ import annotations

import html

from helpers import Project

MACHINE = "$\\foo{$ <b>&"


def test_a_machine_name_like_tex_keeps_the_session_report(serial_project: Project) -> None:
    project = serial_project.make(
        {"tiny_onnx.yaml": serial_project.manifest("tiny_onnx")}, goldens=["tiny_onnx"]
    )
    result = project.run("--mlrepro-machine", MACHINE, "--mlrepro-html", "report.html")
    result.assert_outcomes(passed=1)
    assert result.ret == 0, result.stdout.str()
    page = (project.path / "report.html").read_text()
    assert html.escape(MACHINE) in page
    assert "<b>&" not in page
