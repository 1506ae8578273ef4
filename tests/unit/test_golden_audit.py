"""The golden store's audit (goldens claimed by two manifests, goldens nobody names, stale
temporary files left by a killed writer) and its atomic writes."""

from __future__ import annotations

import os
import time
from pathlib import Path

from pytest_mlrepro import _files
from pytest_mlrepro.goldens import _audit as golden_audit


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
