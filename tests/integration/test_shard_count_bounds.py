"""A shard count is bounded where it is parsed (``data.MAX_SHARDS``, 10,000): a count of 10**9
is a usage error before anything is collected or run, instead of 10**9 items built at collection
(``MemoryError``) or a results file whose merge lists 10**9 missing shards."""

from __future__ import annotations

import pytest
from helpers import Project

ABSURD = 10**9


@pytest.fixture
def tiny(serial_project: Project) -> Project:
    return serial_project.make(
        {"tiny_onnx.yaml": serial_project.manifest("tiny_onnx")}, goldens=["tiny_onnx"]
    )


def test_one_shard_of_a_billion_is_a_usage_error(tiny: Project) -> None:
    result = tiny.run(f"--mlrepro-shard=1/{ABSURD}", "--mlrepro-json", "r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--mlrepro-shard*1/{ABSURD}: at most 10000 shards*"])
    assert not (tiny.path / "r.json").exists()


def test_a_billion_shard_items_is_a_usage_error_before_collection(tiny: Project) -> None:
    result = tiny.run(f"--mlrepro-shards={ABSURD}", "--collect-only")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*mlrepro_shards: at most 10000 shard items per accuracy item, got {ABSURD}*"]
    )
