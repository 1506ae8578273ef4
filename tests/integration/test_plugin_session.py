"""The plugin's structure seen from outside: item kinds come from a documented hook that a
conftest can implement, and one session object, registered with pytest, owns the run's state."""

from __future__ import annotations

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
    assert state.results == [] and state.latency == [] and state.reference == []


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
