"""Results in a tracking store (issue 42; docs/tracking.md): ``--mlrepro-track`` logs a session
to MLflow, read back here through MLflow's own client, never through the plugin's code. These
use the embedded SQLite store in the test's own folder (no server: tests/integration/
test_tracking_server.py runs against a real one)."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import CHILD_TIMEOUT_S, Project, second_item_waits

mlflow = pytest.importorskip("mlflow", reason="the track extra (MLflow) is not installed")
# MLflow's own SQLite store, opened here to read it back, warns of SQLAlchemy's deprecations.
pytestmark = pytest.mark.filterwarnings("ignore:.*loader strategy is deprecated:DeprecationWarning")

ITEM = "manifests/tiny_onnx.yaml::accuracy[cpu]"


@pytest.fixture(autouse=True)
def _no_telemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    """No usage data from the tests, and no tracking URI or experiment of the host's."""
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_NAME"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def tiny(serial_project: Project) -> Project:
    return serial_project.make(
        {"tiny_onnx.yaml": serial_project.manifest("tiny_onnx")}, goldens=["tiny_onnx"]
    )


def runs_of(uri: str) -> tuple[Any, list[Any], list[Any]]:
    """(client, session runs, item runs) of the experiment ``mlrepro`` at ``uri``."""
    client = mlflow.MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("mlrepro")
    assert experiment is not None, "no experiment 'mlrepro' in the store"
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    sessions = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    items = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    return client, sessions, items


def test_the_sqlite_default_holds_one_run_per_session_with_the_items_nested(tiny: Project) -> None:
    result = tiny.run("--mlrepro-json", "results.json", "--mlrepro-track")
    result.assert_outcomes(passed=1)
    store = tiny.path / "mlflow.db"
    assert store.is_file()  # MLflow's own default name, in the project root
    result.stdout.fnmatch_lines([f"mlrepro: logged 1 item to MLflow at sqlite:///{store} (run *)"])
    row = next(r for r in json.loads((tiny.path / "results.json").read_text())["results"])
    client, sessions, items = runs_of(f"sqlite:///{store}")
    (session,) = sessions
    (item,) = items
    assert session.info.status == item.info.status == "FINISHED"
    assert item.data.tags["mlflow.parentRunId"] == session.info.run_id
    assert item.info.run_name == ITEM
    assert item.data.metrics["top1"] == row["top1"]
    assert item.data.metrics["top5"] == row["top5"]
    assert item.data.metrics["agreement"] == row["agreement"]
    assert item.data.metrics["max_score_diff"] == row["max_score_diff"]
    for phase, times in row["timing"]["phases"].items():
        assert item.data.metrics[f"phase.{phase}.wall"] == times["wall"]
    assert item.data.params["manifest_digest"] == row["manifest_digest"]
    assert item.data.params["framework"] == "onnxruntime"
    assert item.data.params["framework_version"] == row["framework_version"]
    assert item.data.params["machine_key"] == row["hardware_slug"]
    model = row["manifest_content"]["model"]["file"]["sha256"]
    assert item.data.params["model_sha256"] == model
    assert len(item.data.params["preprocessing_digest"]) == 64
    assert item.data.tags["verdict"] == "pass" and item.data.tags["status"] == "passed"
    # The results file and the page are the session run's artifacts; the file is the one written.
    names = {a.path for a in client.list_artifacts(session.info.run_id)}
    assert names == {"results.json", "report.html"}
    local = Path(client.download_artifacts(session.info.run_id, "results.json", str(tiny.path)))
    assert local.read_bytes() == (tiny.path / "results.json").read_bytes()
    page = client.download_artifacts(session.info.run_id, "report.html", str(tiny.path))
    assert "<html" in Path(page).read_text().lower()
    assert session.data.tags["mlrepro.machine"] == session.data.params["machine"]
    # A second session: a second run, with its own item.
    tiny.run("--mlrepro-track").assert_outcomes(passed=1)
    _, sessions, items = runs_of(f"sqlite:///{store}")
    assert len(sessions) == 2 and len(items) == 2
    assert {i.data.tags["mlflow.parentRunId"] for i in items} == {s.info.run_id for s in sessions}


