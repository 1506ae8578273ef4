"""Model input signatures against what a manifest declares, before any data flows.

A model's declared input shape tells its layout when its channel axis is fixed: an ONNX model
whose input is ``[batch, 3, h, w]`` takes channels first. Feeding it NHWC data (``[batch, h, w,
3]``) "works" when ``h`` and ``w`` are symbolic and gives near-zero accuracy (or fails with an
obscure shape error deep in the graph); this check says what is wrong instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from .. import pipeline
from ..errors import SignatureError

if TYPE_CHECKING:
    from ..manifest import Manifest

CHANNELS = (1, 3, 4)
# Steps that keep an image's height and width (every other step may change them).
_SIZE_KEEPING = (pipeline.Color, pipeline.Cast, pipeline.Scale, pipeline.Normalize, pipeline.Layout)


def _fixed(dim: object) -> int | None:
    return dim if isinstance(dim, int) and not isinstance(dim, bool) and dim > 0 else None


def model_layout(shape: Sequence[object]) -> Literal["NCHW", "NHWC"] | None:
    """The layout a rank-4 model input of ``shape`` takes, told by its channel axis: channels
    first when only its second dimension is fixed to a channel count (1, 3 or 4), channels last
    when only its last one is; None when the shape does not tell (another rank, both axes
    symbolic, both channel counts). The one rule by which a runner checks a manifest's layout
    and ``mlrepro init`` writes one."""
    if len(shape) != 4:
        return None
    first, last = _fixed(shape[1]) in CHANNELS, _fixed(shape[3]) in CHANNELS
    if first and not last:
        return "NCHW"
    if last and not first:
        return "NHWC"
    return None


def layout_mismatch(shape: Sequence[object], layout: str, input_name: str) -> str | None:
    """Why a rank-4 model input of ``shape`` cannot take ``layout`` data, or None when it can
    (or when the shape does not tell: :func:`model_layout`)."""
    model = model_layout(shape)
    if model is None or model == layout:
        return None
    shown = "[" + ", ".join(str(d) for d in shape) + "]"
    what = "channels first" if model == "NCHW" else "channels last"
    return (
        f"the model's input {input_name!r} is {shown}: {what} ({model}), but the manifest "
        f"declares {layout}; set layout: {model} and end the preprocessing with "
        f"'layout: {{order: {model}}}'"
    )


def model_channels(shape: Sequence[object], layout: str) -> int | None:
    """The channel count a rank-4 model input of ``shape`` takes in ``layout`` (its channel
    axis), or None when that axis is symbolic or the input is not rank 4."""
    if len(shape) != 4:
        return None
    return _fixed(shape[1] if layout == "NCHW" else shape[3])


def pipeline_channels(steps: Sequence[pipeline.Step]) -> tuple[int, str]:
    """(channels, what they are: RGB, BGR, L, RGBA, BGRA or bands) of what the preprocessing
    gives the model, known before any image is read."""
    final = pipeline.Pipeline(steps).final
    return final.channels, final.order


def channel_fix(channels: int) -> str:
    """The decode step that gives ``channels`` channels, as a manifest writes it."""
    if channels == 1:
        return "decode with 'mode: L' (grey; a colour file by ITU-R 601-2 luma, 'convert: luma')"
    if channels == 3:
        return "decode with 'mode: RGB' (colour; a grey file's channel repeated)"
    if channels == 4:
        return "decode with 'mode: RGBA' (colour and alpha), or 'mode: bands' for 4 bands"
    return f"decode with 'mode: bands, channels: {channels}' (a multi-band TIFF or .npy array)"


def channel_mismatch(
    shape: Sequence[object],
    layout: str,
    input_name: str,
    channels: int,
    names: str = "",
    source: str | None = None,
) -> str | None:
    """Why a rank-4 model input of ``shape`` in ``layout`` cannot take ``channels`` channels
    (``names``: what they are, e.g. ``RGB``), or None when it can (or when its channel axis is
    symbolic). ``source`` says where the model's count was read when it is no input signature
    (a torch module's first convolution). The one check by which a runner at load and
    ``mlrepro init`` refuse a pipeline whose channels differ from the model's, before any
    image is read."""
    model = model_channels(shape, layout)
    if model is None or model == channels:
        return None
    shown = "[" + ", ".join(str(d) for d in shape) + "]"
    other = "NHWC" if layout == "NCHW" else "NCHW"
    if source is None and model_channels(shape, other) == channels:
        # The pipeline's count is on the other axis: a layout the shape alone could not tell
        # (a channel count other than 1, 3, 4), not a channel mismatch.
        return (
            f"the model's input {input_name!r} is {shown}: read as {layout} it would take "
            f"{model} channels, as {other} the {channels} the preprocessing makes; set "
            f"layout: {other} and end the preprocessing with 'layout: {{order: {other}}}'"
        )
    what = f" ({names})" if names else ""
    model_side = source or f"the model's input {input_name!r} is {shown} ({layout})"
    return (
        f"the preprocessing makes {channels}-channel images{what}, {model_side}: it takes "
        f"{model} channel{'s' * (model != 1)}; {channel_fix(model)}"
    )


def check_channels(
    manifest: Manifest, shape: Sequence[object], source: str | None = None
) -> None:
    """A runner's check at load: :class:`SignatureError` at the decode step's ``mode`` (its line)
    when the model input of ``shape`` takes another channel count than the preprocessing
    makes (``source``: :func:`channel_mismatch`'s)."""
    declared = manifest.input
    channels, names = pipeline_channels(declared.preprocess)
    wrong = channel_mismatch(shape, declared.layout, declared.name, channels, names, source)
    if wrong is not None:
        where = ("inputs", 0, "preprocess", 0, "decode", "mode")
        raise SignatureError(manifest.error(where, wrong).format())


def pipeline_size(steps: Sequence[pipeline.Step]) -> tuple[int, int, int] | None:
    """(height, width, index of the step that sets it) of every image the preprocessing makes,
    when the steps fix it whatever the decoded size (a crop or resize to a ``size``), else
    None."""
    fixed: tuple[int, int, int] | None = None
    for index, step in enumerate(steps):
        if isinstance(step, (pipeline.Crop, pipeline.Resize)) and step.size is not None:
            size = step.size
            height, width = (size, size) if isinstance(size, int) else (size[0], size[1])
            fixed = (height, width, index)
        elif index > 0 and not isinstance(step, _SIZE_KEEPING):
            fixed = None  # a fraction crop, a shorter-side resize or a registered step
    return fixed


def size_mismatch(
    shape: Sequence[object], layout: str, input_name: str, height: int, width: int
) -> str | None:
    """Why a rank-4 model input of ``shape`` cannot take ``height`` × ``width`` images in
    ``layout``, or None when it can (or when its spatial dimensions are symbolic)."""
    if len(shape) != 4:
        return None
    dims = (shape[2], shape[3]) if layout == "NCHW" else (shape[1], shape[2])
    want = tuple(_fixed(d) for d in dims)
    if (want[0] is None or want[0] == height) and (want[1] is None or want[1] == width):
        return None
    shown = "[" + ", ".join(str(d) for d in shape) + "]"
    return (
        f"the preprocessing makes {height}×{width} images, the model's input {input_name!r} is "
        f"{shown} ({layout}): it takes {dims[0]}×{dims[1]}; change this size to the model's"
    )


__all__ = [
    "channel_fix",
    "channel_mismatch",
    "check_channels",
    "layout_mismatch",
    "model_channels",
    "model_layout",
    "pipeline_channels",
    "pipeline_size",
    "size_mismatch",
]
