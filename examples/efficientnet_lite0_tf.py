"""EfficientNet-Lite0 in Keras (NHWC), with the ImageNet weights of the PyTorch package ported by
this module, and its TensorFlow artifacts: Keras ``.keras``, SavedModel (as a canonical tar),
TFLite float32 and TFLite int8.

The architecture is written out here from the code of ``efficientnet-lite-pytorch``
(``model.py``/``utils.py``) and checked against its ``state_dict`` key by key and shape by shape:

* stem: 3×3 conv, stride 2, 32 filters (``fix_head_stem``: not width-scaled), BN, ReLU6;
* 16 MBConv blocks from the lite block strings ``r1_k3_s11_e1_i32_o16`` …
  ``r1_k3_s11_e6_i192_o320``: 1×1 expand conv + BN + ReLU6 (absent when the expansion is 1),
  depthwise k×k conv + BN + ReLU6, 1×1 project conv + BN, no squeeze-excitation (``use_se``
  is off for lite models), identity skip when the stride is 1 and the filter counts match;
* head: 1×1 conv to 1280 (not width-scaled), BN, ReLU6, global average pool, dropout (identity
  at inference, left out), a dense layer to 1000 logits.

Every conv has no bias; BatchNorm has ``eps = 1e-3`` (the package's ``batch_norm_epsilon``; its
momentum 0.99 only matters in training). The PyTorch convs pad with ``Conv2dStaticSamePadding``,
computed for a 224×224 input: ``pad = max((ceil(i/s) − 1)·s + k − i, 0)``, split ``pad // 2``
before and the rest after, which is TensorFlow's ``SAME`` rule, so the Keras convs use
``padding="same"`` on a fixed 224×224 input (:func:`static_same_padding` checks it per layer).

Weights: conv ``(out, in, kh, kw)`` → Keras ``(kh, kw, in, out)``; depthwise ``(c, 1, kh, kw)`` →
``(kh, kw, c, 1)``; dense ``(out, in)`` → ``(in, out)``; BN ``weight, bias, running_mean,
running_var`` → ``gamma, beta, moving_mean, moving_variance``.

The TFLite int8 model is calibrated on photographs that ship with scikit-image (never on the
evaluation images): see :data:`CALIBRATION_IMAGES`.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import math
import os
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pytest_mlrepro.errors import BuildError, IntegrityError, Unavailable
from pytest_mlrepro.registry import artifact_builder

IMAGE_SIZE = 224
CLASSES = 1000
BN_EPSILON = 1e-3
STEM_FILTERS = 32
HEAD_FILTERS = 1280
# (repeats, kernel, stride, expand ratio, input filters, output filters): the lite block strings
# of efficientnet_lite_pytorch/utils.py (width and depth coefficients are 1.0 for lite0).
BLOCKS = (
    (1, 3, 1, 1, 32, 16),
    (2, 3, 2, 6, 16, 24),
    (2, 5, 2, 6, 24, 40),
    (3, 3, 2, 6, 40, 80),
    (3, 5, 1, 6, 80, 112),
    (4, 5, 2, 6, 112, 192),
    (1, 3, 1, 6, 192, 320),
)
INPUT_NAME = "input"
OUTPUT_NAME = "logits"
SIGNATURE = "serving_default"

# Calibration images for the int8 model: photographs shipped inside scikit-image's wheel
# (skimage/data), pinned by sha256 so that the int8 build is repeatable on one machine (on another
# CPU the converter may still write other bytes: the example pins fixed bytes). Not ImageNet's
# evaluation images: calibrating on the evaluation set would flatter the int8 figures.
CALIBRATION_IMAGES = {
    "astronaut.png": "88431cd9653ccd539741b555fb0a46b61558b301d4110412b5bc28b5e3ea6cb5",
    "chelsea.png": "596aa1e7cb875eb79f437e310381d26b338a81c2da23439704a73c4651e8c4bb",
    "coffee.png": "cc02f8ca188b167c775a7101b5d767d1e71792cf762c33d6fa15a4599b5a8de7",
    "rocket.jpg": "c2dd0de7c538df8d111e479619b129464d0269d0ae5fd18ca91d33a7fdfea95c",
    "motorcycle_left.png": "db18e9c4157617403c3537a6ba355dfeafe9a7eabb6b9b94cb33f6525dd49179",
    "motorcycle_right.png": "5fc913ae870e42a4b662314bc904d1786bcad8e2f0b9b67dba5a229406357797",
    "hubble_deep_field.jpg": "3a19c5dd8a927a9334bb1229a6d63711b1c0c767fb27e2286e7c84a3e2c2f5f4",
    "ihc.png": "f8dd1aa387ddd1f49d8ad13b50921b237df8e9b262606d258770687b0ef93cef",
    "camera.png": "b0793d2adda0fa6ae899c03989482bff9a42d3d5690fc7e3648f2795d730c23a",
    "brick.png": "7966caf324f6ba843118d98f7a07746d22f6a343430add0233eca5f6eaaa8fcf",
    "grass.png": "b6b6022426b38936c43a4ac09635cd78af074e90f42ffa8227ac8b7452d39f89",
    "coins.png": "f8d773fc9cfa6f4d8e5942dc34d0a0788fcaed2a4fefbbed0aef5398d7ef4cba",
}
# Crops per image: the evaluation recipe's centre square (0.875) and four corner squares at two
# scales, each also mirrored: 12 images × 18 = 216 calibration samples.
CALIBRATION_SCALES = (0.875, 0.6)


def static_same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """(before, after) padding of ``Conv2dStaticSamePadding`` for one spatial axis."""
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def tf_same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """(before, after) padding of TensorFlow's ``padding="SAME"`` (see tf.nn.convolution)."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


