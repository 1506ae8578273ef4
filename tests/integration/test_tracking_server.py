"""Results in a real MLflow tracking server on PostgreSQL (issue 42; docs/tracking.md), started
by .ci/run (``.ci/tracking_server.sh``), which gives its URI in ``MLREPRO_TEST_MLFLOW_URI`` and its
database in ``MLREPRO_TEST_MLFLOW_BACKEND``; without them these tests skip. Each test logs to an
experiment of its own (``MLFLOW_EXPERIMENT_NAME``), and reads the store back through MLflow's
client or through ``mlrepro history|merge --track``, compared with the same files read from disk.

The history test runs against the embedded SQLite store too (no server needed)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from helpers import CHILD_TIMEOUT_S, QUIET, Project, second_item_waits
from machines import write_cpuinfo

mlflow = pytest.importorskip("mlflow", reason="the track extra (MLflow) is not installed")
# MLflow's own SQLite store, opened here to read it back, warns of SQLAlchemy's deprecations.
pytestmark = pytest.mark.filterwarnings("ignore:.*loader strategy is deprecated:DeprecationWarning")

SERVER = os.environ.get("MLREPRO_TEST_MLFLOW_URI", "")
BACKEND = os.environ.get("MLREPRO_TEST_MLFLOW_BACKEND", "")
needs_server = pytest.mark.skipif(
    not SERVER, reason="no tracking server: MLREPRO_TEST_MLFLOW_URI (.ci/run starts one)"
)
CPUINFO_ENV = "MLREPRO_CPUINFO"


@pytest.fixture(autouse=True)
def experiment(monkeypatch: pytest.MonkeyPatch) -> str:
    """An experiment of this test's own, in this process and those it starts."""
    name = f"mlrepro-test-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", name)
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return name


@pytest.fixture
def tiny(serial_project: Project) -> Project:
    return serial_project.make(
        {"tiny_onnx.yaml": serial_project.manifest("tiny_onnx")}, goldens=["tiny_onnx"]
    )


def runs_of(uri: str, experiment: str) -> tuple[list[Any], list[Any]]:
    """(session runs, item runs) of ``experiment`` at ``uri``, through MLflow's own client."""
    client = mlflow.MlflowClient(tracking_uri=uri)
    found = client.get_experiment_by_name(experiment)
    assert found is not None, f"no experiment {experiment}"
    runs = client.search_runs([found.experiment_id], max_results=1000)
    return (
        [r for r in runs if "mlflow.parentRunId" not in r.data.tags],
        [r for r in runs if "mlflow.parentRunId" in r.data.tags],
    )


def mlrepro(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_mlrepro.cli", *args],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        cwd=cwd,
    )


