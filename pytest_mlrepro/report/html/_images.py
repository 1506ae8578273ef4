"""Step outputs and their amplified difference as pictures, with numpy and Pillow only, so that a
drifted item makes its pictures where it runs and sends a few small PNGs, not the arrays."""

from __future__ import annotations

import base64
import dataclasses
import io
from typing import Any

import numpy as np

from ...diagnosis import FirstStepOutputs, ProbeOutputs
from ...pipeline import channels_last
from .._diagnosis_lead import step_note_words, step_text
from ._model import DriftImage, DriftSet

MAX_SIDE = 448  # pixels: larger outputs are shown reduced (a photo's decode: a few MB less)


def reduce(image: np.ndarray, factor: int, how: str) -> np.ndarray:
    """An H×W×C image reduced ``factor`` times by each block's mean, or its maximum (for a
    difference, so that a single differing pixel stays visible)."""
    if factor == 1:
        return image
    h, w = image.shape[:2]
    pad = ((0, -h % factor), (0, -w % factor), (0, 0))
    padded = np.pad(image, pad, mode="edge")
    blocks = padded.reshape(
        padded.shape[0] // factor, factor, padded.shape[1] // factor, factor, image.shape[2]
    )
    reduced: np.ndarray = blocks.max(axis=(1, 3)) if how == "max" else blocks.mean(axis=(1, 3))
    return reduced


def image_of(array: np.ndarray, layout: str) -> np.ndarray | None:
    """A step output as an H×W×C float64 picture by the pipeline's layout rule; None if not one."""
    if array.ndim == 4 and array.shape[0] == 1:
        array = array[0]
    image = channels_last(array, layout)
    return None if image is None else np.asarray(image, dtype=np.float64)


def _shown_channels(image: np.ndarray) -> np.ndarray:
    """The channels a picture can show: 1 or 3, else the first (grey) or the first three."""
    channels = image.shape[2]
    if channels in (1, 3):
        return image
    return image[:, :, :3] if channels > 3 else image[:, :, :1]


def value_range(*arrays: np.ndarray) -> tuple[float, float]:
    """The values mapped to black..white: 0..255 for bytes, else the finite min..max of all the
    arrays, so that two outputs of one step are shown on the same scale."""
    if arrays and all(a.dtype == np.uint8 for a in arrays):
        return 0.0, 255.0
    finite = [a[np.isfinite(a)] for a in arrays if a.size]
    values = np.concatenate([f.ravel().astype(np.float64) for f in finite]) if finite else None
    if values is None or values.size == 0:
        return 0.0, 1.0
    return float(values.min()), float(values.max())


def to_png(image: np.ndarray, lo: float, hi: float) -> str:
    from PIL import Image

    span = hi - lo
    scaled = (image - lo) / span * 255.0 if span > 0 else np.full_like(image, 127.0)
    pixels = np.clip(np.nan_to_num(scaled, nan=0.0), 0, 255).round().astype(np.uint8)
    if pixels.shape[2] == 1:
        picture = Image.fromarray(pixels[:, :, 0], mode="L")
    else:
        picture = Image.fromarray(pixels, mode="RGB")
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG", optimize=True)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def heat(fraction: np.ndarray) -> np.ndarray:
    """A 0..1 |Δ| as a black → red → yellow → white heat map (H×W×3, 0..255)."""
    t = np.clip(fraction, 0.0, 1.0)
    red = np.clip(t * 3.0, 0, 1)
    green = np.clip(t * 3.0 - 1.0, 0, 1)
    blue = np.clip(t * 3.0 - 2.0, 0, 1)
    return np.stack([red, green, blue], axis=2) * 255.0


LEVELS = 255.0  # levels of the shown range: one is the step of an 8-bit output
LEGEND = (0.0, 1.0, 3.0, 15.0, 63.0, 255.0)  # the levels the difference picture's legend names


def level_fraction(diff: np.ndarray | float, level: float, full: float) -> np.ndarray:
    """|Δ| on a fixed 0..1 scale, logarithmic in levels (one level a dim red, 15 half-way, the
    full range white): the same difference always has the same colour."""
    steps = np.log2(1.0 + np.asarray(diff, np.float64) / max(level, 1e-300))
    return np.asarray(np.clip(steps / np.log2(1.0 + max(full / max(level, 1e-300), 1.0)), 0, 1))


def level_colour(levels: float) -> str:
    t = float(level_fraction(levels, 1.0, LEVELS))
    r, g, b = (int(round(v)) for v in heat(np.array([[t]]))[0, 0])
    return f"#{r:02x}{g:02x}{b:02x}"


