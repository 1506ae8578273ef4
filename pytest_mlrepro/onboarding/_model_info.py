"""A model's signature, read from its file before any run; each format's reader imports only its
own framework, inside the function."""

from __future__ import annotations

import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .._files import sha256_file
from ..errors import MlreproError
from ..manifest import TF_FORMATS
from ..runners import (
    fixed_size,
    model_channels,
    model_layout,
    package_dir,
    read_onnx,
    vet_model_file,
)

# The framework that reads each format (TensorFlow's and TFLite's: the manifest's table).
FRAMEWORK_OF = dict.fromkeys(("torchscript", "torch_export", "state_dict"), "torch")
FRAMEWORK_OF |= {"onnx": "onnxruntime"} | {f: fw for fw, fs in TF_FORMATS.items() for f in fs}
_ONNX_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 10: "float16"}


class ModelReadError(MlreproError):
    """The model file cannot be read as the format it claims to be."""


@dataclass(frozen=True)
class PackageFile:
    """A file inside an installed package: ``{package: name, path: path}`` in a manifest."""

    name: str
    path: str  # relative to the package's folder, "/"-separated


@dataclass
class ModelInfo:
    path: Path
    format: str
    sha256: str
    input_name: str = "input"
    dtype: str = "float32"
    shape: tuple[int | None, ...] = ()
    classes: int | None = None
    external_data: dict[str, str] = field(default_factory=dict)
    builder: str | None = None
    notes: list[str] = field(default_factory=list)
    package: PackageFile | None = None  # where the file is, when inside an installed package
    artifact: str | None = None  # the artifact builder that makes the file in the cache
    size_source: str = "the model's input signature"  # what told the input size
    channels_source: str = "the model's input signature"  # what told the channel count
    # The layout when the signature alone cannot tell it (no 1, 3 or 4 on either channel axis):
    # told by the axis that matches the data's band count (``_data_probe.layout_from_bands``).
    layout_from_data: str | None = None

    @property
    def framework(self) -> str:
        return FRAMEWORK_OF[self.format]

    @property
    def layout(self) -> str:
        """By the runners' rule; NCHW when neither the shape nor the data's bands tell."""
        return model_layout(self.shape) or self.layout_from_data or "NCHW"

    @property
    def channels(self) -> int | None:
        """The channel count the input signature fixes (its channel axis), else None."""
        return model_channels(self.shape, self.layout)

    @property
    def resolution(self) -> tuple[int, int] | None:
        """(height, width) when the model fixes them."""
        if len(self.shape) != 4:
            return None
        h, w = (self.shape[2], self.shape[3]) if self.layout == "NCHW" else self.shape[1:3]
        return (h, w) if h and w else None


def guess_format(path: Path) -> str:
    """The manifest format of ``path`` from its name and, for ``.pt``/``.pth``, its contents."""
    suffix = path.suffix.lower()
    if path.is_dir() or (suffix == ".tar" and tarfile.is_tarfile(path)):
        return "saved_model"
    known = {".onnx": "onnx", ".pt2": "torch_export", ".keras": "keras", ".tflite": "tflite"}
    if suffix in known:
        return known[suffix]
    if suffix in (".pt", ".pth", ".ptl", ".bin") and zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
        if any("/code/" in n or n.endswith("/constants.pkl") for n in names):
            return "torchscript"
        return "state_dict"
    raise ModelReadError(
        f"{path}: cannot tell the model format from the name; give --format "
        "(onnx, torchscript, torch_export, state_dict, saved_model, keras, tflite)"
    )


def read_model(path: Path, fmt: str | None = None, builder: str | None = None) -> ModelInfo:
    """The signature of the model at ``path``; what only a run could tell stays unknown."""
    if not path.exists():
        raise ModelReadError(f"{path}: no such file")
    fmt = fmt or guess_format(path)
    if fmt == "saved_model" and path.is_dir():
        raise ModelReadError(
            f"{path} is a SavedModel folder: a 'saved_model' manifest pins one file, the "
            f"folder as a tar: tar -C {path} -cf {path.name}.tar . and pass the .tar"
        )
    if fmt == "state_dict" and builder is None:
        raise ModelReadError(
            f"{path} is a state_dict (weights only): the module's code makes the model. "
            "Register it in conftest.py (@pytest_mlrepro.model_builder('NAME', input_size=S) "
            "on a function that returns the nn.Module) and pass --builder NAME; or save the "
            "model with its code (torch.export.save: a .pt2 file; or TorchScript) or export it "
            "to ONNX, and run mlrepro init on that file (docs/onboarding.md)"
        )
    if path.is_file():
        # The checks a test run makes before a framework opens the file (size, a .pt2's
        # pickles), made before a byte is hashed or parsed: init runs on downloaded models.
        vet_model_file(path, fmt, "mlrepro init")
    info = ModelInfo(path=path, format=fmt, sha256=sha256_file(path), builder=builder)
    reader = {
        "onnx": _read_onnx,
        "torch_export": _read_torch_export,
        "keras": _read_keras,
        "tflite": _read_tflite,
        "saved_model": _read_saved_model,
    }.get(fmt)
    if reader is not None:
        try:
            reader(info)
        except MlreproError:  # ours, already saying what is wrong (a refusal included)
            raise
        except Exception as exc:  # a framework's own error: this file is not what it claims
            raise ModelReadError(
                f"{path}: cannot read it as a {fmt!r} model: {type(exc).__name__}: {exc}"
            ) from None
    return info


def _set_shape(info: ModelInfo, shape: Sequence[object], out: Sequence[object]) -> None:
    info.shape = tuple(fixed_size(d) for d in shape)
    info.classes = fixed_size(out[-1]) if out else None


