"""A tiny project in which every preprocessing pitfall matters, for the diagnosis scenario tests.

Images (48 × 66) are constant on 3 × 3 pixel blocks: a low-frequency colour field plus block
texture, so that crops, flips, rotations and interpolation all change what a model sees, and so
that on the aligned 36 × 36 centre crop a 3× downscale is exact arithmetic: nearest picks each
block, Pillow's antialiased bilinear mixes each block with its neighbours by 1/9, 7/9, 1/9.

Models are linear classifiers over the preprocessed (3, 12, 12) tensor, written as ONNX. A
"model-side change" is a model whose input goes through an adapter ``T`` before the classifier
(``logits = W·T(x) + b``): the new model expects a different preprocessing, and the manifest is
left untouched. Linear adapters (channel flips, layout permutations, affine normalisations,
resampling) are folded into ``W`` and ``b``; ReLU and the uint8 wrap-around are graph ops.
"""

from __future__ import annotations

import hashlib
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

# One import style: ``from diag_helpers import ...`` (tests/conftest.py puts this folder on
# sys.path). Imported as ``tests.diag_helpers`` too, the module would load twice, as two module
# objects, each with its own copy of every class and constant.
if __name__.startswith("tests."):  # (run as a script, it is __main__: allowed)
    raise ImportError(
        "import the test helpers as 'diag_helpers' (from diag_helpers import ...), not as "
        f"{__name__!r}"
    )

HEIGHT, WIDTH, BLOCK = 48, 66, 3
SIDE = 12  # the model's input is 3 × SIDE × SIDE
CLASSES = 10
N_SAMPLES = 24
CROP = 0.75  # 36 × 36 at (6, 15): block aligned, so the 3× downscale works on whole blocks
DIM = 3 * SIDE * SIDE

BASE_STEPS = [
    "decode: {backend: pil, order: RGB, exif_orientation: false}",
    f"crop: {{fraction: {CROP}, rounding: google}}",
    f"resize: {{size: [{SIDE}, {SIDE}], method: bilinear, backend: pil}}",
    "cast: {dtype: float32}",
    "normalize: {mean: [127, 127, 127], std: [128, 128, 128]}",
    "layout: {order: NCHW}",
]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def block_image(rng: np.random.Generator, texture: float = 30.0) -> np.ndarray:
    """One 48 × 66 image, constant on 3 × 3 blocks: smooth colour field plus block texture of
    standard deviation ``texture``."""
    rows, cols = HEIGHT // BLOCK, WIDTH // BLOCK
    yy, xx = np.mgrid[0:rows, 0:cols].astype(np.float64)
    field = np.zeros((rows, cols, 3))
    for channel in range(3):
        for _ in range(3):
            fy, fx = rng.uniform(-0.35, 0.35, 2)
            field[:, :, channel] += rng.uniform(25, 45) * np.sin(
                fy * yy + fx * xx + rng.uniform(0, 6.3)
            )
    noise = rng.normal(0, texture, (rows, cols, 3))
    blocks = np.clip(128 + field + noise, 0, 255).round().astype(np.uint8)
    return np.repeat(np.repeat(blocks, BLOCK, axis=0), BLOCK, axis=1)


def make_data(folder: Path, kind: str = "png", seed: int = 7) -> list[str]:
    """``N_SAMPLES`` images and ``labels.csv`` in ``folder``.

    ``kind``: ``png`` (lossless), ``smooth`` (lossless, no block texture: what a model with a
    built-in crop can resample without losing much), ``exif`` (JPEG, quality 100, 4:4:4, EXIF
    orientation 6: the pixels are stored rotated, a viewer turns them 90° clockwise), ``cmyk``
    (CMYK JPEG: Pillow's and OpenCV's decoders round its colour conversion differently).
    """
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    names, rows = [], ["file,class_index"]
    for index in range(N_SAMPLES):
        image = Image.fromarray(block_image(rng, 0.0 if kind == "smooth" else 30.0))
        if kind in ("png", "smooth"):
            name = f"img{index:02d}.png"
            image.save(folder / name)
        elif kind == "exif":
            name = f"img{index:02d}.jpg"
            exif = Image.Exif()
            exif[0x0112] = 6
            image.save(folder / name, quality=100, subsampling=0, exif=exif.tobytes())
        elif kind == "cmyk":
            name = f"img{index:02d}.jpg"
            image.convert("CMYK").save(folder / name, quality=95)
        else:
            raise ValueError(kind)
        names.append(name)
        rows.append(f"{name},{index % CLASSES}")
    (folder / "labels.csv").write_text("\n".join(rows) + "\n")
    return names


