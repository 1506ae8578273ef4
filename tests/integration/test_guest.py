"""A good guest (issue 12): installed in an environment, the plugin keeps quiet in projects that do
not use it, and behaves in those that do.

* YAML under ``manifests/`` is claimed only when its top level has manifest keys (_recognize.py):
  Kubernetes YAML is never collected, a misspelt real manifest still fails with file:line.
* No header line, no golden audit where no manifest was collected.
* Markers select items by kind, framework and device; ``--strict-markers`` stays clean.
* The time limit shares the process's timer with pytest-timeout: both limits keep working.
* Without ``fcntl`` (not POSIX), importing the plugin breaks no pytest run.
* ``from pytest_mlrepro import evaluate`` is the function inside a pytest run; what a custom
  preprocessing step needs is public.
* Progress of an evaluation shows on a terminal only, erased when the item ends.
"""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import (
    BUILDERS_CONFTEST,
    CHILD_TIMEOUT_S,
    QUIET,
    Project,
    line_of,
    make_empty_weights,
    state_dict_manifest,
)

from pytest_mlrepro.plugin import _limits as limits

KUBERNETES = {
    "deployment.yaml": """\
        apiVersion: apps/v1
        kind: Deployment
        metadata:
          name: model-server
        spec:
          replicas: 2
          template:
            spec:
              containers:
                - name: server
                  image: example/model:1.0
        """,
    # Several documents, and a Helm template that is not YAML at all.
    "config.yml": "apiVersion: v1\nkind: ConfigMap\ndata: {model: resnet}\n---\nkind: Service\n",
    "values.yaml": "replicas: {{ .Values.replicas }}\nimage: {{ .Values.image }}\n",
}


def _guest_files(path: Path) -> None:
    """A project that does not use pytest-mlrepro: Kubernetes YAML, its own golden/, a test."""
    (path / "manifests").mkdir(exist_ok=True)
    for name, text in KUBERNETES.items():
        (path / "manifests" / name).write_text(textwrap.dedent(text))
    (path / "golden").mkdir(exist_ok=True)
    (path / "golden" / "api_response.json").write_text('{"status": "ok"}\n')
    (path / "test_ok.py").write_text("def test_ok():\n    assert True\n")


# --- inert unless used ------------------------------------------------------------------------


def _mentions(lines: list[str]) -> list[str]:
    """Lines naming the plugin, but for pytest's own list of installed plugins ("plugins: ...")."""
    return [line for line in lines if "mlrepro" in line.lower() and not line.startswith("plugins:")]


def test_a_project_that_does_not_use_the_plugin_never_sees_it(pytester: pytest.Pytester) -> None:
    _guest_files(pytester.path)
    # -rA: every report line; not -v, whose header lists installed plugins (pytest's own line).
    result = pytester.runpytest("-p", "no:cacheprovider", "-rA", "--strict-markers")
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    assert not _mentions(result.outlines + result.errlines), result.outlines


def test_kubernetes_yaml_beside_manifests_is_left_alone_and_a_misspelt_manifest_still_fails(
    project: Project,
) -> None:
    good = project.manifest("tiny_onnx")
    misspelt = good.replace("framework:", "framwork:")  # still has model, inputs, dataset, ...
    project.make({"tiny_onnx.yaml": good, "typo.yaml": misspelt}, goldens=["tiny_onnx"])
    _guest_files(project.path)
    result = project.run("-rf")
    result.assert_outcomes(passed=2, failed=1)  # test_ok, tiny_onnx; typo.yaml
    result.stdout.fnmatch_lines(
        [
            f"manifests/typo.yaml:{line_of(misspelt, 'framwork:')}: framwork: unknown key "
            "(did you mean 'framework'?)*"
        ]
    )
    output = "\n".join(result.outlines)
    for name in KUBERNETES:
        assert name not in output, output
    # A manifest failed to load, so golden/api_response.json is not called unused: said so.
    assert "1 golden(s) look unused, but 1 manifest(s) failed to load" in output