def block_plan() -> list[tuple[int, int, int, int, int]]:
    """The 16 blocks as (kernel, stride, expand ratio, input filters, output filters)."""
    plan = []
    for repeats, kernel, stride, expand, filters_in, filters_out in BLOCKS:
        plan.append((kernel, stride, expand, filters_in, filters_out))
        plan += [(kernel, 1, expand, filters_out, filters_out)] * (repeats - 1)
    return plan


class _Weights:
    """The torch state_dict, consumed key by key so that nothing is left unported."""

    def __init__(self, state: Mapping[str, np.ndarray]) -> None:
        self.state = dict(state)
        self.used: set[str] = set()

    def take(self, key: str, shape: tuple[int, ...]) -> np.ndarray:
        if key not in self.state:
            raise BuildError(f"the PyTorch weights have no {key!r}")
        value = np.asarray(self.state[key], dtype=np.float32)
        if value.shape != shape:
            raise BuildError(f"{key}: expected shape {shape}, the weights have {value.shape}")
        self.used.add(key)
        return value

    def conv(self, key: str, filters_in: int, filters_out: int, kernel: int) -> np.ndarray:
        w = self.take(f"{key}.weight", (filters_out, filters_in, kernel, kernel))
        return np.ascontiguousarray(w.transpose(2, 3, 1, 0))

    def depthwise(self, key: str, channels: int, kernel: int) -> np.ndarray:
        w = self.take(f"{key}.weight", (channels, 1, kernel, kernel))
        return np.ascontiguousarray(w.transpose(2, 3, 0, 1))

    def batchnorm(self, key: str, channels: int) -> list[np.ndarray]:
        self.used.add(f"{key}.num_batches_tracked")  # a training counter: nothing to port
        return [
            self.take(f"{key}.{name}", (channels,))
            for name in ("weight", "bias", "running_mean", "running_var")
        ]

    def check_all_used(self) -> None:
        left = sorted(set(self.state) - self.used)
        if left:
            raise BuildError(f"PyTorch weights left unported: {left[:5]} ({len(left)} in all)")


