"""Unit tests of the hardening helpers that the plugin-level tests exercise only in part: the
golden store's audit, the input layout check, the time limit, and the .pt2 vetting."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from pytest_mlrepro import _files
from pytest_mlrepro.errors import IntegrityError
from pytest_mlrepro.goldens import _audit as golden_audit
from pytest_mlrepro.plugin._limits import ItemTimeout, time_limit
from pytest_mlrepro.runners._signature import layout_mismatch

# --- the golden store's audit --------------------------------------------------------------------


def test_conflicts_are_golden_paths_claimed_by_two_manifests(tmp_path: Path) -> None:
    shared, own = tmp_path / "shared.json", tmp_path / "own.json"
    claims = [("b.yaml", shared), ("a.yaml", shared), ("c.yaml", own), ("a.yaml", shared)]
    assert golden_audit.golden_conflicts(claims) == {shared: ["a.yaml", "b.yaml"]}
    message = golden_audit.conflict_message("a.yaml", "golden/shared.json", ["b.yaml"])
    assert message.startswith("a.yaml: its golden golden/shared.json is also the golden of b.yaml")


def test_unused_goldens_are_top_level_json_and_latency_folders_nobody_names(
    tmp_path: Path,
) -> None:
    golden = tmp_path / "golden"
    (golden / "latency" / "kept").mkdir(parents=True)
    (golden / "latency" / "retired").mkdir()
    for name in ("used.json", "old.json", ".used.json.abc.tmp", "notes.txt"):
        (golden / name).write_text("{}")
    (golden / "sub").mkdir()
    (golden / "sub" / "elsewhere.json").write_text("{}")  # a custom golden: path, never listed
    unused = golden_audit.unused_goldens(golden, [golden / "used.json"], ["kept"])
    assert unused == [golden / "old.json", golden / "latency" / "retired"]
    assert golden_audit.unused_goldens(tmp_path / "absent", [], []) == []


def test_stale_temp_files_are_the_unlocked_old_ones(tmp_path: Path) -> None:
    target = tmp_path / "g.json"
    old, fresh, locked = (
        tmp_path / f".g.json.{n}.tmp" for n in ("old00000", "new00000", "lck0000")
    )
    for path in (old, fresh, locked):
        path.write_text("partial")
    past = time.time() - 3600
    os.utime(old, (past, past))
    os.utime(locked, (past, past))
    import fcntl

    with open(locked, "rb") as holder:  # a live writer holds its lock
        fcntl.flock(holder.fileno(), fcntl.LOCK_EX)
        # flock locks belong to open files: another open file of this process conflicts too
        assert golden_audit.stale_temp_files(tmp_path) == [old]
        assert _files.remove_stale_temp_files(target) == [old]
    assert not old.exists() and fresh.exists() and locked.exists()


def test_a_write_leaves_no_temporary_file_and_replaces_atomically(tmp_path: Path) -> None:
    target = tmp_path / "g.json"
    _files.atomic_write_bytes(target, b"one")
    inode = target.stat().st_ino
    _files.atomic_write_bytes(target, b"two")
    assert target.read_bytes() == b"two" and target.stat().st_ino != inode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.json"]


# --- the input layout check ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "layout", "says"),
    [
        (["batch", 3, "h", "w"], "NHWC", "channels first (NCHW), but the manifest declares NHWC"),
        (["batch", 3, 224, 224], "NHWC", "channels first (NCHW)"),
        (["batch", "h", "w", 3], "NCHW", "channels last (NHWC), but the manifest declares NCHW"),
        ([1, 224, 224, 1], "NCHW", "channels last (NHWC)"),
        (["batch", 3, "h", "w"], "NCHW", None),
        (["batch", "h", "w", 3], "NHWC", None),
        (["n", "c", "h", "w"], "NHWC", None),  # nothing fixed: nothing to tell
        ([1, 3, 3, 3], "NHWC", None),  # both axes 3: ambiguous
        (["batch", 1000], "NCHW", None),
    ],
)
def test_layout_mismatch(shape: list[object], layout: str, says: str | None) -> None:
    found = layout_mismatch(shape, layout, "input")
    assert (found is None) == (says is None), found
    if says is not None:
        assert found is not None and says in found


# --- the time limit -----------------------------------------------------------------------------


def test_the_soft_limit_interrupts_python_code_and_then_disarms() -> None:
    start = time.monotonic()
    with (
        pytest.raises(ItemTimeout, match=r"the item did not finish within its time limit of 0.2 s"),
        time_limit(0.2, "the item"),
    ):
        while True:
            time.sleep(0.01)
    assert time.monotonic() - start < 5
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.default_int_handler, None)
    with time_limit(5, "quick"):  # finished in time: nothing raised, nothing left armed
        pass
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_the_soft_limit_waits_for_an_import_to_finish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An import interrupted half-way would leave a broken module for every later item."""
    (tmp_path / "slow_module_for_limits.py").write_text(
        "import time\nfor _ in range(40):\n    time.sleep(0.01)\nDONE = True\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ItemTimeout), time_limit(0.1, "importing"):
        import slow_module_for_limits  # noqa: F401  (takes 0.4 s: the limit falls inside)

        while True:
            time.sleep(0.01)
    import sys

    assert sys.modules["slow_module_for_limits"].DONE is True


def test_off_the_main_thread_only_the_watchdog_can_stop_it() -> None:
    """Signals reach the main thread only: elsewhere the limit is the hard one (which ends the
    process, so it is only armed and cancelled here)."""
    seen: list[BaseException] = []

    def body() -> None:
        try:
            with time_limit(60, "threaded"):
                time.sleep(0.05)
        except BaseException as exc:  # pragma: no cover - would be a bug
            seen.append(exc)

    worker = threading.Thread(target=body)
    worker.start()
    worker.join(10)
    assert not worker.is_alive() and seen == []


# --- .pt2 vetting -------------------------------------------------------------------------------


def test_a_file_that_is_no_archive_is_refused_before_torch_sees_it(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from pytest_mlrepro.runners.torch_archive import vet_export_archive

    junk = tmp_path / "model.pt2"
    junk.write_bytes(b"\x80\x04not a zip")
    with pytest.raises(IntegrityError, match=r"is not a torch.export archive \(.pt2, a zip file\)"):
        vet_export_archive(junk, "m.yaml")
    import zipfile

    with zipfile.ZipFile(tmp_path / "other.pt2", "w") as archive:  # a zip, but no pt2 marker
        archive.writestr("m/data.pkl", b"\x80\x04N.")
    with pytest.raises(IntegrityError, match=r"not a \.pt2 archive written by torch\.export"):
        vet_export_archive(tmp_path / "other.pt2", "m.yaml")