def test_under_xdist_the_controller_logs_one_run_with_every_workers_items(
    serial_project: Project,
) -> None:
    project = serial_project.make(
        {
            "tiny_onnx.yaml": serial_project.manifest("tiny_onnx"),
            "tiny_loose.yaml": serial_project.manifest("tiny_loose"),
        },
        goldens=["tiny_onnx", "tiny_loose"],
    )
    result = project.run("-n", "2", "--mlrepro-track", subprocess=True)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["mlrepro: logged 2 items to MLflow at sqlite:///*"])
    _, sessions, items = runs_of(f"sqlite:///{project.path / 'mlflow.db'}")
    assert len(sessions) == 1
    assert sorted(i.info.run_name for i in items) == [
        "manifests/tiny_loose.yaml::accuracy[cpu]",
        "manifests/tiny_onnx.yaml::accuracy[cpu]",
    ]


def test_the_uri_given_and_the_ini_key(tiny: Project, tmp_path: Path) -> None:
    """A URI given wins over MLFLOW_TRACKING_URI and the ini key; the ini key alone tracks."""
    elsewhere = tmp_path / "elsewhere.db"
    tiny.run(f"--mlrepro-track=sqlite:///{elsewhere}").assert_outcomes(passed=1)
    _, sessions, _ = runs_of(f"sqlite:///{elsewhere}")
    assert len(sessions) == 1 and not (tiny.path / "mlflow.db").exists()
    ini = tiny.path / "pytest.ini"
    ini.write_text(ini.read_text() + f"mlrepro_track = sqlite:///{tiny.path / 'ini.db'}\n")
    tiny.run().assert_outcomes(passed=1)
    assert len(runs_of(f"sqlite:///{tiny.path / 'ini.db'}")[1]) == 1


def test_credentials_are_never_written_nor_shown(
    tiny: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that is down, its URI with a user name and password, and MLflow's password
    variable set: neither appears in the output, the results file or the command to log it."""
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "envsecret123")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    result = tiny.run(
        "--mlrepro-json", "results.json", f"--mlrepro-track=http://alice:pw4321@127.0.0.1:{port}"
    )
    assert result.ret == 0
    result.assert_outcomes(passed=1)
    shown = "\n".join(result.outlines + result.errlines)
    written = (tiny.path / "results.json").read_text()
    for secret in ("pw4321", "alice", "envsecret123"):
        assert secret not in shown and secret not in written
    uri = f"http://127.0.0.1:{port}"
    result.stdout.fnmatch_lines(
        [f"*could not log the results to MLflow ({uri}: *: mlrepro track results.json --uri {uri}"]
    )


def test_a_path_taken_for_the_uri_is_a_usage_error(tiny: Project) -> None:
    """``pytest --mlrepro-track manifests/``: argparse gives the path to the option."""
    result = tiny.run("--mlrepro-track", "manifests/")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--mlrepro-track 'manifests/': not a tracking URI*"])
    assert not (tiny.path / "mlflow.db").exists()


def test_a_session_without_tracking_imports_no_mlflow(tiny: Project) -> None:
    (tiny.path / "conftest.py").write_text(
        "import json, sys\n\n\n"
        "def pytest_unconfigure(config):\n"
        "    with open('modules.json', 'w') as fh:\n"
        "        json.dump(sorted(m for m in sys.modules if m.split('.')[0] == 'mlflow'), fh)\n"
    )
    tiny.run("--mlrepro-json", "r.json", subprocess=True).assert_outcomes(passed=1)
    assert json.loads((tiny.path / "modules.json").read_text()) == []
    assert not (tiny.path / "mlflow.db").exists()


def test_a_store_that_refuses_keeps_the_results_and_says_how_to_log_them(
    tiny: Project, tmp_path: Path
) -> None:
    """The store cannot be written (its folder is a file): the verdict and exit status stand,
    the results file is kept, and the command printed logs it; run twice, it logs it once."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    bad = f"sqlite:///{blocker}/store.db"
    result = tiny.run(f"--mlrepro-track={bad}")
    assert result.ret == 0
    result.assert_outcomes(passed=1)
    (line,) = [ln for ln in result.outlines if "could not log the results to MLflow" in ln]
    kept = tiny.path / ".mlrepro" / "untracked"
    (kept_file,) = kept.iterdir()
    assert f"they are kept in .mlrepro/untracked/{kept_file.name}" in line
    command = line.split("log them later with: ", 1)[1]
    assert command == f"mlrepro track .mlrepro/untracked/{kept_file.name} --uri {bad}"
    good = f"sqlite:///{tmp_path / 'later.db'}"
    args = ["track", str(kept_file), "--uri", good]
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-m", "pytest_mlrepro.cli", *args],
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
            cwd=tiny.path,
            env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"},
        )
        assert done.returncode == 0, done.stderr
    assert "already logged" in done.stdout
    _, sessions, items = runs_of(good)
    assert len(sessions) == 1 and len(items) == 1
    assert sessions[0].data.tags["mlrepro.results_file"] == str(kept_file)


