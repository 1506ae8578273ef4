"""The shards of one evaluation merge only when they were measured on one version of the data
and compared with one recording of the golden. Each accuracy row of a results file carries both
identities (``data_identity``: the sha256 of the data set's whole checksum list, the same for
every shard; ``golden_digest``: the sha256 of the golden file), and the merge compares them.

The project: the tiny ONNX model over 40 images, its golden recorded by the plugin.
"""

from __future__ import annotations

import hashlib
import shutil

import pytest
from helpers import Project, checksum_list, recorded_project_of

from pytest_mlrepro.cli import main
from pytest_mlrepro.results import load_results

N_IMAGES = 40


@pytest.fixture
def sharded(serial_project: Project) -> Project:
    return recorded_project_of(serial_project, N_IMAGES)


def shard_run(project: Project, index: int) -> None:
    run = project.run(f"--mlrepro-shard={index}/2", "--mlrepro-json", f"s{index}.json")
    assert run.ret == 0, run.stdout.str()


def merge(project: Project, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    status = main(["merge", str(project.path / "s1.json"), str(project.path / "s2.json")])
    return status, capsys.readouterr().out


def test_shards_of_two_data_versions_do_not_merge_into_a_pass(
    sharded: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    shard_run(sharded, 1)
    # Data v2: one image replaced (by another's picture), its checksum and the golden re-recorded.
    data = sharded.path / "data" / "tiny"
    shutil.copyfile(data / "img02.png", data / "img05.png")
    (sharded.path / "manifests" / "tiny.sha256").write_text(checksum_list(data))
    assert sharded.run("--mlrepro-update").ret == 0
    shard_run(sharded, 2)
    status, out = merge(sharded, capsys)
    assert status == 1, out
    assert "the shards were measured on different versions of the data set (data_identity: " in (
        out
    )


def test_every_shard_of_one_version_carries_the_same_identities_and_they_merge(
    sharded: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    shard_run(sharded, 1)
    shard_run(sharded, 2)
    rows = [
        row
        for name in ("s1.json", "s2.json")
        for row in load_results(sharded.path / name).results
        if "::accuracy[" in row.nodeid
    ]
    assert len(rows) == 2
    for key in ("data_identity", "golden_digest"):
        assert getattr(rows[0], key) == getattr(rows[1], key), key
    golden = sharded.golden("tiny_onnx").read_bytes()
    assert rows[0].golden_digest == hashlib.sha256(golden).hexdigest()
    status, out = merge(sharded, capsys)
    assert status == 0, out
    assert "**PASSED**" in out
