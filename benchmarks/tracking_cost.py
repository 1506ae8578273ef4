"""What logging a session to a tracking store costs (docs/tracking.md#cost, issue 42): a results
file of N accuracy items (copies, under their own node ids, of the first row of ``tests/data/old/
results.json``, a real session's file), to each store:

  fresh     a new SQLite file (MLflow makes its tables: the first session's cost);
  existing  the same file again;
  server    ``mlflow server`` on 127.0.0.1, SQLite behind it (``--server``: started here).

Two ways, each in a fresh process, per store and round:

  at end    ``log_results`` (what ``mlrepro track`` does, and sessions did before): MLflow's
            import, the store's opening, then seconds per MLflow call (summed over the threads),
            and the whole logging;
  live      the session's own path (``tracking.Live``): the logging process started, then N
            items of a simulated evaluation (``--gap-ms`` of CPU each, in this process), each
            item's run handed over as it ends, then ``finish``. Printed: the simulated session's
            wall time less N gaps run without tracking (what tracking added), the tail
            (``finish``), and the seconds of the hand-overs.

    python benchmarks/tracking_cost.py [--items 100] [--rounds 3] [--gap-ms 50] [--server]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]


def document(count: int) -> Any:
    from pytest_mlrepro.results import created_now, load_results

    old = load_results(REPO / "tests" / "data" / "old" / "results.json")
    row = old.results[0]
    rows = tuple(dataclasses.replace(row, nodeid=f"{row.nodeid}-{i}") for i in range(count))
    return dataclasses.replace(old, results=rows, created=created_now())


def busy(seconds: float) -> None:
    """CPU work standing for an item's evaluation."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def at_end(uri: str, count: int) -> dict[str, float]:
    """``log_results`` in this (fresh) process, its MLflow calls timed by name."""
    from pytest_mlrepro.results import results_text
    from pytest_mlrepro.tracking import _log, log_results

    start = time.perf_counter()
    import mlflow  # noqa: F401

    out: dict[str, float] = defaultdict(float)
    out["import"] = time.perf_counter() - start
    make = _log.client

    class Timed:
        def __init__(self, uri: str) -> None:
            began = time.perf_counter()
            self.inner = make(uri)
            out["open"] += time.perf_counter() - began

        def __getattr__(self, name: str) -> Any:
            call = getattr(self.inner, name)

            def timed(*args: Any, **kwargs: Any) -> Any:
                began = time.perf_counter()
                try:
                    return call(*args, **kwargs)
                finally:
                    out[f"call {name}"] += time.perf_counter() - began

            return timed

    _log.client = Timed  # type: ignore[assignment]
    made = document(count)
    began = time.perf_counter()
    log_results(uri, (results_text(made) + "\n").encode(), made)
    out["logging"] = time.perf_counter() - began
    return out


def live(uri: str, count: int, gap: float) -> dict[str, float]:
    """The session's path, with ``gap`` seconds of CPU per item."""
    from pytest_mlrepro.results import results_text
    from pytest_mlrepro.tracking import Live, file_digest, item_run, session_run

    made = document(count)
    runs = [item_run(made, row) for row in made.results]
    data = (results_text(made) + "\n").encode()
    start = time.perf_counter()
    for _ in range(count):
        busy(gap)
    alone = time.perf_counter() - start
    start = time.perf_counter()
    handing = 0.0
    logger = Live(uri)
    for run in runs:
        busy(gap)
        began = time.perf_counter()
        logger.add(run)
        handing += time.perf_counter() - began
    ended = time.perf_counter()
    logger.finish(session_run(made, file_digest(data), "results.json"), runs, data, None)
    done = time.perf_counter()
    return {
        "added": done - start - alone,
        "tail": done - ended,
        "hand-overs": handing,
        "session alone": alone,
    }


def child(how: str, uri: str, count: int, gap: float) -> dict[str, float]:
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    args = [sys.executable, __file__, "--child", how, uri, str(count), str(gap)]
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return dict(json.loads(done.stdout.splitlines()[-1]))


def server(folder: Path) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port"]
    command += [str(port), "--backend-store-uri", f"sqlite:///{folder / 'server.db'}"]
    command += ["--artifacts-destination", str(folder / "artifacts")]
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    process = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,  # its uvicorn workers killed with it
    )
    uri = f"http://127.0.0.1:{port}"
    for _ in range(240):
        try:
            urllib.request.urlopen(f"{uri}/health", timeout=2)
            return process, uri
        except OSError:
            time.sleep(1)
    raise SystemExit("the MLflow server did not start in 240 s")


def main() -> int:
    if sys.argv[1:2] == ["--child"]:
        how, uri, count, gap = sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
        result = at_end(uri, count) if how == "at end" else live(uri, count, gap)
        print(json.dumps(result))
        return 0
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--gap-ms", type=float, default=50.0)
    parser.add_argument("--server", action="store_true")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}, {os.cpu_count()} cores")
    folder = Path(tempfile.mkdtemp(prefix="tracking-cost-"))
    process, remote = server(folder) if args.server else (None, "")
    seen: dict[tuple[str, str], list[dict[str, float]]] = defaultdict(list)
    try:
        for round_ in range(args.rounds):
            for how in ("at end", "live"):
                store = folder / f"{how.replace(' ', '-')}-{round_}.db"
                stores = [("fresh", f"sqlite:///{store}"), ("existing", f"sqlite:///{store}")]
                for name, uri in stores + ([("server", remote)] if remote else []):
                    result = child(how, uri, args.items, args.gap_ms / 1000)
                    seen[(how, name)].append(result)
                    shown = ", ".join(f"{k} {v:.2f}" for k, v in sorted(result.items()))
                    print(f"round {round_ + 1} {how:6} {name:8} {shown}", flush=True)
    finally:
        if process is not None:
            os.killpg(process.pid, signal.SIGKILL)
    print(f"\nseconds, min / median / max over {args.rounds} rounds, {args.items} items:")
    for (how, name), results in seen.items():
        for key in sorted(results[0]):
            values = [r.get(key, 0.0) for r in results]
            low, mid, high = min(values), statistics.median(values), max(values)
            print(f"  {how:6} {name:8} {key:22} {low:6.2f} {mid:6.2f} {high:6.2f}")
    print(f"load average at end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
