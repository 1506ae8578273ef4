"""Model input signatures against what a manifest declares, before any data flows.

A model's declared input shape tells its layout when its channel axis is fixed: an ONNX model
whose input is ``[batch, 3, h, w]`` takes channels first. Feeding it NHWC data (``[batch, h, w,
3]``) "works" when ``h`` and ``w`` are symbolic and gives near-zero accuracy (or fails with an
obscure shape error deep in the graph); this check says what is wrong instead.
"""

from __future__ import annotations

from collections.abc import Sequence

CHANNELS = (1, 3, 4)


def _fixed(dim: object) -> int | None:
    return dim if isinstance(dim, int) and not isinstance(dim, bool) and dim > 0 else None


def layout_mismatch(shape: Sequence[object], layout: str, input_name: str) -> str | None:
    """Why a rank-4 model input of ``shape`` cannot take ``layout`` data, or None when it can
    (or when the shape does not tell: both channel axes symbolic, or both fixed to the same
    size)."""
    if len(shape) != 4:
        return None
    first, last = _fixed(shape[1]), _fixed(shape[3])
    shown = "[" + ", ".join(str(d) for d in shape) + "]"
    if layout == "NHWC" and first in CHANNELS and last != first:
        return (
            f"the model's input {input_name!r} is {shown}: channels first (NCHW), but the "
            "manifest declares NHWC; set layout: NCHW and end the preprocessing with "
            "'layout: {order: NCHW}'"
        )
    if layout == "NCHW" and last in CHANNELS and first != last:
        return (
            f"the model's input {input_name!r} is {shown}: channels last (NHWC), but the "
            "manifest declares NCHW; set layout: NHWC and end the preprocessing with "
            "'layout: {order: NHWC}'"
        )
    return None


__all__ = ["layout_mismatch"]