def test_a_run_cut_short_is_replaced_by_the_whole_file(tmp_path: Path) -> None:
    """A session run of the file without ``mlrepro.complete`` (the store went away mid-way) is
    deleted, and the file logged whole: one active run, with every item."""
    old = Path(__file__).resolve().parents[1] / "data" / "old" / "results.json"
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    client = mlflow.MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("mlrepro", (tmp_path / "mlruns").as_uri())
    digest = hashlib.sha256(old.read_bytes()).hexdigest()
    partial = client.create_run(
        experiment, tags={"mlrepro.kind": "session", "mlrepro.results_sha256": digest}
    ).info.run_id
    done = subprocess.run(
        [sys.executable, "-m", "pytest_mlrepro.cli", "track", str(old), "--uri", uri],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        cwd=tmp_path,
        env={**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"},
    )
    assert done.returncode == 0, done.stderr
    _, sessions, items = runs_of(uri)
    (session,) = sessions
    assert session.info.run_id != partial and session.data.tags["mlrepro.complete"] == "true"
    assert client.get_run(partial).info.lifecycle_stage == "deleted"
    assert len(items) == len(json.loads(old.read_text())["results"])


def test_items_are_in_the_store_while_the_session_runs(serial_project: Project) -> None:
    """The second item's call waits (a bounded poll of the database, read only) until the first
    item's run is in the store: logged while the session runs, not at its end."""
    project = second_item_waits(
        serial_project,
        "import json, sqlite3, time",
        "    database = f'file:{item.config.rootpath}/mlflow.db?mode=ro'\n"
        "    names = []\n"
        "    for _ in range(600):  # the logging process's MLflow import and store: seconds\n"
        "        try:  # read only, never made here (the logging process makes it)\n"
        "            with sqlite3.connect(database, uri=True) as db:\n"
        "                names = [name for (name,) in db.execute('SELECT name FROM runs')]\n"
        "        except sqlite3.Error:\n"
        "            pass\n"
        "        if done[0] in names:\n"
        "            break\n"
        "        time.sleep(0.2)\n"
        "    with open('seen.json', 'w') as fh:\n"
        "        json.dump({'first': done[0], 'seen': names}, fh)\n",
    )
    result = project.run("--mlrepro-track", subprocess=True)
    result.assert_outcomes(passed=2)
    seen = json.loads((project.path / "seen.json").read_text())
    assert seen["first"] in seen["seen"]
    _, sessions, items = runs_of(f"sqlite:///{project.path / 'mlflow.db'}")
    assert len(sessions) == 1 and len(items) == 2
    assert sessions[0].data.tags["mlrepro.complete"] == "true"


class Counted:
    """MLflow's own client of a real store, its calls counted by name."""

    def __init__(self, uri: str) -> None:
        self.client = mlflow.MlflowClient(tracking_uri=uri)
        self.calls: dict[str, int] = {}
        made.append(self)

    def __getattr__(self, name: str) -> Any:
        call = getattr(self.client, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            return call(*args, **kwargs)

        return counted


made: list[Counted] = []


def test_an_item_is_three_calls_and_a_session_cut_short_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each item run (and the session's): made with its tags, one ``log_batch``, ended. A session
    run that items were logged to until the store went away (``mlrepro.complete`` false) is
    deleted when its results file is logged later: one run, every item once."""
    from pytest_mlrepro.results import load_results
    from pytest_mlrepro.tracking import _log, item_run, log_results

    old = Path(__file__).resolve().parents[1] / "data" / "old" / "results.json"
    document = load_results(old)
    uri = f"sqlite:///{tmp_path / 'store.db'}"
    monkeypatch.setattr(_log, "client", Counted)
    made.clear()
    cut = _log.Writer(uri)  # a session's logging, its store gone after the first item
    cut.add(0, item_run(document, document.results[0]))
    cut.pool.shutdown()  # the item in, then nothing more
    logged = log_results(uri, old.read_bytes(), document)
    count = len(document.results)
    calls = made[-1].calls
    assert calls["create_run"] == calls["log_batch"] == calls["set_terminated"] == count + 1
    assert "set_tag" not in calls  # mlrepro.complete: in the session run's one batch
    _, sessions, items = runs_of(uri)
    (session,) = sessions
    assert session.info.run_id == logged.run_id
    assert session.data.tags["mlrepro.complete"] == "true"
    assert sorted(i.info.run_name for i in items) == sorted(r.nodeid for r in document.results)
