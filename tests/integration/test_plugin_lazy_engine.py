"""The plugin as a guest: installed, it loads in every pytest run of the environment, and its
engine (numpy and the core) only in a run that collects a manifest or asks for something of the
plugin. What a run imports is read in a fresh process (``runpytest_subprocess``), where nothing
else imported it before."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from helpers import CHILD_TIMEOUT_S, QUIET, Project

import pytest_mlrepro

REPO = Path(pytest_mlrepro.__file__).resolve().parent.parent

# What the entry point itself imports (pytest_mlrepro.plugin and what it needs); anything else
# of ours is the engine.
ENTRY = {
    "pytest_mlrepro",
    "pytest_mlrepro._names",
    "pytest_mlrepro.plugin",
    "pytest_mlrepro.plugin._hookspecs",
    # The garbage collector's freeze for a run that imports a framework: gc and pytest only.
    "pytest_mlrepro.plugin._heap",
    # The JUnit glue: it imports json and pytest's junitxml (pytest's own), nothing of the engine.
    "pytest_mlrepro.plugin._junit",
    "pytest_mlrepro.plugin._options",
    # pytest-testmon's and pytest-picked's glue (issue 44): pytest and _names, nothing else.
    "pytest_mlrepro.plugin._selectors",
}

MODULES_CONFTEST = """\
import json, sys


def pytest_sessionfinish(session):
    ours = sorted(m for m in sys.modules if m.split(".")[0] == "pytest_mlrepro")
    with open("modules.json", "w") as fh:
        json.dump({"ours": ours, "numpy": "numpy" in sys.modules}, fh)
"""


@pytest.fixture
def fresh_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The subprocess imports this checkout of the plugin (the one under test), and no setting
    of the environment's asks for the plugin."""
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(REPO), path) if p))
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)


def _imported(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    pytester.makeconftest(MODULES_CONFTEST)
    # Other plugins of the environment off (hypothesis', pytest-benchmark's): what is counted
    # is ours.
    result = pytester.runpytest_subprocess(*QUIET, *args, timeout=CHILD_TIMEOUT_S)
    modules = json.loads((pytester.path / "modules.json").read_text())
    return result, modules


def test_a_project_without_manifests_imports_no_engine_and_no_numpy(
    pytester: pytest.Pytester, fresh_env: None
) -> None:
    pytester.makepyfile(test_trivial="def test_one():\n    assert 1 + 1 == 2\n")
    result, modules = _imported(pytester)
    result.assert_outcomes(passed=1)
    assert set(modules["ours"]) <= ENTRY, sorted(set(modules["ours"]) - ENTRY)
    assert modules["numpy"] is False
    # The plugin was there all the same: its options are known.
    assert "--mlrepro-update" in pytester.runpytest_subprocess("--help").stdout.str()


def test_a_yaml_file_named_like_a_manifest_is_read_without_loading_the_engine(
    pytester: pytest.Pytester, fresh_env: None
) -> None:
    """A Kubernetes file under manifests/ is read (the recogniser's rule) and left alone: the
    engine stays unloaded."""
    pytester.makepyfile(test_trivial="def test_one():\n    pass\n")
    (pytester.path / "manifests").mkdir()
    (pytester.path / "manifests" / "deployment.yaml").write_text(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: model-server\n"
    )
    result, modules = _imported(pytester, "manifests", "test_trivial.py")
    result.assert_outcomes(passed=1)
    assert "pytest_mlrepro._recognize" in modules["ours"]
    assert "pytest_mlrepro.plugin._session" not in modules["ours"]
    assert modules["numpy"] is False


def test_a_manifest_collected_loads_the_engine(serial_project: Project, fresh_env: None) -> None:
    project = serial_project.make({"tiny_onnx.yaml": serial_project.manifest("tiny_onnx")})
    result, modules = _imported(project.pytester, "--collect-only", "-q")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["manifests/tiny_onnx.yaml::accuracy[[]cpu[]]"])
    assert "pytest_mlrepro.plugin._session" in modules["ours"]


def test_an_option_of_the_plugin_loads_the_engine_without_a_manifest(
    pytester: pytest.Pytester, fresh_env: None
) -> None:
    """Asked for a results file, a run without manifests writes one (with no results), and a bad
    value of a setting is a usage error before anything runs."""
    pytester.makepyfile(test_trivial="def test_one():\n    pass\n")
    result, modules = _imported(pytester, "--mlrepro-json", "out.json")
    result.assert_outcomes(passed=1)
    assert "pytest_mlrepro.plugin._session" in modules["ours"]
    assert json.loads((pytester.path / "out.json").read_text())["results"] == []
    bad = pytester.runpytest_subprocess(*QUIET, "--mlrepro-timeout", "soon")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*mlrepro_timeout: expected seconds, got 'soon'*"])


def test_an_ini_key_of_the_plugin_loads_the_engine(
    pytester: pytest.Pytester, fresh_env: None
) -> None:
    pytester.makeini("[pytest]\nmlrepro_shards = many\n")
    pytester.makepyfile(test_trivial="def test_one():\n    pass\n")
    result = pytester.runpytest_subprocess(*QUIET)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*mlrepro_shards: expected a whole number, got 'many'*"])


def test_an_xdist_controller_loads_the_engine_from_its_workers_reports(
    serial_project: Project, fresh_env: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under xdist the controller collects nothing and, with no option of the plugin given,
    has not loaded the engine: the workers' reports of the plugin's items load it, and the
    session's summary is shown as in a run without xdist."""
    project = serial_project.make(
        {"tiny_onnx.yaml": serial_project.manifest("tiny_onnx")},
        goldens=["tiny_onnx"],
        ini_data=None,
    )
    monkeypatch.setenv("MLREPRO_DATA", str(project.path / "data"))
    result = project.pytester.runpytest_subprocess(*QUIET, "-n", "2", timeout=CHILD_TIMEOUT_S)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*= mlrepro =*", "manifest*verdict", "tiny_onnx*cpu*pass"])
