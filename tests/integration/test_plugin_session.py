"""The plugin's structure seen from outside: item kinds come from a documented hook that a
conftest can implement, and one session object, registered with pytest, owns the run's state."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers import Project

KIND_CONFTEST = """\
import pytest


class SmokeItem(pytest.Item):
    kind = "smoke"

    def runtest(self):
        pass


def pytest_mlrepro_make_items(parent, manifest, devices):
    return [SmokeItem.from_parent(parent, name=f"smoke[{d}]") for d in devices]
"""


def test_a_conftest_adds_an_item_kind_through_the_hook(serial_project: Project) -> None:
    """pytest_mlrepro_make_items is a hook (not a list to append to): a conftest's items join
    the plugin's, after its own kinds, with the plugin's markers."""
    project = serial_project.make(
        manifests={"tiny_onnx.yaml": serial_project.manifest("tiny_onnx")}
    )
    (project.path / "conftest.py").write_text(KIND_CONFTEST)
    result = project.pytester.runpytest_inprocess("--collect-only", "-q", "-m", "mlrepro")
    result.stdout.fnmatch_lines(
        [
            "manifests/tiny_onnx.yaml::accuracy[[]cpu[]]",
            "manifests/tiny_onnx.yaml::smoke[[]cpu[]]",
        ]
    )
    assert result.ret == 0


ROWS_CONFTEST = """\
import json

import pytest

from pytest_mlrepro.plugin._base import state_of
from pytest_mlrepro.results import Row, row_json


@pytest.hookimpl(trylast=True)  # after the plugin's sessionfinish wrote the results file
def pytest_sessionfinish(session):
    if hasattr(session.config, "workerinput"):
        return
    rows = state_of(session.config).results
    with open("session_rows.json", "w") as out:
        json.dump([{"type": type(r).__qualname__, "typed": type(r) is Row, "row": row_json(r)}
                   for r in rows], out)
"""


@pytest.mark.about_xdist  # the worker's JSON made the typed row again on the controller
def test_the_session_rows_are_typed_and_the_results_file_is_their_json(project: Project) -> None:
    """The session keeps one typed ``results.Row`` per item, made from the report (under xdist:
    from the JSON the worker sent, on the controller), and the results file holds exactly
    ``row_json`` of each: a compared row's per-sample blocks, tolerances and timings included."""
    project.make(
        {
            "tiny_onnx.yaml": project.manifest("tiny_onnx"),
            "tiny_new.yaml": project.manifest("tiny_new"),
        },
        goldens=["tiny_onnx"],
    )
    (project.path / "conftest.py").write_text(ROWS_CONFTEST)
    result = project.run("--mlrepro-json", "out.json", "-m", "mlrepro_accuracy")
    result.assert_outcomes(passed=1, failed=1)  # tiny_new has no golden
    session = json.loads((project.path / "session_rows.json").read_text())
    written = json.loads((project.path / "out.json").read_text())["results"]
    assert [(s["type"], s["typed"]) for s in session] == [("Row", True)] * 2
    by_node = {s["row"]["nodeid"]: s["row"] for s in session}
    assert {r["nodeid"]: r for r in written} == by_node
    compared = by_node["manifests/tiny_onnx.yaml::accuracy[cpu]"]
    assert compared["status"] == "passed" and compared["per_sample"]["golden"] is not None
    assert set(compared["tolerances"]) == {"top1", "top5", "agreement", "score"}
    assert by_node["manifests/tiny_new.yaml::accuracy[cpu]"]["status"] == "no golden"


def test_the_item_kind_hook_is_documented(pytester: pytest.Pytester) -> None:
    """The hook spec is registered with pytest, with its parameters documented."""
    config = pytester.parseconfigure()
    hook = config.pluginmanager.hook.pytest_mlrepro_make_items
    spec = hook.spec
    assert spec is not None
    assert spec.argnames == ("parent", "manifest", "devices")
    doc = spec.function.__doc__ or ""
    for name in spec.argnames:
        assert f":param {name}:" in doc


def test_one_session_object_owns_the_state(pytester: pytest.Pytester) -> None:
    """The session object is registered with the plugin manager, once per pytest run that loads
    the engine (here: an option of the plugin given); runs in one process do not share it, nor
    the run's state (no module-level state)."""
    from pytest_mlrepro.plugin._base import state_of
    from pytest_mlrepro.plugin._session import MlreproSession, session_of

    first = pytester.parseconfigure("--mlrepro-strict")
    second = pytester.parseconfigure("--mlrepro-strict")
    session = first.pluginmanager.get_plugin("mlrepro-session")
    assert isinstance(session, MlreproSession)
    assert session_of(first) is session
    assert session_of(second) is not session
    assert state_of(first) is not state_of(second)
    state = state_of(first)
    assert state.results == [] and state.latency == []


def test_importing_the_plugin_opens_no_file_descriptor() -> None:
    """The terminal's stderr is duplicated when a time limit is armed, not at import (every
    pytest process of the environment imports the plugin)."""
    code = (
        "import os\n"
        "before = set(os.listdir('/proc/self/fd'))\n"
        "import importlib\n"
        "import pytest_mlrepro.plugin as plugin\n"
        "importlib.import_module(plugin.ENGINE)  # what it registers when a run needs it\n"
        "after = set(os.listdir('/proc/self/fd'))\n"
        "print(len(after - before))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env=os.environ
    )
    assert out.stdout.strip() == "0"