def pytest_process(project: Project, *args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", *QUIET, "-p", "no:randomly", *args],
        cwd=project.path,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@needs_server
def test_two_shards_on_two_machines_log_at_once_and_merge_from_the_server(
    tiny: Project, experiment: str, tmp_path: Path
) -> None:
    """Two sessions, shards 1/2 and 2/2 of one machine name on two simulated CPUs, log to the
    server at the same time: two session runs, each with its item nested; ``mlrepro merge
    --track --night`` prints the matrix ``mlrepro merge`` prints from the two files."""
    children = []
    for index, cpu in ((1, "intel-xeon-amx"), (2, "amd-epyc-avx2")):
        cpuinfo = write_cpuinfo(cpu, tmp_path)
        args = ["--mlrepro-shard", f"{index}/2", "--mlrepro-machine", "ci-x86"]
        args += ["--mlrepro-json", f"shard{index}.json", f"--mlrepro-track={SERVER}"]
        children.append(pytest_process(tiny, *args, env={CPUINFO_ENV: str(cpuinfo)}))
    for child in children:
        out, _ = child.communicate(timeout=CHILD_TIMEOUT_S)
        assert child.returncode == 0, out
        assert f"mlrepro: logged 1 item to MLflow at {SERVER}" in out, out
    sessions, items = runs_of(SERVER, experiment)
    assert len(sessions) == 2 and len(items) == 2
    assert sorted(i.data.params["shard"] for i in items) == ["1/2", "2/2"]
    assert {i.data.tags["mlflow.parentRunId"] for i in items} == {s.info.run_id for s in sessions}
    night = json.loads((tiny.path / "shard1.json").read_text())["created"][:10]
    from_files = mlrepro(tiny.path, "merge", "shard1.json", "shard2.json", "--csv", "f.csv")
    from_store = mlrepro(tiny.path, "merge", "--track", SERVER, "--night", night, "--csv", "s.csv")
    assert from_files.returncode == from_store.returncode == 0, from_store.stderr
    assert from_store.stdout == from_files.stdout
    assert "**PASSED**" in from_store.stdout
    assert (tiny.path / "s.csv").read_text() == (tiny.path / "f.csv").read_text()


def three_nights(project: Project) -> list[Path]:
    """A real session's results file as three nights: the third one drifted (its accuracy row
    failed, top-1 lower, its diagnosis' cause said)."""
    project.run("--mlrepro-json", "night.json").assert_outcomes(passed=1)
    base = json.loads((project.path / "night.json").read_text())
    paths = []
    for day in (1, 2, 3):
        document = json.loads(json.dumps(base))
        document["created"] = f"2026-11-0{day}T02:00:00Z"
        if day == 3:
            row = document["results"][0]
            row.update(outcome="failed", status="failed", verdict="drift", top1=50.0)
            row.update(agreement=0.5, diagnosis="colour order")
        path = project.path / f"night{day}.json"
        path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
        paths.append(path)
    return paths


@pytest.fixture(params=["sqlite", pytest.param("server", marks=needs_server)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}" if request.param == "sqlite" else SERVER


def test_history_over_three_nights_from_the_store_is_the_history_of_the_files(
    tiny: Project, store: str, experiment: str
) -> None:
    nights = three_nights(tiny)
    names = [p.name for p in nights]
    logged = mlrepro(tiny.path, "track", *names, "--uri", store)
    assert logged.returncode == 0, logged.stderr
    assert len(runs_of(store, experiment)[0]) == 3
    from_files = mlrepro(tiny.path, "history", *names)
    from_store = mlrepro(tiny.path, "history", "--track", store)
    assert from_files.returncode == from_store.returncode == 0, from_store.stderr
    assert from_store.stdout == from_files.stdout
    assert "3 nights: 2026-11-01, 2026-11-02, 2026-11-03" in from_store.stdout
    assert "first outside tolerance: 2026-11-03" in from_store.stdout
    since = mlrepro(tiny.path, "history", "--track", store, "--since", "2026-11-02")
    assert since.stdout == mlrepro(tiny.path, "history", *names[1:]).stdout
    assert since.stdout.startswith("2 nights: 2026-11-02, 2026-11-03")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    """An MLflow server of its own on the test database (killed by the test)."""
    port = free_port()
    log = (folder / "server.log").open("wb")
    command = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--workers", "1", "--backend-store-uri", BACKEND]
    command += ["--artifacts-destination", str(folder / "artifacts")]
    server = subprocess.Popen(
        command,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its workers in its process group, killed with it
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
    )
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{uri}/health", timeout=2)
            return server, uri
        except OSError:
            assert server.poll() is None, (folder / "server.log").read_text()
            time.sleep(1)
    os.killpg(server.pid, signal.SIGKILL)
    pytest.fail("the test's own MLflow server did not start in 240 s")


def session_losing_its_server(
    project: Project, server: subprocess.Popen[bytes], uri: str, passed: int, **env: str
) -> None:
    """Run the project's session, whose conftest.py kills ``server``: the session passes with
    ``passed`` items and one line says what could not be logged and how to log it later."""
    try:
        child = pytest_process(
            project,
            "--mlrepro-json",
            "results.json",
            f"--mlrepro-track={uri}",
            env={"KILL_GROUP": str(server.pid), **env},
        )
        out, _ = child.communicate(timeout=CHILD_TIMEOUT_S)
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    assert child.returncode == 0, out
    assert f"{passed} passed" in out
    (line,) = [ln for ln in out.splitlines() if "could not log the results to MLflow" in ln]
    assert line.endswith(f"log them later with: mlrepro track results.json --uri {uri}")


def track_twice(project: Project) -> None:
    """``mlrepro track`` the session's results file to the server twice: the second is a no-op."""
    for _ in range(2):
        logged = mlrepro(project.path, "track", "results.json", "--uri", SERVER)
        assert logged.returncode == 0, logged.stderr
    assert "already logged" in logged.stdout


@needs_server
def test_the_server_killed_mid_session_loses_nothing_and_track_logs_it_once(
    tiny: Project, experiment: str, tmp_path: Path
) -> None:
    """The session's server is killed while its item runs: the session passes, its results file
    is complete, one line says what could not be logged and how; ``mlrepro track`` logs the file
    to the server afterwards, twice, making one run."""
    assert BACKEND, "MLREPRO_TEST_MLFLOW_BACKEND: the server's database"
    server, uri = start_server(tmp_path)
    (tiny.path / "conftest.py").write_text(
        "import os, signal\n\n\n"
        "def pytest_runtest_call(item):\n"
        "    os.killpg(int(os.environ['KILL_GROUP']), signal.SIGKILL)\n"
    )
    session_losing_its_server(tiny, server, uri, passed=1)
    results = json.loads((tiny.path / "results.json").read_text())
    assert [r["status"] for r in results["results"]] == ["passed"]
    track_twice(tiny)
    sessions, items = runs_of(SERVER, experiment)
    assert len(sessions) == 1 and len(items) == 1
    assert items[0].data.metrics["top1"] == results["results"][0]["top1"]


@needs_server
def test_the_server_killed_after_an_item_was_logged_loses_nothing_and_track_logs_it_once(
    serial_project: Project, experiment: str, tmp_path: Path
) -> None:
    """Items are logged as they end: the server is killed once the first item's run is in it
    (the second item's call waits for it). The session passes with its file complete; ``mlrepro
    track`` logs the file twice to the server: one session run, the one cut short deleted."""
    assert BACKEND, "MLREPRO_TEST_MLFLOW_BACKEND: the server's database"
    server, uri = start_server(tmp_path)
    project = second_item_waits(
        serial_project,
        "import os, signal, time\n\nimport mlflow",
        "    client = mlflow.MlflowClient(tracking_uri=os.environ['MLFLOW_TEST_URI'])\n"
        "    for _ in range(600):\n"
        "        found = client.get_experiment_by_name(os.environ['MLFLOW_EXPERIMENT_NAME'])\n"
        "        runs = client.search_runs([found.experiment_id]) if found else []\n"
        "        if done[0] in [run.info.run_name for run in runs]:\n"
        "            break\n"
        "        time.sleep(0.2)\n"
        "    os.killpg(int(os.environ['KILL_GROUP']), signal.SIGKILL)\n",
    )
    session_losing_its_server(project, server, uri, passed=2, MLFLOW_TEST_URI=uri)
    cut, items = runs_of(SERVER, experiment)
    assert len(cut) == 1 and len(items) == 1  # the first item, logged while the session ran
    assert cut[0].data.tags["mlrepro.complete"] == "false"
    track_twice(project)
    sessions, items = runs_of(SERVER, experiment)
    assert len(sessions) == 1 and len(items) == 2
    assert sessions[0].info.run_id != cut[0].info.run_id
