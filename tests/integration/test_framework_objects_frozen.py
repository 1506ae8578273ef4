"""The frameworks' objects are left out of the garbage collector's walks for the run, the
collector is given back as it was at the run's very end (a process that goes on after
``pytest.main()``), and what is alive is set aside again as the interpreter exits, after a last
collection (plugin/_heap.py, issue 34). In a subprocess: the test process's own objects are
frozen already (tests/helpers.py)."""

from __future__ import annotations

import json
import sys
import textwrap

from helpers import Project

# What the collector holds frozen: at the conftest's import (before any framework), when each
# item starts, after pytest.main returns (the script below) and at the interpreter's exit (an
# atexit function registered before the plugin's runs after it).
RECORDING_CONFTEST = textwrap.dedent("""\
    import atexit
    import gc
    import json
    import sys

    {host}

    def _record(when):
        with open("frozen.jsonl", "a") as fh:
            ort = "onnxruntime" in sys.modules
            row = {{"when": when, "frozen": gc.get_freeze_count(), "ort": ort}}
            fh.write(json.dumps(row) + "\\n")

    _record("conftest")
    atexit.register(_record, "exit")

    def pytest_runtest_setup(item):
        _record(item.nodeid)
    """)


AFTER_MAIN = textwrap.dedent("""\
    import sys

    import pytest

    code = pytest.main(["-q", "-p", "no:cacheprovider"])
    import conftest  # the project's, as pytest imported it

    conftest._record("after main")
    sys.exit(code)
    """)


def records(project: Project) -> list[dict[str, object]]:
    lines = (project.path / "frozen.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def only_onnx(project: Project) -> None:
    project.make({"tiny_onnx.yaml": project.manifest("tiny_onnx")}, goldens=["tiny_onnx"])


def test_objects_alive_after_the_framework_import_are_frozen_for_the_run_only(
    serial_project: Project,
) -> None:
    only_onnx(serial_project)
    (serial_project.path / "conftest.py").write_text(RECORDING_CONFTEST.format(host=""))
    script = serial_project.path / "run.py"
    script.write_text(AFTER_MAIN)
    done = serial_project.pytester.run(sys.executable, str(script))
    assert done.ret == 0, done.stdout.str()
    when = [r["when"] for r in records(serial_project)]
    assert when == ["conftest", "manifests/tiny_onnx.yaml::accuracy[cpu]", "after main", "exit"]
    conftest, item, after_main, at_exit = (r["frozen"] for r in records(serial_project))
    assert conftest == 0
    # ONNX Runtime and numpy alone leave tens of thousands of objects.
    assert isinstance(item, int) and item > 10_000, item
    assert after_main == 0, "the run thawed what it froze"
    assert isinstance(at_exit, int) and at_exit > 10_000, "set aside as the interpreter exits"


def test_a_run_without_manifests_freezes_nothing(serial_project: Project) -> None:
    serial_project.make(manifests={})
    (serial_project.path / "conftest.py").write_text(RECORDING_CONFTEST.format(host=""))
    (serial_project.path / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    serial_project.run(subprocess=True).assert_outcomes(passed=1)
    assert {r["frozen"] for r in records(serial_project)} == {0}


def test_a_host_that_froze_objects_itself_is_left_as_it_is(serial_project: Project) -> None:
    only_onnx(serial_project)
    host = "gc.freeze()  # the host's own: the plugin must neither add to it nor undo it"
    (serial_project.path / "conftest.py").write_text(RECORDING_CONFTEST.format(host=host))
    serial_project.run(subprocess=True).assert_outcomes(passed=1)
    seen = records(serial_project)
    hosts = seen[0]["frozen"]
    assert isinstance(hosts, int) and hosts > 0
    # Frozen objects that die leave the count; none were added (the import's would be
    # tens of thousands), and none unfrozen.
    assert seen[1]["ort"] is True, seen
    assert all(isinstance(r["frozen"], int) and 0.9 * hosts < r["frozen"] <= hosts for r in seen)
    assert seen[-1]["when"] == "exit"
