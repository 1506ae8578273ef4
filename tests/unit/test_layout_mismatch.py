"""The input layout check: a model input whose fixed channel axis contradicts the manifest's
declared layout is named as a layout mismatch, saying which layout the model takes; a shape that
does not tell passes."""

from __future__ import annotations

import pytest

from pytest_mlrepro.runners._signature import layout_mismatch


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