def _read_onnx(info: ModelInfo) -> None:
    import onnx

    data, external = read_onnx(info.path, "mlrepro init")  # size checked, locations confined
    model = onnx.load_model_from_string(data)
    graph = model.graph
    initializers = {t.name for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in initializers]
    if len(inputs) != 1:
        raise ModelReadError(
            f"{info.path}: the model has {len(inputs)} inputs; an image classifier has one"
        )
    tensor = inputs[0].type.tensor_type
    info.input_name = inputs[0].name
    info.dtype = _ONNX_DTYPES.get(tensor.elem_type, "float32")
    out = graph.output[0].type.tensor_type.shape.dim if graph.output else []
    _set_shape(
        info,
        [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim],
        [d.dim_value if d.HasField("dim_value") else None for d in out],
    )
    for location, file in external.items():
        if not file.is_file():
            raise ModelReadError(f"{info.path}: its external data file {file} does not exist")
        info.external_data[location] = sha256_file(file)


def _read_torch_export(info: ModelInfo) -> None:
    import torch

    program = torch.export.load(str(info.path))
    user_inputs = list(program.graph_signature.user_inputs)
    nodes = {n.name: n for n in program.graph.nodes}
    if user_inputs and user_inputs[0] in nodes:
        node = nodes[user_inputs[0]]
        info.input_name = str(node.name)
        value = node.meta.get("val")
        if value is not None:
            info.shape = tuple(fixed_size(d) for d in value.shape)  # a symbolic dimension: None
    outputs = [n for n in program.graph.nodes if n.op == "output"]
    if outputs:
        first = outputs[0].args[0][0] if outputs[0].args and outputs[0].args[0] else None
        value = getattr(first, "meta", {}).get("val")
        if value is not None and value.shape:
            info.classes = fixed_size(value.shape[-1])


def _read_keras(info: ModelInfo) -> None:
    from ..runners.tensorflow import import_framework

    import_framework("tensorflow")
    import keras

    model = keras.models.load_model(str(info.path), compile=False)
    inp = model.inputs[0]
    info.input_name = str(getattr(inp, "name", "input")).split(":")[0]
    info.dtype = str(getattr(inp, "dtype", "float32")).replace("tf.", "")
    _set_shape(info, list(inp.shape), list(model.outputs[0].shape))


def _read_tflite(info: ModelInfo) -> None:
    from ..runners.tensorflow import litert_interpreter, signature_names

    interpreter_class, _ = litert_interpreter()
    interpreter = interpreter_class(model_path=str(info.path))
    detail = interpreter.get_input_details()[0]
    output = interpreter.get_output_details()[0]
    # The serving signature's name (``input``) when there is one, as the runner accepts it.
    info.input_name = str(signature_names(interpreter).get("input") or detail["name"])
    info.dtype = str(detail["dtype"].__name__)
    scale = float(detail.get("quantization", (0.0, 0))[0])
    if info.dtype in ("int8", "uint8") and scale != 0.0:
        # A quantised input: the runner quantises float32 data with the model's own scale.
        info.notes.append(
            f"the input is {info.dtype}, quantised (scale {scale:g}): the manifest feeds "
            "float32 values, which the TFLite runner quantises as the model says"
        )
        info.dtype = "float32"
    _set_shape(info, [int(d) for d in detail["shape"]], [int(d) for d in output["shape"]])
    # A fixed batch of 1 is what the runner resizes; a dim of -1 in shape_signature is free.
    info.shape = (None, *info.shape[1:])


def _read_saved_model(info: ModelInfo) -> None:
    from ..runners.tensorflow import import_framework, safe_extract

    import_framework("tensorflow")
    import tensorflow as tf

    with tempfile.TemporaryDirectory() as folder:
        safe_extract(info.path, Path(folder))
        loaded = tf.saved_model.load(folder)
        function = loaded.signatures["serving_default"]
        _, kwargs = function.structured_input_signature
        name, spec = next(iter(sorted(kwargs.items())))
        info.input_name = name
        info.dtype = spec.dtype.name
        outputs = list(function.structured_outputs.values())
        _set_shape(info, list(spec.shape), list(outputs[0].shape) if outputs else [])


def package_file(path: Path, project: Path) -> PackageFile | None:
    """``path`` outside ``project`` as a file of an installed package (not imported), or None."""
    resolved = path.resolve()
    if resolved.is_relative_to(project.resolve()):
        return None  # the project's own files keep their relative path
    for entry in sys.path:
        base = Path(entry or ".").resolve()
        if not resolved.is_relative_to(base):
            continue
        parts = resolved.relative_to(base).parts
        if len(parts) < 2 or not parts[0].isidentifier():
            continue
        if package_dir(parts[0]) == base / parts[0]:
            return PackageFile(parts[0], "/".join(parts[1:]))
    return None


def locate_package_file(text: str) -> tuple[Path, PackageFile]:
    """``package:NAME/PATH``: the file and its reference; refused when the package is not
    installed or the path leaves it."""
    name, _, rest = text.removeprefix("package:").partition("/")
    base = package_dir(name) if name else None
    if base is None or not rest:
        raise ModelReadError(
            f"{text}: give package:NAME/PATH, NAME an installed package"
            + (f" ({name!r} is not installed)" if name and base is None else "")
        )
    path = (base / rest).resolve()
    if not path.is_relative_to(base):
        raise ModelReadError(f"{text}: the path leaves package {name!r}")
    return path, PackageFile(name, path.relative_to(base).as_posix())
