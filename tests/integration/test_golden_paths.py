"""Where a golden may be, and whose it is: the golden store reads and writes only its own files.

* ``golden:`` may only name a file of the accuracy namespace (not a latency or pitfall golden, not
  a project file): anything else is an invalid manifest, and nothing is written there.
* A golden path that is a symlink, a FIFO or a folder is refused (never read through, never
  blocking, never a raw traceback); a golden directory that links outside the project is refused
  by ``--mlrepro-update`` before anything runs.
* A golden records the manifest file it was recorded from; another manifest with the same name is
  refused, naming both, in a later run.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from helpers import CHILD_TIMEOUT_S, PREPROCESS_BGR, QUIET, Project, line_of

from pytest_mlrepro.goldens import _store as golden_store


def run(project: Project, *args: str) -> pytest.RunResult:
    """pytest on the project, in this process."""
    return project.pytester.runpytest(*QUIET, *args)


def test_golden_key_outside_the_accuracy_namespace_is_an_invalid_manifest_and_nothing_is_written(
    serial_project: Project,
) -> None:
    project = serial_project
    targets = {
        "tiny_latency": "golden/latency/tiny_onnx/x.json",
        "tiny_pitfalls": "golden/pitfalls/tiny_onnx.json",
        "tiny_project": "package.json",
        "tiny_escape": "golden/../package.json",
    }
    manifests = {
        f"{name}.yaml": project.manifest(name, extra=f"golden: {target}\n")
        for name, target in targets.items()
    }
    manifests["tiny_sub.yaml"] = project.manifest("tiny_sub", extra="golden: golden/sub/x.json\n")
    project.make(manifests)
    for target in set(targets.values()):
        path = project.path / target
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('{"precious": true}\n')

    result = run(project, "--mlrepro-update")
    result.assert_outcomes(passed=1, failed=len(targets))
    for name, target in targets.items():
        text = manifests[f"{name}.yaml"]
        line = line_of(text, "golden: ")
        if target.startswith("golden/latency") or target.startswith("golden/pitfalls"):
            folder = target.split("/")[1]
            why = f"is in golden/{folder}/, reserved for {folder} goldens*"
        else:
            why = "is outside the golden directory (golden/)*"
        result.stdout.fnmatch_lines([f"manifests/{name}.yaml:{line}: golden: {target!r} {why}"])
    for target in targets.values():
        assert (project.path / target).read_text() == '{"precious": true}\n', target
    assert golden_store.read(project.path / "golden" / "sub" / "x.json") is not None


def test_golden_paths_that_are_symlinks_fifos_or_folders_are_refused(
    serial_project: Project, mlrepro_assets: Path, tmp_path: Path
) -> None:
    project = serial_project
    names = ["tiny_link", "tiny_fifo", "tiny_folder"]
    project.make({f"{name}.yaml": project.manifest(name) for name in names})
    # A valid golden outside the project: the old code read through the link and passed.
    outside = tmp_path / "elsewhere.json"
    text = (mlrepro_assets / "golden" / "tiny_onnx.json").read_text()
    outside.write_text(text.replace('"tiny_onnx"', '"tiny_link"'))
    project.golden("tiny_link").symlink_to(outside)
    os.mkfifo(project.golden("tiny_fifo"))
    project.golden("tiny_folder").mkdir()
    kinds = {"tiny_link": "a symbolic link", "tiny_fifo": "a FIFO (named pipe)"}
    kinds["tiny_folder"] = "a folder"

    for args in ([], ["--mlrepro-update"]):
        # In a subprocess with a time limit: the old code blocked forever opening the FIFO.
        result = project.pytester.runpytest_subprocess(*QUIET, *args, timeout=CHILD_TIMEOUT_S)
        result.assert_outcomes(failed=len(names))
        for name, kind in kinds.items():
            result.stdout.fnmatch_lines([f"*golden/{name}.json is {kind}*regular file*"])
        assert "Traceback" not in result.stdout.str()
    assert project.golden("tiny_link").is_symlink()
    assert outside.read_text() == text.replace('"tiny_onnx"', '"tiny_link"')
    assert stat.S_ISFIFO(os.lstat(project.golden("tiny_fifo")).st_mode)
    assert project.golden("tiny_folder").is_dir()


def test_a_manifest_with_the_same_name_cannot_take_over_a_golden_in_a_later_run(
    serial_project: Project,
) -> None:
    project = serial_project
    project.make(
        {
            "first.yaml": project.manifest("tiny_twin"),
            "second.yaml": project.manifest("tiny_twin", decode=PREPROCESS_BGR),
        }
    )
    run(project, "manifests/first.yaml", "--mlrepro-update").assert_outcomes(passed=1)
    golden = golden_store.read(project.golden("tiny_twin"))
    assert golden is not None and golden.manifest_file == "manifests/first.yaml"
    before = project.golden("tiny_twin").read_bytes()

    for args in ([], ["--mlrepro-update"]):
        result = run(project, "manifests/second.yaml", *args)
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(
            [
                "manifests/second.yaml: its golden golden/tiny_twin.json was recorded from "
                "manifests/first.yaml, which still claims it: two manifests named 'tiny_twin' "
                "cannot share one golden file*Nothing was written."
            ]
        )
        assert project.golden("tiny_twin").read_bytes() == before
    run(project, "manifests/first.yaml").assert_outcomes(passed=1)


def test_a_golden_recorded_before_the_manifest_file_was_kept_loads_and_gets_it_on_update(
    serial_project: Project,
) -> None:
    project = serial_project
    project.make({"tiny_onnx.yaml": project.manifest("tiny_onnx")}, goldens=["tiny_onnx"])
    path = project.golden("tiny_onnx")
    lines = path.read_text().split("\n")
    path.write_text("\n".join(line for line in lines if '"manifest_file"' not in line))
    legacy = golden_store.read(path)
    assert legacy is not None and legacy.manifest_file is None
    run(project).assert_outcomes(passed=1)

    update = run(project, "--mlrepro-update")
    update.assert_outcomes(passed=1)
    update.stdout.fnmatch_lines(["*golden updated (manifest file recorded)*"])
    updated = golden_store.read(path)
    assert updated is not None and updated.manifest_file == "manifests/tiny_onnx.yaml"


def test_a_moved_manifest_keeps_its_golden(serial_project: Project) -> None:
    """The recorded manifest file no longer exists: the manifest was moved, not duplicated."""
    project = serial_project
    project.make({"old.yaml": project.manifest("tiny_moved")})
    run(project, "--mlrepro-update").assert_outcomes(passed=1)
    (project.path / "manifests" / "old.yaml").rename(project.path / "manifests" / "new.yaml")
    run(project).assert_outcomes(passed=1)
    run(project, "--mlrepro-update").assert_outcomes(passed=1)
    golden = golden_store.read(project.golden("tiny_moved"))
    assert golden is not None and golden.manifest_file == "manifests/new.yaml"


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