def checksums(folder: Path) -> str:
    return "".join(f"{sha256(p)}  {p.name}\n" for p in sorted(folder.iterdir()))


# --- models ---------------------------------------------------------------------------------


def classifier(
    seed: int = 3, smooth: bool = False, scale: float = 0.12
) -> tuple[np.ndarray, np.ndarray]:
    """(W (DIM, CLASSES), b): a random linear classifier over the NCHW-flattened input.

    ``smooth``: weights blurred over space (sensitive to where things are, not to pixel-level
    resampling differences: for the crop scenarios, whose model-side adapters resample)."""
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 1, (3, SIDE, SIDE, CLASSES))
    if smooth:
        kernel = np.array([1, 4, 6, 4, 1], np.float64) / 16
        for axis in (1, 2):
            w = np.apply_along_axis(lambda v: np.convolve(v, kernel, mode="same"), axis, w)
        w *= 3.0
    return (w.reshape(DIM, CLASSES) * scale).astype(np.float64), rng.normal(0, 0.1, CLASSES)


def write_onnx(path: Path, w: np.ndarray, b: np.ndarray, pre: str | None = None) -> str:
    """``logits = pre(x).flatten() @ w + b``; ``pre``: None, ``relu``, ``wrap`` (turn
    ``(u − 127) / 128`` into the uint8 wrap-around ``(u − 127) mod 256 / 128``) or ``unwrap``
    (the reverse). Returns the file's sha256."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes, source = [], "input"
    inits = [
        numpy_helper.from_array(w.astype(np.float32), "w"),
        numpy_helper.from_array(b.astype(np.float32), "b"),
    ]
    if pre == "relu":
        nodes.append(helper.make_node("Relu", ["input"], ["pre"]))
        source = "pre"
    elif pre == "wrap":  # (u − 127) mod 256 / 128 from (u − 127) / 128: negatives + 2
        inits += [
            numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
            numpy_helper.from_array(np.array(2.0, np.float32), "two"),
        ]
        nodes += [
            helper.make_node("Less", ["input", "zero"], ["negative"]),
            helper.make_node("Add", ["input", "two"], ["wrapped"]),
            helper.make_node("Where", ["negative", "wrapped", "input"], ["pre"]),
        ]
        source = "pre"
    elif pre == "unwrap":
        inits += [
            numpy_helper.from_array(np.array(1.004, np.float32), "limit"),
            numpy_helper.from_array(np.array(2.0, np.float32), "two"),
        ]
        nodes += [
            helper.make_node("Greater", ["input", "limit"], ["wrapped"]),
            helper.make_node("Sub", ["input", "two"], ["unwrapped"]),
            helper.make_node("Where", ["wrapped", "unwrapped", "input"], ["pre"]),
        ]
        source = "pre"
    elif pre is not None:
        raise ValueError(pre)
    nodes += [
        helper.make_node("Flatten", [source], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "w"], ["mm"]),
        helper.make_node("Add", ["mm", "b"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes,
        "diag",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, SIDE, SIDE])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", CLASSES])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return sha256(path)


def fold(
    w: np.ndarray, b: np.ndarray, adapter: Callable[[np.ndarray], np.ndarray]
) -> tuple[np.ndarray, np.ndarray]:
    """The classifier composed with an affine ``adapter`` (a function of one (3, SIDE, SIDE)
    tensor): ``W' = Tᵀ W`` and ``b' = b + W·T(0)``, found by probing the adapter."""
    zero = adapter(np.zeros((3, SIDE, SIDE))).reshape(-1)
    columns = np.empty((DIM, DIM))
    basis = np.zeros(DIM)
    for i in range(DIM):
        basis[i] = 1.0
        columns[:, i] = adapter(basis.reshape(3, SIDE, SIDE)).reshape(-1) - zero
        basis[i] = 0.0
    return columns.T @ w, b + zero @ w


# Adapters: what a re-exported model does to its input before the original classifier, so that
# it expects the named pipeline variant instead of the manifest's.


def flip_channels(x: np.ndarray) -> np.ndarray:
    return x[::-1]


def unreshape(x: np.ndarray) -> np.ndarray:
    """Undo 'the HWC buffer reshaped as CHW'."""
    return x.reshape(SIDE, SIDE, 3).transpose(2, 0, 1)


def affine(scale: Sequence[float], offset: Sequence[float]) -> Callable[[np.ndarray], np.ndarray]:
    s = np.asarray(scale, np.float64).reshape(-1, 1, 1)
    o = np.asarray(offset, np.float64).reshape(-1, 1, 1)
    return lambda x: x * s + o


def rotate_back(x: np.ndarray) -> np.ndarray:
    """Undo the 90° clockwise turn that EXIF orientation 6 applies."""
    return np.rot90(x, k=1, axes=(1, 2))


def blur_matrix() -> np.ndarray:
    """Pillow's antialiased 3× bilinear downscale of a block image, from its nearest downscale,
    along one axis: each block mixed with its neighbours by 1/9, 7/9, 1/9 (renormalised at the
    edges, as Pillow does)."""
    k = np.zeros((SIDE, SIDE))
    for i in range(SIDE):
        for j, weight in ((i - 1, 1 / 9), (i, 7 / 9), (i + 1, 1 / 9)):
            if 0 <= j < SIDE:
                k[i, j] = weight
    return k / k.sum(axis=1, keepdims=True)


def block_blur(x: np.ndarray) -> np.ndarray:
    """A model with a built-in blur: it expects nearest-downscaled input where the golden's
    model saw Pillow's antialiased bilinear."""
    k = blur_matrix()
    return np.einsum("ij,cjk,lk->cil", k, x, k)


