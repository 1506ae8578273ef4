"""A cache others can write to is treated like input (issue 31, point 1): no link is followed
inside the cache root, lock files and entries are never opened through a planted name, a folder
every user may write to that belongs to another user is refused with the way to share a cache
safely, and a refusal never shows the digest of a file it should not have read.

Each test plants what a hostile colleague would and shows that nothing outside the cache is
created, written or hashed. A second user is real where the tests run as root (the planted
folder is handed to ``nobody``); elsewhere the ownership check is injected
(``pytest_mlrepro._files.this_user``: the runs are in this process)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from helpers import Project, sha256

NOBODY = 65534


def mirrored_project(p: Project, name: str = "m.onnx") -> Path:
    """The tiny ONNX manifest with ``model.file`` a cache file provided from the model mirror
    (``data/models``); the cache's ``models/`` folder, not yet created."""
    sha = sha256(p.assets / "models" / "tiny.onnx")
    text = p.manifest("tiny_onnx").replace(
        f"    path: ../models/tiny.onnx\n    sha256: {sha}\n",
        f"    cache: {name}\n    sha256: {sha}\n",
    )
    p.make({"m.yaml": text})
    mirror = p.path / "data" / "models"
    mirror.mkdir()
    (mirror / name).write_bytes((p.assets / "models" / "tiny.onnx").read_bytes())
    return Path(os.environ["MLREPRO_CACHE"]) / "models"


def owned_by_another_user(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``folder`` belong to another user: for real as root, else as the check sees it."""
    if os.geteuid() == 0:
        os.chown(folder, NOBODY, NOBODY)
    else:
        import pytest_mlrepro._files as files

        theirs = os.stat(folder).st_uid
        monkeypatch.setattr(files, "this_user", lambda: theirs + 1)


def outside_listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_a_lock_file_planted_as_a_dangling_link_creates_nothing_outside(
    serial_project: Project, tmp_path: Path
) -> None:
    p = serial_project
    models = mirrored_project(p)
    models.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (models / "m.onnx.lock").symlink_to(outside / "created-through-the-lock")
    result = p.run("--mlrepro-update")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert f"{models / 'm.onnx.lock'} is a symbolic link, not a regular file" in out
    assert "model.file.cache: the cache is not safe to use" in out
    assert outside_listing(outside) == [], "nothing is created through the planted link"
    assert not (models / "m.onnx").exists()
    assert not p.golden("tiny_onnx").exists()


def test_a_models_folder_replaced_by_a_link_outside_is_refused_and_nothing_written_there(
    serial_project: Project, tmp_path: Path
) -> None:
    p = serial_project
    models = mirrored_project(p)
    models.parent.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    models.symlink_to(outside, target_is_directory=True)
    result = p.run("--mlrepro-update")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert f"{models} is a symbolic link, not a folder" in out
    assert outside_listing(outside) == [], "no model, lock or origin record written outside"
    assert not p.golden("tiny_onnx").exists(), "no golden recorded from it"


def test_a_model_planted_as_a_link_is_neither_read_nor_its_digest_shown(
    serial_project: Project, tmp_path: Path
) -> None:
    p = serial_project
    models = mirrored_project(p)
    models.mkdir(parents=True)
    secret = tmp_path / "secret"
    secret.write_bytes(b"root-only secret\n")
    secret.chmod(0o600)
    (models / "m.onnx").symlink_to(secret)
    result = p.run("--mlrepro-update")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert f"{models / 'm.onnx'} is a symbolic link, not a regular file" in out
    digest = hashlib.sha256(secret.read_bytes()).hexdigest()
    assert digest not in out and digest[:8] not in out, "the secret's digest is never shown"
    assert (models / "m.onnx").is_symlink(), "the planted link is left for a person to look at"
    assert not p.golden("tiny_onnx").exists()


def test_a_cache_folder_every_user_may_write_to_and_another_owns_is_refused_with_the_fix(
    serial_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = serial_project
    models = mirrored_project(p)
    models.mkdir(parents=True)
    models.chmod(0o777)
    owned_by_another_user(models, monkeypatch)
    result = p.run("--mlrepro-update")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert f"{models} is a folder that every user of this machine may write to" in out
    assert "belongs to another user" in out
    assert "setgid" in out and "chmod 2770" in out, "the message says how to share safely"
    assert os.listdir(models) == [], "nothing is created in it"
    assert not p.golden("tiny_onnx").exists()


def test_a_group_owned_setgid_cache_folder_is_the_safe_way_to_share(
    serial_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = serial_project
    models = mirrored_project(p)
    models.mkdir(parents=True)
    models.chmod(0o2770)
    owned_by_another_user(models, monkeypatch)
    p.run("--mlrepro-update").assert_outcomes(passed=1)
    assert sha256(models / "m.onnx") == sha256(p.assets / "models" / "tiny.onnx")


def test_a_planted_data_set_cache_link_is_refused_not_followed(
    serial_project: Project, tmp_path: Path
) -> None:
    p = serial_project
    p.make({"m.yaml": p.manifest("tiny_onnx")}, ini_data=None)  # no data mirror
    # The data set is only in the cache, whose datasets/tiny is a link to a copy outside.
    outside = tmp_path / "outside-tiny"
    outside.symlink_to(p.path / "data" / "tiny", target_is_directory=True)
    datasets = Path(os.environ["MLREPRO_CACHE"]) / "datasets"
    datasets.mkdir(parents=True)
    (datasets / "tiny").symlink_to(outside, target_is_directory=True)
    result = p.run("--mlrepro-update")
    result.assert_outcomes(failed=1)
    assert f"{datasets / 'tiny'} is a symbolic link, not a folder" in result.stdout.str()
    assert not p.golden("tiny_onnx").exists()


def test_a_cache_file_every_user_may_write_to_and_another_owns_is_refused(
    serial_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = serial_project
    models = mirrored_project(p)
    models.mkdir(parents=True)
    planted = models / "m.onnx"
    planted.write_bytes((p.assets / "models" / "tiny.onnx").read_bytes())  # even the pinned bytes
    planted.chmod(0o666)
    owned_by_another_user(planted, monkeypatch)
    result = p.run("--mlrepro-update")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert f"{planted} is a file that every user of this machine may write to" in out
    assert "chmod 2770" in out
    assert not p.golden("tiny_onnx").exists()


def test_an_artifact_builder_that_leaves_a_link_builds_nothing(
    serial_project: Project, tmp_path: Path
) -> None:
    p = serial_project
    sha = sha256(p.assets / "models" / "tiny.onnx")
    text = p.manifest("tiny_onnx").replace(
        f"    path: ../models/tiny.onnx\n    sha256: {sha}\n",
        f"    cache: built.onnx\n    build: linking\n    sha256: {sha}\n",
    )
    p.make({"m.yaml": text})
    outside = tmp_path / "outside.onnx"  # even the pinned bytes, but not in the cache
    outside.write_bytes((p.assets / "models" / "tiny.onnx").read_bytes())
    (p.path / "conftest.py").write_text(
        "import os\n\nimport pytest_mlrepro\n\n\n"
        "@pytest_mlrepro.artifact_builder('linking')\n"
        "def build(target):\n"
        "    os.unlink(target)\n"
        f"    os.symlink({str(outside)!r}, target)\n"
    )
    result = p.run("--mlrepro-update")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "builder 'linking' did not write a regular file at the path it was given" in out
    models = Path(os.environ["MLREPRO_CACHE"]) / "models"
    assert not [q.name for q in models.iterdir() if q.is_symlink() or q.name == "built.onnx"]
    assert not p.golden("tiny_onnx").exists()