def thumbnail(data: bytes, side: int = 64) -> str:
    """A base64 PNG thumbnail of an encoded image; "" when it cannot be decoded."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            picture = image.convert("RGB")
            picture.thumbnail((side, side))
            buffer = io.BytesIO()
            picture.save(buffer, format="PNG", optimize=True)
    except (OSError, ValueError, UnidentifiedImageError, Image.DecompressionBombError):
        return ""
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def drift_image(
    sample: str,
    golden: np.ndarray | None,
    now: np.ndarray | None,
    golden_layout: str,
    now_layout: str,
) -> DriftImage:
    g = None if golden is None else image_of(golden, golden_layout)
    n = None if now is None else image_of(now, now_layout)
    shown = [a for a in (golden, now) if a is not None]
    if (golden is not None and g is None) or (now is not None and n is None):
        shapes = " and ".join(str(tuple(a.shape)) for a in shown)
        return DriftImage(sample, note=f"outputs of shape {shapes} are not images")
    lo, hi = value_range(*shown)
    # The integer factor that brings the longer side to at most MAX_SIDE (1: as it is).
    factor = max([1, *(-(-max(a.shape[:2]) // MAX_SIDE) for a in (g, n) if a is not None)])
    base = DriftImage(
        sample,
        golden_png="" if g is None else to_png(reduce(_shown_channels(g), factor, "mean"), lo, hi),
        now_png="" if n is None else to_png(reduce(_shown_channels(n), factor, "mean"), lo, hi),
        golden_shape=() if golden is None else tuple(int(d) for d in golden.shape),
        now_shape=() if now is None else tuple(int(d) for d in now.shape),
        value_range=(lo, hi),
        reduced=factor,
    )
    if g is None or n is None:
        return base
    if g.shape != n.shape:
        return dataclasses.replace(base, note="the outputs differ in shape: no difference image")
    diff = np.abs(g - n).max(axis=2)  # the largest difference over the channels, per pixel
    finite = np.isfinite(diff)
    note = "" if finite.all() else "non-finite values (shown black) in an output"
    diff = np.where(finite, diff, 0.0)
    peak = float(diff.max()) if diff.size else 0.0
    # A fixed scale, in levels of the shown range (not the largest difference made white): a
    # one-level rounding difference is a dim red, a channel swap white; the legend says which.
    full = hi - lo if hi > lo else 1.0
    level = full / LEVELS
    fraction = level_fraction(reduce(diff[:, :, None], factor, "max")[:, :, 0], level, full)
    return dataclasses.replace(
        base,
        diff_png=to_png(heat(fraction), 0.0, 255.0),
        max_abs_diff=peak,
        changed_fraction=float(np.count_nonzero(np.abs(g - n))) / max(1, g.size),
        note=note,
        level=level,
        full=full,
    )


def drift_note(o: FirstStepOutputs) -> str:
    """Why there are no pictures, or what they cannot show, in words ("" when nothing)."""
    op = "" if o.first is None else o.first.op
    if o.note == "environment" and o.environment is not None:
        return (
            f"with the golden's own recorded pipeline, this machine's {o.environment.op} output "
            f"differs from the golden's ({step_text(o.environment)}): the golden pipeline's "
            "pictures are made here, so they show this machine's outputs, not the recorded ones"
        )
    return {
        "unbuilt": "the golden's recorded preprocessing cannot be rebuilt here (a step it names "
        "is not registered in this run)",
        "identical": f"every step's output is identical to the golden's on {o.compared} probes",
        "untraced": f"the probe samples could not be traced: {o.error}",
        "added": f"{op} is a step the golden's pipeline does not have: its output is shown "
        "beside the golden pipeline's output of the step before it",
        "removed": f"{op} is gone from the current pipeline: the golden pipeline's output of it "
        "is shown beside the current pipeline's output of the step before it",
    }.get(o.note or "", step_note_words(o.note or "", o.error))


def step_pictures(outputs: FirstStepOutputs, drift: DriftSet) -> DriftSet:
    first, golden_layout, now_layout = outputs.first, outputs.golden_layout, outputs.now_layout
    return dataclasses.replace(
        drift,
        step="" if first is None else first.op,
        status="" if first is None else first.status,
        description="" if first is None else step_text(first),
        golden_index=outputs.golden_index,
        now_index=outputs.now_index,
        note=drift_note(outputs),
        channels=_channels(outputs.golden_order, outputs.now_order),
        layout=_layouts(golden_layout, now_layout),
        dtype=_dtypes(outputs.probes),
        probes=tuple(
            drift_image(p.sample, p.golden, p.now, golden_layout, now_layout)
            for p in outputs.probes
        ),
    )


def _channels(golden: str, now: str) -> str:
    if golden == now:
        return f"channels in {now} order"
    return f"channels in the order of each output: {_layouts(golden, now)}"


def _layouts(golden: str, now: str) -> str:
    return now if golden == now else f"golden {golden}, now {now}"


def _dtypes(probes: list[ProbeOutputs]) -> str:
    sides = (("golden", probes[0].golden), ("now", probes[0].now)) if probes else ()
    kinds = [(side, str(array.dtype)) for side, array in sides if array is not None]
    if len({k for _, k in kinds}) == 1:
        return kinds[0][1]
    return ", ".join(f"{side} {kind}" for side, kind in kinds)


def from_plain(data: dict[str, Any]) -> DriftSet:
    """A :class:`DriftSet` from its ``dataclasses.asdict`` after a trip through JSON (xdist)."""
    fields: dict[str, Any] = {k: _tuples(v) for k, v in data.items() if k != "probes"}
    probes = tuple(DriftImage(**_tuples(p)) for p in data.get("probes") or ())
    return DriftSet(**fields, probes=probes)


def _tuples(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _tuples(v) for k, v in value.items()}
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value
