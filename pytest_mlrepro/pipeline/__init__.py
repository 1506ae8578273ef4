"""Preprocessing: one small op per step, with explicit backends."""

from __future__ import annotations

from ._steps import (
    COLOUR_ORDERS,
    MAX_IMAGE_PIXELS,
    STEPS,
    Cast,
    CastDType,
    Color,
    Crop,
    Decode,
    Invert,
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
    "COLOUR_ORDERS",
    "MAX_IMAGE_PIXELS",
    "STEPS",
    "Cast",
    "CastDType",
    "Color",
    "Crop",
    "Decode",
    "Invert",
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