def build_keras(state: Mapping[str, np.ndarray]) -> Any:
    """The Keras model (input ``input``: N×224×224×3 float32, output ``logits``: N×1000) with
    the weights of the PyTorch ``state``, as numpy arrays keyed like the torch state_dict."""
    import keras
    from keras import layers

    weights = _Weights(state)
    pending: list[tuple[Any, list[np.ndarray]]] = []
    size = IMAGE_SIZE

    def conv(x: Any, key: str, name: str, filters_in: int, filters_out: int, kernel: int,
             stride: int) -> Any:  # fmt: skip
        nonlocal size
        _check_padding(key, size, kernel, stride)
        layer = layers.Conv2D(
            filters_out, kernel, strides=stride, padding="same", use_bias=False, name=name
        )
        pending.append((layer, [weights.conv(key, filters_in, filters_out, kernel)]))
        size = math.ceil(size / stride)
        return layer(x)

    def depthwise(x: Any, key: str, name: str, channels: int, kernel: int, stride: int) -> Any:
        nonlocal size
        _check_padding(key, size, kernel, stride)
        layer = layers.DepthwiseConv2D(
            kernel, strides=stride, padding="same", use_bias=False, name=name
        )
        pending.append((layer, [weights.depthwise(key, channels, kernel)]))
        size = math.ceil(size / stride)
        return layer(x)

    def batchnorm(x: Any, key: str, name: str, channels: int) -> Any:
        layer = layers.BatchNormalization(epsilon=BN_EPSILON, momentum=0.99, name=name)
        pending.append((layer, weights.batchnorm(key, channels)))
        return layer(x)

    def relu6(x: Any, name: str) -> Any:
        return layers.ReLU(max_value=6.0, name=name)(x)

    inputs = keras.Input(shape=(IMAGE_SIZE, IMAGE_SIZE, 3), name=INPUT_NAME, dtype="float32")
    x = conv(inputs, "_conv_stem", "stem_conv", 3, STEM_FILTERS, 3, 2)
    x = relu6(batchnorm(x, "_bn0", "stem_bn", STEM_FILTERS), "stem_relu6")
    for index, (kernel, stride, expand, filters_in, filters_out) in enumerate(block_plan()):
        key, name = f"_blocks.{index}", f"block{index:02d}"
        block_input = x
        channels = filters_in * expand
        if expand != 1:
            x = conv(x, f"{key}._expand_conv", f"{name}_expand_conv", filters_in, channels, 1, 1)
            x = batchnorm(x, f"{key}._bn0", f"{name}_expand_bn", channels)
            x = relu6(x, f"{name}_expand_relu6")
        x = depthwise(x, f"{key}._depthwise_conv", f"{name}_dwconv", channels, kernel, stride)
        x = relu6(batchnorm(x, f"{key}._bn1", f"{name}_dw_bn", channels), f"{name}_dw_relu6")
        x = conv(x, f"{key}._project_conv", f"{name}_project_conv", channels, filters_out, 1, 1)
        x = batchnorm(x, f"{key}._bn2", f"{name}_project_bn", filters_out)
        if stride == 1 and filters_in == filters_out:  # id_skip is on for every lite block
            x = layers.Add(name=f"{name}_add")([x, block_input])
    x = conv(x, "_conv_head", "head_conv", BLOCKS[-1][5], HEAD_FILTERS, 1, 1)
    x = relu6(batchnorm(x, "_bn1", "head_bn", HEAD_FILTERS), "head_relu6")
    x = layers.GlobalAveragePooling2D(name="avg_pool")(x)
    dense = layers.Dense(CLASSES, name=OUTPUT_NAME)
    outputs = dense(x)
    fc_weight = weights.take("_fc.weight", (CLASSES, HEAD_FILTERS))
    pending.append(
        (dense, [np.ascontiguousarray(fc_weight.T), weights.take("_fc.bias", (CLASSES,))])
    )
    weights.check_all_used()
    model = keras.Model(inputs, outputs, name="efficientnet_lite0")
    for layer, values in pending:
        layer.set_weights(values)
    return model


def _check_padding(key: str, size: int, kernel: int, stride: int) -> None:
    torch_pad = static_same_padding(size, kernel, stride)
    if torch_pad != tf_same_padding(size, kernel, stride):
        raise BuildError(
            f"{key}: PyTorch pads {torch_pad} at size {size}, TensorFlow's SAME differs"
        )


# --- the weights ----------------------------------------------------------------------------