def test_the_header_line_shows_only_when_manifests_are_collected(
    serial_project: Project,
) -> None:
    project = serial_project
    project.make({"tiny_onnx.yaml": project.manifest("tiny_onnx")}, goldens=["tiny_onnx"])
    _guest_files(project.path)
    (project.path / "golden" / "api_response.json").unlink()
    used = project.run("--collect-only")
    used.stdout.fnmatch_lines(["collected 2 items", "mlrepro: goldens *, data mirrors *"])
    unused = project.run("--collect-only", "test_ok.py")
    assert not _mentions(unused.outlines), unused.outlines


# --- selectable -------------------------------------------------------------------------------


def test_markers_select_items_by_kind_framework_and_device(
    pytester: pytest.Pytester, serial_project: Project
) -> None:
    project = serial_project
    project.make(
        {
            "tiny_onnx.yaml": project.manifest(
                "tiny_onnx", extra="latency: {batch_sizes: [1, 8]}\ndeterminism: {runs: 2}\n"
            ),
            "tiny_torch.yaml": project.manifest("tiny_torch", "torch"),
            "broken.yaml": "framework: {name: onnxruntime}\nmodel: [\n",
        }
    )
    (project.path / "test_ok.py").write_text("def test_ok():\n    assert True\n")

    def selected(expression: str) -> set[str]:
        result = pytester.runpytest(
            "-p", "no:cacheprovider", "--collect-only", "-q", "--strict-markers", "-m", expression
        )
        assert result.ret in (0, 5), result.outlines  # 5: nothing selected
        return {line for line in result.outlines if "::" in line}

    onnx, torch = "manifests/tiny_onnx.yaml::", "manifests/tiny_torch.yaml::"
    assert selected("mlrepro_latency") == {onnx + "latency[cpu-b1]", onnx + "latency[cpu-b8]"}
    assert selected("mlrepro_determinism") == {onnx + "determinism[cpu]"}
    assert selected("mlrepro_accuracy") == {onnx + "accuracy[cpu]", torch + "accuracy[cpu]"}
    assert selected("mlrepro_torch and mlrepro_cpu") == {torch + "accuracy[cpu]"}
    assert selected("mlrepro_cuda") == set()
    assert selected("not mlrepro") == {"test_ok.py::test_ok"}
    # Every item of the plugin, the invalid manifest's included, carries "mlrepro".
    assert selected("mlrepro") == {
        onnx + name
        for name in ("accuracy[cpu]", "latency[cpu-b1]", "latency[cpu-b8]", "determinism[cpu]")
    } | {torch + "accuracy[cpu]", "manifests/broken.yaml::manifest"}
    markers = pytester.runpytest("-p", "no:cacheprovider", "--markers")
    markers.stdout.fnmatch_lines(
        ["@pytest.mark.mlrepro_latency: *", "@pytest.mark.mlrepro_cuda: *"], consecutive=False
    )


# --- honest platform: time limits, fcntl ------------------------------------------------------


class _Outer(Exception):
    """What another timer's handler (pytest-timeout's) raises."""


def _outer_handler(signum: int, frame: object) -> None:
    raise _Outer


@pytest.fixture
def outer_timer() -> object:
    previous = signal.signal(signal.SIGALRM, _outer_handler)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.usefixtures("outer_timer")
def test_a_shorter_outer_timer_still_fires_inside_the_time_limit() -> None:
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    start = time.monotonic()
    with pytest.raises(_Outer), limits.time_limit(30, "item"):
        time.sleep(10)
    assert time.monotonic() - start < 9  # the timer cut the 10 s sleep short (however loaded)
    assert signal.getsignal(signal.SIGALRM) is _outer_handler  # given back
    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0  # it fired: nothing left armed


@pytest.mark.usefixtures("outer_timer")
def test_a_longer_outer_timer_keeps_its_remaining_time_after_the_time_limit() -> None:
    signal.setitimer(signal.ITIMER_REAL, 1.0)
    start = time.monotonic()
    with pytest.raises(limits.ItemTimeout), limits.time_limit(0.2, "item"):
        time.sleep(10)
    left = signal.getitimer(signal.ITIMER_REAL)[0]
    assert 0.5 < left <= 0.85, left  # re-armed with what it had left, not cancelled
    with pytest.raises(_Outer):
        time.sleep(10)
    assert 0.9 < time.monotonic() - start < 9  # fired after its second, cut the sleep short


