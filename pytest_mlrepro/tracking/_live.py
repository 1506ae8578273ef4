"""A session's results logged live by their own process (``pytest_mlrepro.tracking._live``): MLflow
stays out of the test process; a store that is away costs nothing until the session's end."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import site
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ._fields import RunData
from ._log import Logged, TrackingError, Writer, bounded_requests, failure, sqlite_write_ahead
from ._uri import TRACKING_URI_ENV, shown_uri

FINISH = "finish.json"
RESULT = "result.json"
POLL_S = 0.05


def _write(path: Path, value: Any) -> None:
    """Whole or not at all: the other process sees a file only once it is complete."""
    part = path.with_suffix(".part")
    part.write_text(json.dumps(value))
    os.replace(part, path)


class Live:
    """The session's side: the logging process started, fed item runs, finished."""

    def __init__(self, uri: str) -> None:
        self.uri, self.items, self.done = uri, 0, False
        self.failed: str | None = None  # what went wrong on this side: said at the end
        self.process: subprocess.Popen[bytes] | None = None
        # The same pytest_mlrepro as the session's (a checkout's, say); an installed one is found
        # anyway, and its site-packages put on PYTHONPATH would come before the standard library.
        root = str(Path(__file__).resolve().parents[2])
        installed = root in {*site.getsitepackages(), site.getusersitepackages()}
        path = os.pathsep.join(
            filter(None, [None if installed else root, os.environ.get("PYTHONPATH")])
        )
        try:
            self.folder = Path(tempfile.mkdtemp(prefix="mlrepro-track-"))
            with (self.folder / "stderr").open("wb") as stderr:
                self.process = subprocess.Popen(
                    [sys.executable, "-m", __name__, str(self.folder)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=stderr,
                    # The URI in the environment, not the command line (which others may read).
                    env={**os.environ, TRACKING_URI_ENV: uri, "PYTHONPATH": path},
                )
        except OSError as exc:
            self.failed = f"the logging process could not start: {exc}"

    def add(self, run: RunData) -> None:
        if self.failed is None:
            try:
                self.items += 1
                _write(self.folder / f"item-{self.items:09d}.json", dataclasses.asdict(run))
            except OSError as exc:
                self.failed = f"an item could not be handed to the logging process: {exc}"

    def finish(
        self, session: RunData, items: list[RunData], data: bytes, page: Path | None
    ) -> Logged:
        """Waits for the process to log the rest; TrackingError when the store could not."""
        try:
            if self.failed is not None or self.process is None:
                raise TrackingError(f"{shown_uri(self.uri)}: {self.failed}")
            (self.folder / "results.json").write_bytes(data)
            runs = [dataclasses.asdict(run) for run in items]
            finish = {"session": dataclasses.asdict(session), "items": runs}
            _write(self.folder / FINISH, {**finish, "page": page and str(page)})
            result = self.folder / RESULT
            # The result, not the process's end: MLflow's teardown is no cost of the session.
            while not result.is_file() and self.process.poll() is None:
                time.sleep(POLL_S / 5)
            if not result.is_file():
                said = (self.folder / "stderr").read_text(errors="replace").strip()
                last = said.splitlines()[-1] if said else f"exit status {self.process.returncode}"
                raise TrackingError(f"{shown_uri(self.uri)}: the logging process ended: {last}")
            self.done = True  # left to end by itself
            done = json.loads(result.read_text())
            if "error" in done:
                raise TrackingError(done["error"])
            return Logged(done["run_id"], len(items), already=False)
        except OSError as exc:
            raise TrackingError(f"{shown_uri(self.uri)}: {exc}") from None
        finally:
            self.close()

    def close(self) -> None:
        if self.process is not None and not self.done and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        if self.process is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


def follow(writer: Writer, folder: Path, parent: int) -> dict[str, Any] | None:
    """Each item run logged as its file appears (the store opened by the first), until the
    session's finish file (None: the session is gone)."""
    logged = 0
    while True:
        finished = (folder / FINISH).is_file()  # before the items: none written before is missed
        while (path := folder / f"item-{logged + 1:09d}.json").is_file():
            writer.add(logged, RunData(**json.loads(path.read_text())))
            logged += 1
        if finished:
            return dict(json.loads((folder / FINISH).read_text()))
        if os.getppid() != parent:
            return None
        time.sleep(POLL_S)


def main(folder: Path) -> None:
    uri, parent = os.environ[TRACKING_URI_ENV], os.getppid()
    writer = Writer(uri)
    try:
        with bounded_requests(), sqlite_write_ahead(uri):
            finish = follow(writer, folder, parent)
            if finish is None:
                return
            page = Path(finish["page"]) if finish["page"] else None
            items = [RunData(**run) for run in finish["items"]]
            data = (folder / "results.json").read_bytes()
            run_id = writer.finish(RunData(**finish["session"]), items, data, page)
            # Said before the SQLite log is written back (sqlite_write_ahead): not the session's.
            _write(folder / RESULT, {"run_id": run_id})
    except Exception as exc:
        with contextlib.suppress(OSError):
            _write(folder / RESULT, {"error": str(failure(uri, exc))})
    finally:
        writer.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