def torch_state() -> dict[str, np.ndarray]:
    """The PyTorch package's weights (sha256-verified, ``weights_only=True``) as numpy arrays."""
    from .efficientnet_lite0 import _weights_path

    try:
        import torch
    except ImportError:
        raise Unavailable(
            "porting the EfficientNet-Lite0 weights needs torch to read the .pth file",
            how="pip install 'pytest-mlrepro[export]'",
        ) from None
    state = torch.load(str(_weights_path()), map_location="cpu", weights_only=True)
    return {key: value.numpy() for key, value in state.items()}


@functools.cache
def keras_model() -> Any:
    """The ported Keras model, built once per process (several builders use it)."""
    _require_tensorflow()
    return build_keras(torch_state())


def _require_tensorflow() -> None:
    try:
        import tensorflow  # noqa: F401
    except ImportError:
        raise Unavailable(
            "building the TensorFlow models needs TensorFlow",
            how="pip install 'pytest-mlrepro[tf]'",
        ) from None


# --- canonical files: byte-identical from run to run on one machine ----------------------------

_ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
_FIXED_DATE = "1980-01-01@00:00:00"


def canonical_keras_zip(data: bytes) -> bytes:
    """A ``.keras`` archive with its sources of run-to-run change removed: the zip entries'
    timestamps, ``metadata.json``'s ``date_saved`` and the memory addresses that
    ``config.json`` uses as ``shared_object_id``. Entry order and weights are kept."""
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(data)) as src,
        zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as dst,
    ):
        for info in src.infolist():
            content = src.read(info.filename)
            if info.filename == "metadata.json":
                meta = json.loads(content)
                meta["date_saved"] = _FIXED_DATE
                content = json.dumps(meta, sort_keys=True).encode()
            elif info.filename == "config.json":
                content = json.dumps(_renumber_shared_objects(json.loads(content))).encode()
            entry = zipfile.ZipInfo(info.filename, date_time=_ZIP_EPOCH)
            entry.external_attr = 0o644 << 16
            dst.writestr(entry, content)
    return out.getvalue()


def _renumber_shared_objects(config: Any) -> Any:
    """Keras marks objects shared between layers (the dtype policy) with ``shared_object_id``:
    the object's ``id()``, a memory address. Only equality matters when loading, so number them
    in order of appearance."""
    numbers: dict[Any, int] = {}

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                key: numbers.setdefault(value, len(numbers) + 1)
                if key == "shared_object_id"
                else walk(value)
                for key, value in node.items()
            }
        if isinstance(node, list):
            return [walk(item) for item in node]
        return node

    return walk(config)