def block_unblur(x: np.ndarray) -> np.ndarray:
    """The inverse (the blur matrix is diagonally dominant): a model that expects Pillow's
    antialiased bilinear where the golden's model saw a downscale without antialias."""
    inverse = np.linalg.inv(blur_matrix())
    return np.einsum("ij,cjk,lk->cil", inverse, x, inverse)


def crop_resample(
    top: float, left: float, height: float, width: float
) -> Callable[[np.ndarray], np.ndarray]:
    """Bilinear resampling of the region (in input pixels of the SIDE × SIDE tensor) to SIDE ×
    SIDE: a model with a built-in crop."""

    def matrix(start: float, size: float) -> np.ndarray:
        m = np.zeros((SIDE, SIDE))
        for i in range(SIDE):
            pos = start + (i + 0.5) * size / SIDE - 0.5
            lo = int(np.floor(pos))
            frac = pos - lo
            for j, weight in ((lo, 1 - frac), (lo + 1, frac)):
                m[i, min(max(j, 0), SIDE - 1)] += weight
        return m

    rows, cols = matrix(top, height), matrix(left, width)
    return lambda x: np.einsum("ij,cjk,lk->cil", rows, x, cols)


# --- manifests ------------------------------------------------------------------------------


def manifest_text(
    name: str,
    model: str,
    sha: str,
    steps: Sequence[str] = BASE_STEPS,
    dataset: str = "blocks",
    extra: str = "",
) -> str:
    head = textwrap.dedent(f"""\
        name: {name}
        version: "1"
        framework: {{name: onnxruntime}}
        model:
          format: onnx
          file: {{path: ../models/{model}, sha256: {sha}}}
        inputs:
          - name: input
            layout: NCHW
            preprocess:
        """)
    listed = "".join(f"      - {step}\n" for step in steps)
    tail = textwrap.dedent(f"""\
        dataset: {{name: {dataset}, checksums: {dataset}.sha256, classes: {CLASSES}}}
        runtime: {{batch_size: 8, devices: [cpu]}}
        """)
    return head + listed + tail + textwrap.dedent(extra)


def replace_step(steps: Sequence[str], index: int, *new: str) -> list[str]:
    return [*steps[:index], *new, *steps[index + 1 :]]
