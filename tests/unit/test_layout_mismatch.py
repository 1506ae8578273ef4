"""The input layout check: a model input whose fixed channel axis contradicts the manifest's
declared layout is named as a layout mismatch, saying which layout the model takes; a shape that
does not tell passes. One rule (``model_layout``) serves the ONNX and TensorFlow runners and
``mlrepro init``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pytest_mlrepro.errors import SignatureError
from pytest_mlrepro.onboarding._model_info import ModelInfo
from pytest_mlrepro.runners import model_layout
from pytest_mlrepro.runners._signature import check_batch_shape, layout_mismatch


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
        # Both axes a channel count (one row of 3 channels, or one channel 3 wide): ambiguous,
        # taken either way (it once failed both ways).
        (["batch", 1, "w", 3], "NHWC", None),
        (["batch", 1, "w", 3], "NCHW", None),
        (["batch", 1000], "NCHW", None),
    ],
)
def test_layout_mismatch(shape: list[object], layout: str, says: str | None) -> None:
    found = layout_mismatch(shape, layout, "input")
    assert (found is None) == (says is None), found
    if says is not None:
        assert found is not None and says in found


@pytest.mark.parametrize(
    ("shape", "layout"),
    [
        ((None, 3, 224, 224), "NCHW"),
        ((None, 224, 224, 3), "NHWC"),
        ((1, 224, 224, 1), "NHWC"),
        ((None, None, None, None), None),
        ((None, 1, 5, 3), None),
        ((None, 1000), None),
    ],
)
def test_one_layout_rule_for_runners_and_init(
    shape: tuple[int | None, ...], layout: str | None
) -> None:
    """The runners' rule, ``mlrepro init``'s written layout (NCHW where the shape does not
    tell) and the TensorFlow batch check's hint all read the shape the same way."""
    assert model_layout(shape) == layout
    info = ModelInfo(path=Path("m.onnx"), format="onnx", sha256="0" * 64, shape=shape)
    assert info.layout == (layout or "NCHW")
    if layout is not None:
        # The same sizes in the other order: the batch check names the model's layout.
        other = (2, *shape[2:], shape[1]) if layout == "NCHW" else (2, shape[3], *shape[1:3])
        with pytest.raises(SignatureError, match=f"the model is {layout}"):
            sizes = [int(size or 1) for size in other]
            check_batch_shape("input", list(shape), np.zeros(sizes, np.float32), "?")
