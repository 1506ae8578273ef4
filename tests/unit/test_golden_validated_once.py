"""A golden's bytes are validated once per process (goldens/_store.py ``read``): an item reads
its reference's golden before its run and again for its verdict (issue 34). The same bytes give
the same validated golden, read-only; other bytes, a broken file included, are read afresh."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from pytest_mlrepro.errors import GoldenError
from pytest_mlrepro.goldens import _store as golden_store

OLD = Path(__file__).resolve().parents[1] / "data" / "old" / "golden"


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = golden_store.validate

    def validate(data: object) -> golden_store.Golden:
        calls.append(1)
        return real(data)

    monkeypatch.setattr(golden_store, "validate", validate)
    monkeypatch.setattr(golden_store, "_validated", {})
    return calls


def test_the_same_bytes_are_validated_once(tmp_path: Path, counted: list[int]) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    shutil.copy(OLD / "tiny_onnx.json", first)
    shutil.copy(OLD / "tiny_onnx.json", second)
    one, two = golden_store.read(first), golden_store.read(second)
    assert one is not None and two is not None
    assert len(counted) == 1 and two.results is one.results
    with pytest.raises(ValueError, match="read-only"):
        one.results.topk_scores[0, 0] = np.float32(2.0)


def test_changed_bytes_are_validated_again_and_an_error_is_not_kept(
    tmp_path: Path, counted: list[int]
) -> None:
    path = tmp_path / "g.json"
    text = (OLD / "tiny_onnx.json").read_text()
    path.write_text(text)
    before = golden_store.read(path)
    broken = text.replace('  "samples": [\n', '  "samples": [\n    ["x", -1, [0], [0.5]],\n', 1)
    assert broken != text
    path.write_text(broken)
    for _ in range(2):  # an invalid golden is refused each time it is read
        with pytest.raises(GoldenError, match="samples"):
            golden_store.read(path)
    path.write_text(text)
    after = golden_store.read(path)
    assert before is not None and after is not None and after.digest == before.digest
    assert len(counted) == 3
