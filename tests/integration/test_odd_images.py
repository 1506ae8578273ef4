"""Odd images: every kind decodes to 3-channel uint8 as the manifest's decode step declares, with
both backends, or fails naming the sample.

Kinds handled: grayscale, CMYK, YCCK and progressive JPEGs; the eight EXIF orientations; PNGs
with alpha (RGBA, LA), 16-bit (grey and RGB), palette (with and without transparency); a PNG
named .jpg. Kinds that fail their sample: truncated JPEG and PNG, a zero-byte file, text named
.jpg. The YCCK JPEG is written by Pillow as a 4-component Adobe JPEG whose APP14 transform flag
is set to 2 (YCCK), with YCbCr data computed for it, so that it decodes to a known picture.

The last tests run data sets of these files through the plugin: the odd but valid ones record
and pass with both backends; a data set with one bad file fails its item, naming that file.
"""

from __future__ import annotations

import io

import cv2
import numpy as np
import pytest
from helpers import HEIGHT, WIDTH, Project, checksum_list, manifest_text
from PIL import Image

from pytest_mlrepro.errors import SampleError
from pytest_mlrepro.pipeline._steps import Decode

BACKENDS = ["pil", "opencv"]


def picture(height: int = HEIGHT, width: int = WIDTH) -> np.ndarray:
    """A smooth RGB picture (JPEG keeps it within a few levels) with distinct quadrants."""
    y, x = np.mgrid[0:height, 0:width]
    image = np.stack(
        [
            60 + 120 * (x < width // 2) + (x * 40) // width,
            50 + 140 * (y < height // 2) + (y * 30) // height,
            200 - (x * 60) // width - (y * 60) // height,
        ],
        axis=2,
    )
    return image.astype(np.uint8)


def encode(image: Image.Image, fmt: str, **options: object) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **options)
    return buffer.getvalue()


def ycck_jpeg(rgb: np.ndarray) -> bytes:
    """A YCCK JPEG (Adobe APP14 transform 2) that decodes to ``rgb``.

    A YCCK decoder turns the first three components from YCbCr into RGB and inverts them (CMY),
    and Adobe CMYK files are stored inverted: so the components are the YCbCr of the inverted
    picture, K is 255 (no black), and Pillow, which inverts Adobe CMYK when it writes, is given
    their inverse."""
    ycc = np.asarray(Image.fromarray(255 - rgb).convert("YCbCr"))
    components = np.dstack([ycc, np.full(rgb.shape[:2], 255, np.uint8)])
    data = bytearray(encode(Image.fromarray(255 - components, mode="CMYK"), "JPEG", quality=95))
    app14 = data.find(b"\xff\xee")
    assert data[app14 + 4 : app14 + 9] == b"Adobe"
    data[app14 + 15] = 2  # the transform byte: 0 CMYK, 1 YCbCr, 2 YCCK
    return bytes(data)


def exif_jpeg(rgb: np.ndarray, orientation: int) -> bytes:
    exif = Image.Exif()
    exif[0x0112] = orientation
    return encode(Image.fromarray(rgb), "JPEG", quality=95, exif=exif.tobytes())


def upright(stored: np.ndarray, orientation: int) -> np.ndarray:
    """What a viewer shows for pixels stored with EXIF ``orientation`` (1-8)."""
    return {
        1: lambda a: a,
        2: lambda a: a[:, ::-1],
        3: lambda a: a[::-1, ::-1],
        4: lambda a: a[::-1],
        5: lambda a: a.transpose(1, 0, 2),
        6: lambda a: np.rot90(a, k=-1),
        7: lambda a: a.transpose(1, 0, 2)[::-1, ::-1],
        8: lambda a: np.rot90(a, k=1),
    }[orientation](stored)


RGB = picture()
GREY = RGB[..., 1]
rng = np.random.default_rng(5)
DEEP = rng.integers(0, 65536, (HEIGHT, WIDTH, 3)).astype(np.uint16)
PALETTE = rng.integers(0, 256, (256, 3), dtype=np.uint8)
INDEX = rng.integers(0, 256, (HEIGHT, WIDTH), dtype=np.uint8)


def _palette_png(transparent: bool) -> bytes:
    image = Image.frombytes("P", (WIDTH, HEIGHT), INDEX.tobytes())
    image.putpalette(PALETTE.ravel().tolist())
    return encode(image, "PNG", **({"transparency": 7} if transparent else {}))


def _rgb16_png() -> bytes:
    ok, data = cv2.imencode(".png", DEEP[..., ::-1])
    assert ok
    return data.tobytes()


# name → (file bytes, PIL mode it opens in, expected RGB, largest mean abs error allowed)
VALID: dict[str, tuple[bytes, str, np.ndarray, float]] = {
    "grey.jpg": (
        encode(Image.fromarray(GREY, "L"), "JPEG", quality=95),
        "L",
        np.dstack([GREY] * 3),
        2.0,
    ),
    "cmyk.jpg": (
        encode(Image.fromarray(RGB).convert("CMYK"), "JPEG", quality=95),
        "CMYK",
        RGB,
        3.0,
    ),
    "ycck.jpg": (ycck_jpeg(RGB), "CMYK", RGB, 3.0),
    "progressive.jpg": (
        encode(Image.fromarray(RGB), "JPEG", quality=95, progressive=True),
        "RGB",
        RGB,
        3.0,
    ),
    "rgba.png": (
        encode(Image.fromarray(np.dstack([RGB, INDEX]), "RGBA"), "PNG"),
        "RGBA",
        RGB,
        0.0,
    ),
    "la.png": (
        encode(Image.fromarray(np.dstack([GREY, INDEX]), "LA"), "PNG"),
        "LA",
        np.dstack([GREY] * 3),
        0.0,
    ),
    "grey16.png": (
        encode(Image.fromarray(DEEP[..., 0]), "PNG"),
        "I;16",
        np.dstack([(DEEP[..., 0] >> 8).astype(np.uint8)] * 3),
        0.0,
    ),
    "rgb16.png": (_rgb16_png(), "RGB", (DEEP >> 8).astype(np.uint8), 0.0),
    "palette.png": (_palette_png(False), "P", PALETTE[INDEX], 0.0),
    "palette-transparent.png": (_palette_png(True), "P", PALETTE[INDEX], 0.0),
    "png-named.jpg": (encode(Image.fromarray(RGB), "PNG"), "RGB", RGB, 0.0),
}
for _orientation in range(1, 9):
    _stored = picture(HEIGHT + 16, WIDTH) if _orientation > 4 else RGB  # not square
    VALID[f"exif{_orientation}.jpg"] = (exif_jpeg(_stored, _orientation), "RGB", _stored, 3.0)

_JPEG = encode(Image.fromarray(RGB), "JPEG", quality=95)
_PNG = encode(Image.fromarray(RGB), "PNG")
BAD: dict[str, tuple[bytes, str]] = {
    "truncated.jpg": (_JPEG[: len(_JPEG) // 2], "cannot decode"),
    "truncated.png": (_PNG[: len(_PNG) // 2], "cannot decode"),
    "empty.jpg": (b"", "the file is empty"),
    "text.jpg": (b"this is not an image, whatever its name says\n" * 8, "cannot decode"),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(VALID))
def test_odd_images_decode_to_three_channel_uint8(name: str, backend: str) -> None:
    data, mode, expected, tolerance = VALID[name]
    with Image.open(io.BytesIO(data)) as image:  # the file really is of that kind
        assert image.mode == mode
        if name == "ycck.jpg":
            assert image.info["adobe_transform"] == 2 and len(image.getbands()) == 4
        if name == "progressive.jpg":
            assert image.info.get("progressive") or image.info.get("progression")
    out = Decode(backend=backend).decode(data, name).array  # type: ignore[arg-type]
    assert out.dtype == np.uint8 and out.shape == expected.shape, out.shape
    error = float(np.abs(out.astype(int) - expected.astype(int)).mean())
    assert error <= tolerance, f"{name} with {backend}: mean error {error:.2f}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_is_applied_only_when_declared(backend: str, orientation: int) -> None:
    data, _, stored, _ = VALID[f"exif{orientation}.jpg"]
    as_stored = Decode(backend=backend, exif_orientation=False).decode(data, "r.jpg").array  # type: ignore[arg-type]
    turned = Decode(backend=backend, exif_orientation=True).decode(data, "r.jpg").array  # type: ignore[arg-type]
    assert as_stored.shape == stored.shape
    assert turned.shape == upright(stored, orientation).shape
    np.testing.assert_array_equal(turned, upright(as_stored, orientation))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_files_fail_naming_the_sample(name: str, backend: str) -> None:
    data, words = BAD[name]
    sample = f"n01440764/{name}"
    with pytest.raises(SampleError) as info:
        Decode(backend=backend).decode(data, sample)  # type: ignore[arg-type]
    assert info.value.sample == sample
    assert str(info.value).startswith(f"sample {sample!r}: ") and words in str(info.value)


# --- through the plugin -------------------------------------------------------------------------


def write_dataset(project: Project, name: str, files: dict[str, bytes]) -> None:
    """A data set ``name`` in the project's data mirror, its labels and its checksum list."""
    folder = project.path / "data" / name
    folder.mkdir(parents=True)
    rows = ["file,class_index"]
    for index, (file, data) in enumerate(sorted(files.items())):
        (folder / file).write_bytes(data)
        rows.append(f"{file},{index % 3}")
    (folder / "labels.csv").write_text("\n".join(rows) + "\n")
    (project.path / "manifests" / f"{name}.sha256").write_text(checksum_list(folder))


def odd_manifest(project: Project, name: str, dataset: str, backend: str) -> str:
    text = manifest_text(name, assets=project.assets, decode=f"{{decode: {{backend: {backend}}}}}")
    return text.replace(
        "dataset: {name: tiny, checksums: tiny.sha256",
        f"dataset: {{name: {dataset}, checksums: {dataset}.sha256",
    )


def test_a_data_set_of_odd_images_records_and_passes_with_both_backends(
    project: Project,
) -> None:
    project.make({})
    write_dataset(project, "odd", {name: data for name, (data, *_) in VALID.items()})
    for backend in BACKENDS:
        file = project.path / "manifests" / f"odd_{backend}.yaml"
        file.write_text(odd_manifest(project, f"odd_{backend}", "odd", backend))
    recorded = project.run("--mlrepro-update")
    recorded.assert_outcomes(passed=2)
    checked = project.run()
    checked.assert_outcomes(passed=2)
    for backend in BACKENDS:
        checked.stdout.fnmatch_lines([f"odd_{backend} *cpu *onnxruntime *{len(VALID)} *pass"])


def test_one_bad_file_fails_its_item_naming_the_sample(project: Project) -> None:
    good = {"a.jpg": VALID["cmyk.jpg"][0], "b.png": VALID["rgba.png"][0]}
    project.make({})
    for bad, (data, _) in BAD.items():
        dataset = "bad_" + bad.replace(".", "_")
        write_dataset(project, dataset, {**good, bad: data})
        for backend in BACKENDS:
            file = project.path / "manifests" / f"{dataset}_{backend}.yaml"
            file.write_text(odd_manifest(project, f"{dataset}_{backend}", dataset, backend))
    result = project.run("--mlrepro-update")
    result.assert_outcomes(failed=len(BAD) * len(BACKENDS))
    for bad, (_, words) in BAD.items():
        for backend in BACKENDS:
            result.stdout.fnmatch_lines([f"sample '{bad}': *{words}*"])
            result.stdout.fnmatch_lines(
                [f"FAILED manifests/bad_{bad.replace('.', '_')}_{backend}.yaml::accuracy*"]
            )
    assert list((project.path / "golden").iterdir()) == []
