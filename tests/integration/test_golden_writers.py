"""Every pair of golden writers raced on one golden folder (issue 45, point 1), the reader held at
the worst moment: after it read the golden, before it writes. A registered step in the project's
``conftest.py`` holds the first sample of a run started with ``RACE_HOLD`` set (it writes
``held`` there and waits for ``go``), so that the other run writes in between; no sleep decides
anything. Whatever the order, the golden file ends as the run that wrote it left it (never
written over from an older read), and the run that came second says so, naming the file and the
command to run again.

Also: a golden folder that is a link out of the project is refused by ``--mlrepro-enrich`` as by
``--mlrepro-update``, and the writer's lock is what makes its compare-and-swap one step.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import PREPROCESS_RGB, QUIET, BareProject

from pytest_mlrepro import goldens as golden_store
from pytest_mlrepro.errors import OutputError
from pytest_mlrepro.settings import Settings

pytest.importorskip("onnxruntime")

HOLD_STEP = """
import os
import time
from dataclasses import dataclass
from pathlib import Path

from pytest_mlrepro import Step, Tensor, register_step


@register_step
@dataclass(frozen=True)
class Hold(Step):
    '''Passes its input on; in a run with RACE_HOLD set, the first sample waits for RACE_HOLD/go
    after writing RACE_HOLD/held (the golden was read before the first sample).'''

    op = "hold"

    def apply(self, t: Tensor) -> Tensor:
        folder = os.environ.get("RACE_HOLD")
        if folder and not (Path(folder) / "held").exists():
            (Path(folder) / "held").write_text("")
            deadline = time.monotonic() + 300  # a hang guard, never reached in a passing run
            while not (Path(folder) / "go").exists():
                assert time.monotonic() < deadline, "never released"
                time.sleep(0.02)
        return t
