"""Every page of a multi-page TIFF read as bands is checked before it is decoded (issue 45,
point 2): a later page of 32-bit or signed samples is refused, never cast to 16 bits (which
wrapped 70000 to 4464 and -5 to 65531); a later page declaring 144 M pixels is refused from its
header; a file of 100,000 pages is refused past ``MAX_PAGES`` without walking them all.

The files are written here byte by byte (a little-endian TIFF, one uncompressed strip a page):
Pillow writes neither a 32-bit unsigned page nor a page whose header lies about its size."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from pytest_mlrepro.errors import SampleError
from pytest_mlrepro.pipeline import Decode
from pytest_mlrepro.pipeline._decode import MAX_IMAGE_PIXELS, MAX_PAGES

SHORT, LONG = 3, 4
SIGNED, UNSIGNED = 2, 1


def tiff(pages: list[tuple[int, int, int, int, bytes]]) -> bytes:
    """A TIFF of ``pages`` = (width, height, bits per sample, sample format, pixel bytes)."""
    out = bytearray(b"II*\x00\x00\x00\x00\x00")
    link = 4  # where the offset of the next page's directory goes
    for width, height, bits, fmt, pixels in pages:
        strip = len(out)
        out += pixels + b"\x00" * (len(pixels) % 2)
        tags = [
            (256, LONG, width),
            (257, LONG, height),
            (258, SHORT, bits),
            (259, SHORT, 1),  # no compression
            (262, SHORT, 1),  # black is zero
            (273, LONG, strip),
            (277, SHORT, 1),
            (278, LONG, height),
            (279, LONG, len(pixels)),
            (339, SHORT, fmt),
        ]
        directory = len(out)
        out[link : link + 4] = struct.pack("<I", directory)
        out += struct.pack("<H", len(tags))
        for tag, kind, value in tags:
            packed = (
                struct.pack("<H", value) + b"\0\0" if kind == SHORT else struct.pack("<I", value)
            )
            out += struct.pack("<HHI", tag, kind, 1) + packed
        link = len(out)
        out += b"\0\0\0\0"
    return bytes(out)


def page16(values: list[int]) -> tuple[int, int, int, int, bytes]:
    return (len(values), 1, 16, UNSIGNED, np.asarray(values, "<u2").tobytes())


def bands(channels: int) -> Decode:
    return Decode(mode="bands", dtype="uint16", channels=channels)


def test_16_bit_pages_are_read_as_they_are() -> None:
    data = tiff([page16([1, 65535]), page16([7, 40000])])
    array = bands(2).decode(data, "ok.tif").array
    assert array.dtype == np.uint16
    assert array[0].tolist() == [[1, 7], [65535, 40000]]


@pytest.mark.parametrize(
    ("fmt", "values", "what"),
    [
        (UNSIGNED, [70000, 1], "32-bit integer"),
        (SIGNED, [-5, 1], "32-bit signed integer"),
    ],
)
def test_a_later_page_of_32_bit_samples_is_refused_not_wrapped(
    fmt: int, values: list[int], what: str
) -> None:
    dtype = "<u4" if fmt == UNSIGNED else "<i4"
    wide = (2, 1, 32, fmt, np.asarray(values, dtype).tobytes())
    data = tiff([page16([1, 2]), wide])
    with pytest.raises(SampleError, match=f"page 2 has {what} samples") as refused:
        bands(2).decode(data, "wide.tif")
    assert "would wrap around" in str(refused.value)


def test_a_later_page_of_16_bit_signed_samples_is_refused() -> None:
    signed = (2, 1, 16, SIGNED, np.asarray([-5, 1], "<i2").tobytes())
    with pytest.raises(SampleError, match="page 2 has 16-bit signed integer samples"):
        bands(2).decode(tiff([page16([1, 2]), signed]), "signed.tif")


def test_a_later_page_declaring_144_million_pixels_is_refused_from_its_header() -> None:
    """The page's header claims 12000 × 12000 pixels over 8 bytes: refused before any pixel
    memory is taken."""
    liar = (12000, 12000, 16, UNSIGNED, b"\0" * 8)
    data = tiff([page16([1, 2]), liar])
    with pytest.raises(SampleError, match="page 2: its header declares 12000×12000 = 144000000"):
        bands(2).decode(data, "liar.tif")
    assert MAX_IMAGE_PIXELS < 12000 * 12000


def test_a_file_of_100000_pages_is_refused_past_the_page_cap() -> None:
    pages = [page16([i % 65536]) for i in range(100_000)]
    data = tiff(pages)
    with pytest.raises(SampleError, match=f"it has more than {MAX_PAGES} pages"):
        bands(MAX_PAGES).decode(data, "pages.tif")
    # The cap itself decodes.
    array = bands(MAX_PAGES).decode(tiff(pages[:MAX_PAGES]), "cap.tif").array
    assert array.shape == (1, 1, MAX_PAGES)
