"""The golden store and the results file write the way an editor would.

* Written files follow the umask.
* Unwritable outputs are usage errors before anything runs; a write that fails (file too large)
  is one clear message, and the old golden stays intact.
"""

from __future__ import annotations

import os
import resource
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest
from helpers import CHILD_TIMEOUT_S, PREPROCESS_BGR, QUIET, Project


def run(project: Project, *args: str) -> pytest.RunResult:
    """pytest on the project, in this process."""
    return project.pytester.runpytest(*QUIET, *args)


@pytest.fixture
def umask() -> Iterator[Callable[[int], None]]:
    """Sets this process's umask (the in-process pytest runs use it); restored afterwards."""
    old = os.umask(0o022)

    def set_mask(mask: int) -> None:
        os.umask(mask)

    yield set_mask
    os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o002])
def test_written_files_follow_the_umask(
    serial_project: Project, umask: Callable[[int], None], mask: int
) -> None:
    project = serial_project
    project.make({"tiny_onnx.yaml": project.manifest("tiny_onnx")})
    umask(mask)
    run(project, "--mlrepro-update", "--mlrepro-json", "results.json").assert_outcomes(passed=1)
    for path in (project.golden("tiny_onnx"), project.path / "results.json"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask, path


def test_results_file_in_an_unwritable_folder_is_a_usage_error_before_anything_runs(
    serial_project: Project,
) -> None:
    project = serial_project
    project.make({"tiny_onnx.yaml": project.manifest("tiny_onnx")})
    # A path whose parent is a regular file: unwritable even for root (tests run as root here).
    (project.path / "blocker").write_text("a file, not a folder\n")
    result = run(project, "--mlrepro-update", "--mlrepro-json", "blocker/out/results.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: {project.path}/blocker/out: cannot write the results file (--mlrepro-json): "
            "a part of the path is a file, not a folder*Nothing was run."
        ]
    )
    assert not project.golden("tiny_onnx").exists()


def test_update_into_an_unwritable_golden_directory_is_a_usage_error_before_anything_runs(
    serial_project: Project,
) -> None:
    project = serial_project
    project.make({"tiny_onnx.yaml": project.manifest("tiny_onnx")})
    (project.path / "blocker").write_text("a file, not a folder\n")
    with (project.path / "pytest.ini").open("a") as ini:
        ini.write("mlrepro_golden_dir = blocker/golden\n")
    result = run(project, "--mlrepro-update")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: {project.path}/blocker/golden: cannot write the goldens (--mlrepro-update): "
            "a part of the path is a file, not a folder*Nothing was run."
        ]
    )
    run(project).assert_outcomes(failed=1)  # a plain run writes nothing: no golden is all


def _limit_file_size(limit: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_a_golden_too_large_to_write_is_one_clear_failure_and_the_old_golden_stays(
    serial_project: Project,
) -> None:
    project = serial_project
    project.make({"tiny_onnx.yaml": project.manifest("tiny_onnx")}, goldens=["tiny_onnx"])
    path = project.golden("tiny_onnx")
    before = path.read_bytes()
    # The results change (BGR swaps classes 0 and 2): the update must rewrite the golden.
    (project.path / "manifests" / "tiny_onnx.yaml").write_text(
        project.manifest("tiny_onnx", decode=PREPROCESS_BGR)
    )
    # RLIMIT_FSIZE makes write() fail with EFBIG past the limit (Python ignores SIGXFSZ): a
    # real "file too large", no root needed. Output goes to a pipe, which the limit spares.
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *QUIET, "--mlrepro-update"],
        cwd=project.path,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        preexec_fn=_limit_file_size(len(before) // 2),
    )
    output = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, output
    assert (
        "golden/tiny_onnx.json: cannot write the golden: the file is larger than this process "
        "may write (the file size limit, `ulimit -f`, or the file system's largest file): "
        "raise the limit and run again; nothing was changed there"
    ) in output, output
    assert "Traceback" not in output, output
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["tiny_onnx.json"]  # no temp file


def test_a_results_file_that_cannot_be_written_at_the_end_is_said_and_fails_the_run(
    serial_project: Project,
) -> None:
    """The folder was writable at the start; the write itself fails (file too large): one clear
    line, and the exit status says the run did not succeed although every item passed."""
    project = serial_project
    project.make({"tiny_onnx.yaml": project.manifest("tiny_onnx")}, goldens=["tiny_onnx"])
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *QUIET, "--mlrepro-json", "results.json"],
        cwd=project.path,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        preexec_fn=_limit_file_size(256),  # far below any results file
    )
    output = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, output
    assert "1 passed" in output, output
    assert (
        f"mlrepro: {project.path}/results.json: cannot write the results file (--mlrepro-json): "
        "the file is larger than this process may write"
    ) in output, output
    assert "Traceback" not in output, output
    assert not (project.path / "results.json").exists()