"""
WAIT_S = 300  # a hang guard for a loaded machine: a passing run never waits that long


def project(bare: BareProject) -> BareProject:
    (bare.path / "conftest.py").write_text(HOLD_STEP)
    bare.manifest("tiny_onnx", decode=PREPROCESS_RGB + "\n              - hold")
    return bare


def older_golden(bare: BareProject) -> bytes:
    """The golden recorded, then made as an older release wrote it (no pixel identities, no
    layer fingerprints, no manifest file): an update rewrites it (manifest file recorded) and an
    enrichment adds evidence to it. Its bytes."""
    bare.run("--mlrepro-update").assert_outcomes(passed=1)
    path = bare.golden("tiny_onnx")
    golden = golden_store.read(path)
    assert golden is not None
    probes = {k: v for k, v in (golden.probes or {}).items() if k != "layers"}
    older = dataclasses.replace(golden, probes=probes, pixels=None, manifest_file=None)
    golden_store.write(path, older)
    return path.read_bytes()


class Held:
    """A run of pytest in a child process, held after it read the golden until :meth:`finish`."""

    def __init__(self, bare: BareProject, *args: str) -> None:
        self.folder = bare.path.parent / f"race-{bare.path.name}"
        self.folder.mkdir()
        env = {**os.environ, "RACE_HOLD": str(self.folder)}
        self.child = subprocess.Popen(
            [sys.executable, "-m", "pytest", *QUIET, "-p", "no:randomly", "-rA", *args],
            cwd=bare.path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + WAIT_S
        while not (self.folder / "held").exists():
            if self.child.poll() is not None:
                out = self.child.stdout.read().decode() if self.child.stdout else ""
                raise AssertionError(f"the held run ended before its first sample:\n{out}")
            assert time.monotonic() < deadline, "the held run never reached its first sample"
            time.sleep(0.05)

    def finish(self) -> tuple[int, str]:
        (self.folder / "go").write_text("")
        out, _ = self.child.communicate(timeout=WAIT_S)
        return self.child.returncode, out.decode()


def test_update_and_update_the_second_is_refused_and_the_first_golden_stays(
    bare: BareProject,
) -> None:
    project(bare)
    path = bare.golden("tiny_onnx")
    held = Held(bare, "--mlrepro-update")  # read: no golden
    bare.run("--mlrepro-update").assert_outcomes(passed=1)  # records one
    first = path.read_bytes()
    status, out = held.finish()
    assert status == 1, out
    assert path.read_bytes() == first
    assert "golden/tiny_onnx.json: the golden was created since this run read it" in out
    assert "run `pytest manifests/tiny_onnx.yaml --mlrepro-update` again" in out


def test_enrich_held_while_an_update_writes_is_refused_and_the_update_stays(
    bare: BareProject,
) -> None:
    """The issue's case: the enrichment read the older golden; the update's golden stays."""
    project(bare)
    older = older_golden(bare)
    path = bare.golden("tiny_onnx")
    held = Held(bare, "--mlrepro-enrich")
    update = bare.run("--mlrepro-update")
    update.assert_outcomes(passed=1)
    update.stdout.fnmatch_lines(["*golden updated (manifest file recorded)*"])
    updated = path.read_bytes()
    assert updated != older and json.loads(updated)["manifest_file"] == "manifests/tiny_onnx.yaml"
    status, out = held.finish()
    assert path.read_bytes() == updated, "the update's golden is never written over"
    assert "golden not enriched: golden/tiny_onnx.json: the golden changed since this run" in out
    assert "run `pytest manifests/tiny_onnx.yaml --mlrepro-enrich` again" in out
    assert status == 0, out  # it compared with what it read, and passed: nothing was lost


def test_update_held_while_an_enrichment_writes_is_refused_and_the_enrichment_stays(
    bare: BareProject,
) -> None:
    project(bare)
    older = older_golden(bare)
    path = bare.golden("tiny_onnx")
    held = Held(bare, "--mlrepro-update")
    bare.run("--mlrepro-enrich").stdout.fnmatch_lines(["*pass (golden enriched)*"])
    enriched = path.read_bytes()
    assert enriched != older and "pixels" in json.loads(enriched)
    status, out = held.finish()
    assert status == 1, out
    assert path.read_bytes() == enriched
    assert "golden/tiny_onnx.json: the golden changed since this run read it" in out
    assert "run `pytest manifests/tiny_onnx.yaml --mlrepro-update` again" in out


def test_enrich_and_enrich_the_second_is_refused_and_the_first_stays(bare: BareProject) -> None:
    project(bare)
    older_golden(bare)
    path = bare.golden("tiny_onnx")
    held = Held(bare, "--mlrepro-enrich")
    bare.run("--mlrepro-enrich").stdout.fnmatch_lines(["*pass (golden enriched)*"])
    enriched = path.read_bytes()
    status, out = held.finish()
    assert path.read_bytes() == enriched
    assert "golden not enriched: golden/tiny_onnx.json: the golden changed since this run" in out
    assert status == 0, out


def test_shards_that_read_two_recordings_never_merge_into_a_verdict(bare: BareProject) -> None:
    """Shards do not write goldens; an update between two shard items' reads must not give a
    verdict compared half with one recording and half with the other."""
    project(bare)
    older_golden(bare)
    path = bare.golden("tiny_onnx")
    held = Held(bare, "--mlrepro-shards", "2")
    bare.run("--mlrepro-update").assert_outcomes(passed=1)
    updated = path.read_bytes()
    status, out = held.finish()
    assert path.read_bytes() == updated
    assert status == 1, out
    assert "the shards were measured on different versions of the golden (golden_digest" in out


def test_enrich_refuses_a_golden_folder_that_links_outside_the_project(
    bare: BareProject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    bare.manifest("tiny_onnx")
    bare.run("--mlrepro-update").assert_outcomes(passed=1)
    outside = tmp_path_factory.mktemp("elsewhere")
    shutil.copytree(bare.path / "golden", outside, dirs_exist_ok=True)
    before = {p.name: p.read_bytes() for p in outside.iterdir()}
    shutil.rmtree(bare.path / "golden")
    (bare.path / "golden").symlink_to(outside, target_is_directory=True)
    result = bare.run("--mlrepro-enrich")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"*the golden directory {bare.path / 'golden'} leads (through a symbolic link) "
            f"to {outside.resolve()}, outside the project*--mlrepro-enrich would write goldens "
            "there*Nothing was run.*"
        ]
    )
    assert {p.name: p.read_bytes() for p in outside.iterdir()} == before


def test_the_writer_itself_refuses_a_golden_folder_linked_outside(tmp_path: Path) -> None:
    """Every writer, not only the plugin's options: the golden store refuses it too."""
    project_root, outside = tmp_path / "project", tmp_path / "outside"
    project_root.mkdir()
    outside.mkdir()
    (project_root / "golden").symlink_to(outside, target_is_directory=True)
    settings = Settings.for_project(project_root, cache_dir=tmp_path / "cache")
    with pytest.raises(OutputError, match=r"leads \(through a symbolic link\) to .*outside"):
        golden_store.write_golden(
            settings.golden_dir / "x.json", b"{}", settings, golden_store.Based(None)
        )
    assert list(outside.iterdir()) == []


def test_the_lock_makes_the_compare_and_swap_one_step(tmp_path: Path) -> None:
    """A writer that reached the lock while another holds it writes only after, and then
    compares with what the holder wrote: refused, the holder's file intact."""
    settings = Settings.for_project(tmp_path, cache_dir=tmp_path / "cache")
    path = settings.golden_dir / "x.json"
    path.parent.mkdir()
    path.write_bytes(b"first")
    read = golden_store.Based(golden_store.current_digest(path, settings.golden_dir))
    outcome: list[BaseException | None] = []
    started = threading.Event()

    def writer() -> None:
        started.set()
        try:
            golden_store.write_golden(path, b"second", settings, read)
            outcome.append(None)
        except OutputError as exc:
            outcome.append(exc)

    with golden_store.golden_lock(settings, path):
        thread = threading.Thread(target=writer)
        thread.start()
        assert started.wait(WAIT_S)
        thread.join(0.5)
        assert thread.is_alive() and path.read_bytes() == b"first", "it waits for the lock"
        path.write_bytes(b"the holder's")  # what the holder writes under the lock
    thread.join(WAIT_S)
    (error,) = outcome
    assert isinstance(error, golden_store.GoldenChanged), error
    assert path.read_bytes() == b"the holder's"
    # Based on what is there now, the same write goes through.
    now = golden_store.Based(golden_store.current_digest(path, settings.golden_dir))
    golden_store.write_golden(path, b"second", settings, now)
    assert path.read_bytes() == b"second"
