"""``--lf`` and ``--ff`` (pytest's cache provider) select and order manifest items, with whichever
pytest runs this test: CI runs the fast tier with the newest pytest and with the floor (8.0).

pytest 9.2 keeps node ids as parts and parsed an item named ``accuracy[cpu]`` two ways (built from
its parent, parsed back from the cache), so ``--lf`` reported "1 known failures not in selected
tests" and ran everything (pytest-dev/pytest#15045); the plugin gives its items' ids as text
(``plugin/_item.item_nodeid``)."""

from __future__ import annotations

import pytest
from helpers import PREPROCESS_BGR, PREPROCESS_RGB, Project, run_in_process

pytest.importorskip("onnxruntime")

# The helpers' quiet arguments less ``-p no:cacheprovider``: these runs need the cache.
WITH_CACHE = ("-p", "no:hypothesispytest", "-p", "no:benchmark", "-p", "cacheprovider")


def _run(project: Project, *args: str) -> pytest.RunResult:
    return run_in_process(project.pytester, *WITH_CACHE, "-v", *args)


def _ran(result: pytest.RunResult) -> list[str]:
    """The node ids the run reported, in the order they ran."""
    return [
        line.split(" ")[0]
        for line in result.outlines
        if line.startswith("manifests/") and (" PASSED" in line or " FAILED" in line)
    ]


def _two_manifests_one_drifting(project: Project) -> Project:
    project.make(
        {
            "a_first.yaml": project.manifest("a_first"),
            "b_second.yaml": project.manifest("b_second"),
        }
    )
    project.run("--mlrepro-update").assert_outcomes(passed=2)
    path = project.path / "manifests" / "b_second.yaml"
    path.write_text(path.read_text().replace(PREPROCESS_RGB, PREPROCESS_BGR))
    _run(project).assert_outcomes(passed=1, failed=1)
    return project


def test_last_failed_reruns_only_the_failed_manifest_item(serial_project: Project) -> None:
    project = _two_manifests_one_drifting(serial_project)
    rerun = _run(project, "--lf")
    rerun.assert_outcomes(failed=1)  # the other file is skipped whole
    assert _ran(rerun) == ["manifests/b_second.yaml::accuracy[cpu]"]
    out = rerun.stdout.str()
    assert "run-last-failure: rerun previous 1 failure" in out
    assert "not in selected tests" not in out
    # Mended, the item passes when rerun alone; then nothing is known to fail: all run.
    path = project.path / "manifests" / "b_second.yaml"
    path.write_text(path.read_text().replace(PREPROCESS_BGR, PREPROCESS_RGB))
    mended = _run(project, "--lf")
    mended.assert_outcomes(passed=1)
    assert _ran(mended) == ["manifests/b_second.yaml::accuracy[cpu]"]
    _run(project, "--lf").assert_outcomes(passed=2)


def test_failed_first_runs_the_failed_manifest_item_first(serial_project: Project) -> None:
    project = _two_manifests_one_drifting(serial_project)
    first = _run(project, "--ff")
    first.assert_outcomes(passed=1, failed=1)
    assert _ran(first) == [
        "manifests/b_second.yaml::accuracy[cpu]",
        "manifests/a_first.yaml::accuracy[cpu]",
    ]
    assert "run-last-failure: rerun previous 1 failure first" in first.stdout.str()


def test_an_item_named_on_the_command_line_is_selected(serial_project: Project) -> None:
    project = serial_project.make(
        {"a_first.yaml": serial_project.manifest("a_first", extra="")},
    )
    chosen = _run(project, "manifests/a_first.yaml::accuracy[cpu]", "--mlrepro-update")
    chosen.assert_outcomes(passed=1)
    assert _ran(chosen) == ["manifests/a_first.yaml::accuracy[cpu]"]