def test_pytest_timeout_still_stops_an_mlrepro_item(serial_project: Project) -> None:
    pytest.importorskip("pytest_timeout")
    pytest.importorskip("torch")
    project = serial_project
    sha = make_empty_weights(project.path / "empty.pt")
    text = state_dict_manifest(
        "hangs", "builder_sleeps", "../models/empty.pt", sha, assets=project.assets
    )
    runtime = "runtime: {batch_size: 8, devices: [cpu]}"
    project.make({"hangs.yaml": text.replace(runtime, runtime[:-1] + ", timeout_s: 120}")})
    (project.path / "empty.pt").rename(project.path / "models" / "empty.pt")
    (project.path / "conftest.py").write_text(BUILDERS_CONFTEST)
    start = time.monotonic()
    result = project.run(
        "-p", "timeout", "--timeout", "3", "--timeout-method", "signal", subprocess=True
    )  # a child process: one that is not stopped fails after pytester's 120 s, not an hour
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*Timeout (>3.0s) from pytest-timeout*"])
    # pytest-timeout's 3 s, not mlrepro's 120 s (room for a loaded machine's start-up)
    assert time.monotonic() - start < 110


# What pytest-timeout's signal method does when its SIGALRM lands on an instruction that has no line
# number (exception-handling code, say): the exception's traceback has an entry whose tb_lineno
# is None. Built here without a timer, so the failure cannot depend on where a signal lands.
NO_LINE_NUMBER_CONFTEST = """
import sys
import types

import pytest


def _frame_in_a_handler():
    try:
        raise KeyError("inside")
    except KeyError:
        return sys._getframe()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item):
    frame = _frame_in_a_handler()
    offset = next(s for s, _, line in frame.f_code.co_lines() if line is None)
    try:
        pytest.fail("Timeout (>3.0s) from pytest-timeout.")
    except pytest.fail.Exception as error:
        entry = types.TracebackType(error.__traceback__, frame, offset, -1)
        assert entry.tb_lineno is None
        raise error.with_traceback(entry)
"""


def test_a_failure_whose_traceback_has_no_line_number_is_reported_not_an_internal_error(
    project: Project,
) -> None:
    project.make({"tiny.yaml": project.manifest("tiny")})
    (project.path / "conftest.py").write_text(NO_LINE_NUMBER_CONFTEST)
    result = project.run("-p", "no:randomly")
    result.assert_outcomes(failed=1)
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()
    result.stdout.fnmatch_lines(["*Timeout (>3.0s) from pytest-timeout*", "*1 failed*"])


def test_without_fcntl_pytest_still_runs_with_the_plugin_installed(
    pytester: pytest.Pytester,
) -> None:
    _guest_files(pytester.path)
    code = (
        "import sys; sys.modules['fcntl'] = None\n"
        "import pytest\n"
        "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '.']))\n"
    )
    result = pytester.run(sys.executable, "-c", code, timeout=CHILD_TIMEOUT_S)
    assert result.ret == 0, result.outlines + result.errlines
    result.stdout.fnmatch_lines(["1 passed*"])


def test_without_fcntl_a_lock_fails_with_a_clear_message(pytester: pytest.Pytester) -> None:
    """What an item that needs a lock (a cache, a golden, the xdist latency lock) fails with on
    a platform without fcntl: the package's own error, naming the platform, not an ImportError."""
    code = (
        "import sys; sys.modules['fcntl'] = None\n"
        "from pytest_mlrepro import MlreproError\n"
        "from pathlib import Path\n"
        "from pytest_mlrepro._files import file_lock\n"
        "try:\n"
        "    with file_lock(Path('x.lock'), inside=Path('.')):\n"
        "        print('locked')\n"
        "except MlreproError as exc:\n"
        "    print(f'refused: {exc}')\n"
    )
    result = pytester.run(sys.executable, "-c", code, timeout=CHILD_TIMEOUT_S)
    assert result.ret == 0, result.outlines + result.errlines
    result.stdout.fnmatch_lines(
        [f"refused: pytest-mlrepro runs on POSIX systems only*fcntl*platform ({sys.platform})*"]
    )
    assert not (pytester.path / "x.lock").exists()


