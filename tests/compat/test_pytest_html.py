"""pytest-html: the report lists the manifest items and shows a drift's whole text (issue 30: it
works; this keeps it so)."""

from __future__ import annotations

from compat_helpers import needs, two_manifests
from helpers import Project

pytestmark = needs("pytest_html", "pytest-html")


def test_the_report_shows_items_and_the_drift(serial_project: Project) -> None:
    two_manifests(serial_project)
    result = serial_project.run(
        "--html", "report.html", "--self-contained-html", "--mlrepro-no-diagnose"
    )
    result.assert_outcomes(passed=1, failed=1)
    page = (serial_project.path / "report.html").read_text()
    assert "manifests/tiny_onnx.yaml::accuracy[cpu]" in page
    assert "manifests/tiny_loose.yaml::accuracy[cpu]" in page
    assert "drifted from the golden" in page
