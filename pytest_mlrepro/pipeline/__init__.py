"""Preprocessing: one small op per step, with explicit backends."""

from __future__ import annotations

from ._steps import (
    MAX_IMAGE_PIXELS,
    STEPS,
    Cast,
    Color,
    Crop,
    Decode,
    DType,
    Layout,
    Normalize,
    Pipeline,
    Resize,
    Scale,
    State,
    Step,
    Tensor,
    channels_last,
    register_step,
)

__all__ = [
    "MAX_IMAGE_PIXELS",
    "STEPS",
    "Cast",
    "Color",
    "Crop",
    "DType",
    "Decode",
    "Layout",
    "Normalize",
    "Pipeline",
    "Resize",
    "Scale",
    "State",
    "Step",
    "Tensor",
    "channels_last",
    "register_step",
]