# --- the public API ---------------------------------------------------------------------------


def test_the_public_api_inside_a_pytest_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_api="""
        import inspect, typing

        import pytest_mlrepro
        from pytest_mlrepro import evaluate


        def test_evaluate_is_the_function():
            assert inspect.isfunction(evaluate)
            hints = typing.get_type_hints(evaluate)
            assert hints["return"] is pytest_mlrepro.Evaluation
            for name in pytest_mlrepro.__all__:
                assert not inspect.ismodule(getattr(pytest_mlrepro, name)), name
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_a_custom_step_needs_only_public_names(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        from dataclasses import dataclass

        from pytest_mlrepro import Invalid, State, Step, Tensor, register_step


        @register_step
        @dataclass(frozen=True)
        class Posterize(Step):
            op = "posterize"
            bits: int = 4

            def check(self) -> None:
                if not 1 <= self.bits <= 8:
                    raise Invalid("bits", "must be between 1 and 8")

            def transition(self, state: State) -> State:
                if state.dtype != "uint8":
                    raise Invalid("", "posterize needs uint8 data")
                return state

            def apply(self, t: Tensor) -> Tensor:
                return Tensor(t.array & (0xFF << (8 - self.bits)) & 0xFF, t.order, t.layout)
        """
    )
    pytester.makepyfile(
        test_step="""
        import pytest
        from pytest_mlrepro import ManifestError, load_manifest

        MANIFEST = (
            "inputs:\\n"
            "  - name: x\\n"
            "    layout: NCHW\\n"
            "    preprocess:\\n"
            "      - decode: {}\\n"
            "      - posterize: {bits: 9}\\n"
        )

        def test_refused(tmp_path):
            path = tmp_path / "m.yaml"
            path.write_text(MANIFEST)
            with pytest.raises(ManifestError) as refused:
                load_manifest(path)
            assert refused.value.field.endswith("posterize.bits"), refused.value.field
            assert "must be between 1 and 8" in str(refused.value)
            assert refused.value.line == 6
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


# --- progress ---------------------------------------------------------------------------------


def _run_on_a_terminal(cwd: Path, *args: str) -> str:
    """pytest's output when its stdout is a terminal (a pseudo-terminal), as raw text."""
    main, secondary = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("MLREPRO_DATA", "PYTEST_ADDOPTS")}
    env.update(COLUMNS="120", TERM="xterm", MLREPRO_CACHE=str(cwd / ".mlrepro-cache"))
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", *QUIET, *args],
        cwd=cwd, stdin=secondary, stdout=secondary, stderr=secondary, env=env,
    )  # fmt: skip
    os.close(secondary)
    chunks = []
    while True:
        try:
            data = os.read(main, 4096)
        except OSError:  # the other side closed
            break
        if not data:
            break
        chunks.append(data)
    process.wait(timeout=CHILD_TIMEOUT_S)
    os.close(main)
    return b"".join(chunks).decode(errors="replace")


def test_progress_shows_on_a_terminal_and_nowhere_else(serial_project: Project) -> None:
    project = serial_project
    project.make({"tiny_onnx.yaml": project.manifest("tiny_onnx")}, goldens=["tiny_onnx"])
    terminal = _run_on_a_terminal(project.path, "-p", "no:xdist")
    shown = " 24/24 samples"
    assert shown + "\b" * len(shown) in terminal, terminal  # written, cursor back
    erased = " " * len(shown) + "\b" * len(shown)
    assert erased in terminal[terminal.index(shown) :], terminal  # and wiped before the "."
    assert re.search(r"1 passed", terminal), terminal
    # Not a terminal (a pipe, as in CI): nothing.
    piped = project.run()
    piped.assert_outcomes(passed=1)
    assert "24/24" not in "\n".join(piped.outlines)
    # xdist: nothing on the controller either (see progress.py for why).
    parallel = _run_on_a_terminal(project.path, "-n", "2")
    assert "1 passed" in parallel and "24/24" not in parallel, parallel
