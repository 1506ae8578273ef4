"""A step whose output changed under an unchanged manifest is blamed on the environment it runs
on (the step, its library and version, what changed), and a manifest flip that happens to
restore the output comes second."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers import BareProject, lead_of, store_as_jpegs

pytest.importorskip("onnxruntime")


def test_a_decoder_that_changed_under_an_unchanged_manifest_is_the_environment(
    bare: BareProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    from PIL import Image

    store_as_jpegs(bare, subsampling=0)
    bare.manifest("tiny_onnx")
    bare.run("--mlrepro-update").assert_outcomes(passed=1)

    # The installed Pillow now decodes JPEGs otherwise (another build's colour conversion: the
    # red levels a few steps brighter); the manifest is untouched.
    convert = Image.Image.convert

    def brighter(self: Image.Image, *args: Any, **kwargs: Any) -> Image.Image:
        out = convert(self, *args, **kwargs)
        if getattr(self, "format", None) != "JPEG":
            return out
        pixels = np.asarray(out).astype(np.int16)
        pixels[:, :, 0] += 12
        return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))

    monkeypatch.setattr(Image.Image, "convert", brighter)
    result = bare.run()
    result.assert_outcomes(failed=1)
    lead = lead_of(result)
    assert lead.startswith(
        "Likely cause: the environment — the manifest is unchanged, and the decode step's "
        "output differs from the golden's ("
    ), lead
    assert "that step runs on Pillow " in lead, lead
    assert "no recorded version of it changed, so its build or its behaviour did" in lead, lead
    # The OpenCV decoder brings the outputs back: said second, as a workaround.
    assert "A manifest flip happens to restore the output (with the OpenCV decoder" in lead, lead
    assert "the golden was recorded with the manifest as it is" in lead, lead
