"""A pitfall flip in words, from its facts (``diagnosis._pitfalls.Flip``): what reads after "with"
in a diagnosis, and a sensitivity table row's description (stored in golden/pitfalls/*.json)."""

from __future__ import annotations

from ..diagnosis import Flip

_WORDS = {
    "declared": "the declared pipeline",
    "instead": "{} instead of {}",
    # Pillow filters premultiplied by alpha, the other library ({}) each channel alone.
    "alpha": (
        "{} instead of {} (on colour with alpha: Pillow premultiplies the colours by alpha while "
        "it filters, {} filters each channel alone, so the colours next to transparent pixels "
        "differ)"
    ),
    "crop added": "a center crop of {} added after decode",
    "crop removed": "no crop (the crop step removed)",
    "crop fraction": "crop fraction {} instead of {}",
    "decoder": "the {} decoder{} instead of {}",  # the library, its DCT method if any
    "dct": "DCT method {} instead of {}",
    "exif on": "the EXIF orientation applied",
    "exif off": "the EXIF orientation ignored",
    "reshape": "the NHWC buffer reshaped as NCHW instead of transposed",
    "transpose": "a transpose to NCHW instead of a reshape",
    "uint8 first": "normalised in uint8 before the cast ({}) instead of {}",
    "float after": "normalised in float after the cast instead of in uint8 ({})",
    "invert removed": "the pixels not inverted (the invert step removed)",
    "invert added": "inverted: {} − x",
    "grey": "grey by {} instead of {}",
    "depth": "the 16-bit image read as 8-bit (mode {}, its high byte) instead of {}",
}
_MEAN_STD = {
    "imagenet": "ImageNet mean/std (x/255 − mean) / std",
    "x255": "x/255 only",
    "tf": "(x − 127.5) / 127.5 (Keras 'tf' mode)",
    "mnist": "MNIST mean/std (x/255 − 0.1307) / 0.3081",
    "units-no-255": "{} (the /255 dropped: the mean/std applied to 0..255 data)",
    "units-extra-255": "{} (a /255 added: the mean/std applied to 0..1 data)",
}
_GREY = {
    "luma": "ITU-R 601-2 luma",
    "red": "the red channel",
    "green": "the green channel",
    "blue": "the blue channel",
}


def pitfall_words(flip: Flip) -> str:
    """``BGR instead of RGB``, ``no crop (the crop step removed)``."""
    kind, *facts = flip
    if kind == "mean/std":  # the convention (and its constants), the declared stage
        convention, shown, declared = facts
        return f"{_MEAN_STD[convention].format(shown)} instead of {declared}"
    if kind == "resize":  # on colour with alpha, the other library when Pillow is one of them
        kind, facts = ("alpha", facts) if facts[2] else ("instead", facts[:2])
    if kind == "uint8 first":
        facts[1] = f"({facts[1]})" if facts[1] else "in float"
    if kind == "decoder":
        facts[1] = f" ({facts[1]})" if facts[1] else ""
    if kind == "grey":
        facts = [_GREY[r] for r in facts]
    return _WORDS[kind].format(*facts)
