"""Where ini paths resolve, as docs/options.md says: ``mlrepro_data`` and
``mlrepro_allowed_roots`` (pytest ``paths`` values) relative to the ini file's folder, pytest's
rule, also when ``-c`` names an ini file in another folder than the rootdir; the other path keys
relative to the rootdir (issue 30, 6)."""

from __future__ import annotations

from helpers import Project


def test_mlrepro_data_is_relative_to_the_ini_files_folder(serial_project: Project) -> None:
    serial_project.make(
        {"tiny_onnx.yaml": serial_project.manifest("tiny_onnx")},
        goldens=["tiny_onnx"],
        ini_data=None,
    )
    (serial_project.path / "ci").mkdir()
    # ../data from ci/: the project's data folder (from the rootdir it would be outside).
    (serial_project.path / "ci" / "other.ini").write_text("[pytest]\nmlrepro_data = ../data\n")
    result = serial_project.run("-c", "ci/other.ini", "--rootdir=.", "manifests")
    result.assert_outcomes(passed=1)
    # The golden directory (golden/) is the rootdir's: the recorded golden was found there.
    assert "goldens " + str(serial_project.path / "golden") in result.stdout.str()