def canonical_tar(folder: Path) -> bytes:
    """A tar of ``folder``'s files in sorted order with owners, modes and times fixed: the
    same bytes for the same content, wherever and whenever it is made."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for path in sorted(folder.rglob("*"), key=lambda p: p.relative_to(folder).as_posix()):
            name = path.relative_to(folder).as_posix()
            info = tarfile.TarInfo(name)
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if path.is_dir():
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                content = path.read_bytes()
                info.size, info.mode = len(content), 0o644
                tar.addfile(info, io.BytesIO(content))
    return out.getvalue()


# --- the artifacts --------------------------------------------------------------------------


def write_keras(target: Path) -> None:
    """The Keras v3 archive, canonicalised (see :func:`canonical_keras_zip`)."""
    model = keras_model()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.keras"
        model.save(path)
        target.write_bytes(canonical_keras_zip(path.read_bytes()))


def _serving_function(model: Any) -> Any:
    import tensorflow as tf

    # tensorflow has no type stubs: its decorator is untyped (the ignore), its tensors Any.
    @tf.function(  # type: ignore[untyped-decorator]
        input_signature=[
            tf.TensorSpec([None, IMAGE_SIZE, IMAGE_SIZE, 3], tf.float32, name=INPUT_NAME)
        ]
    )
    def serve(images: Any) -> dict[str, Any]:
        return {OUTPUT_NAME: model(images, training=False)}

    return serve


def _save_saved_model(folder: Path) -> None:
    """``tf.saved_model.save`` of a module holding the model and its serving function: the
    same bytes on every save, but for the fingerprint's uuid (cleared). Keras'
    ``ExportArchive`` would list the variables in a different order on every run."""
    import tensorflow as tf

    model = keras_model()
    module = tf.Module()
    module.model = model
    module.serve = _serving_function(model)
    tf.saved_model.save(module, str(folder), signatures={SIGNATURE: module.serve})
    _canonical_fingerprint(folder / "fingerprint.pb")


def _export_for_converter(folder: Path) -> None:
    """A SavedModel for the TFLite converter, through Keras' ``ExportArchive``: it re-creates
    the weights as plain ``tf.Variable``s, which the converter freezes into constants. (From the
    module above, the converter keeps READ_VARIABLE ops whose variables the interpreter never
    initialises: NaN outputs.) Its variable order changes from run to run, the converted
    flatbuffer does not."""
    import keras
    import tensorflow as tf

    model = keras_model()
    archive = keras.export.ExportArchive()
    archive.track(model)
    archive.add_endpoint(
        name=SIGNATURE,
        fn=lambda images: {OUTPUT_NAME: model(images, training=False)},
        input_signature=[
            tf.TensorSpec([None, IMAGE_SIZE, IMAGE_SIZE, 3], tf.float32, name=INPUT_NAME)
        ],
    )
    archive.write_out(str(folder), verbose=False)


def _canonical_fingerprint(path: Path) -> None:
    """``fingerprint.pb`` holds hashes of the SavedModel's content, and a random ``uuid`` (new on
    every save): the only byte that changes between two saves of the same model. Clear it."""
    if not path.is_file():
        return
    from tensorflow.core.protobuf import fingerprint_pb2

    fingerprint = fingerprint_pb2.FingerprintDef()
    fingerprint.ParseFromString(path.read_bytes())
    fingerprint.ClearField("uuid")
    path.write_bytes(fingerprint.SerializeToString(deterministic=True))


def write_saved_model(target: Path) -> None:
    """A SavedModel (signature ``serving_default``: ``input`` → ``logits``) as a canonical tar."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "saved_model"
        _save_saved_model(folder)
        target.write_bytes(canonical_tar(folder))


def _tflite_convert(configure: Any = None) -> bytes:
    """Convert to TFLite from a SavedModel (the converter's best-supported input);
    ``configure(converter)`` sets quantisation options."""
    import tensorflow as tf

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "saved_model"
        _export_for_converter(folder)
        converter = tf.lite.TFLiteConverter.from_saved_model(str(folder), [SIGNATURE])
        if configure is not None:
            configure(converter)
        return bytes(converter.convert())


def write_tflite_float32(target: Path) -> None:
    """TFLite float32: the graph converted as it is, no optimisation that changes numbers."""
    target.write_bytes(_tflite_convert())


def calibration_samples() -> Iterator[np.ndarray]:
    """The int8 calibration batches (1×224×224×3, the evaluation recipe's ``(x − 127) / 128``),
    from :data:`CALIBRATION_IMAGES`, in a fixed order."""
    from PIL import Image

    folder = _skimage_data()
    for name, digest in CALIBRATION_IMAGES.items():
        data = (folder / name).read_bytes()
        if hashlib.sha256(data).hexdigest() != digest:
            raise IntegrityError(
                f"calibration image {folder / name} does not match sha256 {digest}: the int8 "
                "model would not be reproducible (another scikit-image data release?)"
            )
        with Image.open(io.BytesIO(data)) as im:
            rgb = im.convert("RGB")
        for crop in _calibration_crops(rgb.width, rgb.height):
            square = rgb.crop(crop).resize((IMAGE_SIZE, IMAGE_SIZE), Image.Resampling.BILINEAR)
            for mirrored in (False, True):
                view = square.transpose(Image.Transpose.FLIP_LEFT_RIGHT) if mirrored else square
                array = (np.asarray(view, np.float32) - 127.0) / 128.0
                yield array[None]


def _calibration_crops(width: int, height: int) -> list[tuple[int, int, int, int]]:
    """Centre square at 0.875 of the shorter side (the evaluation crop), then the centre and
    four corners at 0.6, as PIL boxes (left, top, right, bottom)."""
    boxes = []
    for scale in CALIBRATION_SCALES:
        side = int(scale * min(width, height))
        centre = ((width - side + 1) // 2, (height - side + 1) // 2)
        corners = [centre] if scale == CALIBRATION_SCALES[0] else [
            centre, (0, 0), (width - side, 0), (0, height - side), (width - side, height - side)
        ]  # fmt: skip
        boxes += [(x, y, x + side, y + side) for x, y in corners]
    return boxes


def _skimage_data() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("skimage")  # the data files only: skimage is not imported
    if spec is None or not spec.submodule_search_locations:
        raise Unavailable(
            "the int8 model is calibrated on the photographs shipped with scikit-image, which "
            "is not installed",
            how="pip install 'pytest-mlrepro[example]'",
        )
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def write_tflite_int8(target: Path) -> None:
    """Full-integer TFLite: int8 weights and activations, int8 input and output (the runner
    quantises and dequantises with the model's scale and zero point)."""
    import tensorflow as tf

    def configure(converter: Any) -> None:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        converter.representative_dataset = lambda: ([s] for s in calibration_samples())
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        converter.inference_input_type = tf.int8
        converter.inference_output_type = tf.int8

    target.write_bytes(_tflite_convert(configure))


WRITERS = {
    "keras": write_keras,
    "saved_model": write_saved_model,
    "tflite_float32": write_tflite_float32,
    "tflite_int8": write_tflite_int8,
}
_UNAVAILABLE_EXIT = 3


def build_in_subprocess(kind: str, target: Path) -> None:
    """Run ``WRITERS[kind]`` in a fresh Python process. A SavedModel's function names and the
    TFLite tensor names carry counters of what the process traced before (``serve_1234``,
    ``efficientnet_lite0_1/``): only a fresh process gives the same bytes every time."""
    import subprocess
    import sys

    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run(
        [sys.executable, "-m", __name__, kind, str(target)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if done.returncode == _UNAVAILABLE_EXIT:
        message, _, how = done.stdout.strip().partition("\n")
        raise Unavailable(message, how=how)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise BuildError(f"building the {kind} model failed (exit {done.returncode}):\n{tail}")


@artifact_builder("efficientnet_lite0_keras", uses=("tensorflow-cpu", "keras", "h5py", "numpy"))
def build_keras_file(target: Path) -> None:
    """Registered builder: the ported model as a ``.keras`` file."""
    build_in_subprocess("keras", target)


@artifact_builder(
    "efficientnet_lite0_saved_model", uses=("tensorflow-cpu", "keras", "protobuf", "numpy")
)
def build_saved_model_file(target: Path) -> None:
    """Registered builder: the ported model as a SavedModel tar."""
    build_in_subprocess("saved_model", target)


@artifact_builder(
    "efficientnet_lite0_tflite_float32",
    uses=("tensorflow-cpu", "ai-edge-litert", "flatbuffers", "numpy"),
)
def build_tflite_float32(target: Path) -> None:
    """Registered builder: TFLite float32."""
    build_in_subprocess("tflite_float32", target)


@artifact_builder(
    "efficientnet_lite0_tflite_int8",
    uses=("tensorflow-cpu", "ai-edge-litert", "flatbuffers", "numpy", "scikit-image"),
)
def build_tflite_int8(target: Path) -> None:
    """Registered builder: TFLite int8, calibrated on scikit-image's photographs."""
    build_in_subprocess("tflite_int8", target)


def main(argv: list[str]) -> int:
    """``python -m examples.efficientnet_lite0_tf KIND TARGET``: write one artifact."""
    if len(argv) != 2 or argv[0] not in WRITERS:
        print(f"usage: KIND TARGET, KIND one of {', '.join(WRITERS)}")
        return 2
    try:
        WRITERS[argv[0]](Path(argv[1]))
    except Unavailable as exc:
        print(str(exc).removesuffix(f". {exc.how}") + "\n" + exc.how)
        return _UNAVAILABLE_EXIT
    return 0


__all__ = [
    "BLOCKS",
    "CALIBRATION_IMAGES",
    "build_keras",
    "calibration_samples",
    "canonical_keras_zip",
    "canonical_tar",
    "keras_model",
    "static_same_padding",
    "tf_same_padding",
]


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
