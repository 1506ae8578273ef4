"""TensorFlow and TFLite: SavedModel, Keras ``.keras``, TF1 frozen graphs, and TFLite flatbuffers.

TensorFlow formats run on TensorFlow (CPU, or its first GPU when it sees one). TFLite files run on
LiteRT's interpreter, ``ai_edge_litert.interpreter.Interpreter``: ``tf.lite.Interpreter`` is
deprecated since TensorFlow 2.18 and warns that it is scheduled for deletion; LiteRT is the same
interpreter API, maintained, and does not need TensorFlow installed.

Every runner checks the manifest's input (name, dtype, layout, shape) against the model's own
signature when it loads, and each batch's shape before the model sees it: an NHWC model fed an
NCHW pipeline is a :class:`SignatureError` naming both layouts, not a silent 0%.
"""

from __future__ import annotations

import contextlib
import tarfile
import tempfile
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import DeviceUnavailable, IntegrityError, SignatureError
from ..manifest import Manifest
from ..settings import Settings
from ._artifacts import verified

DEFAULT_SIGNATURE = "serving_default"
Shape = list[int | None]


# --- signature checks shared by every format -----------------------------------------------


def _shape_text(shape: Sequence[int | None]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _channels_last(shape: Sequence[int | None]) -> bool | None:
    """Whether a rank-4 image input is NHWC (True), NCHW (False), or cannot be told (None)."""
    if len(shape) != 4:
        return None
    first, last = shape[1] in (1, 3, 4), shape[3] in (1, 3, 4)
    if last and not first:
        return True
    if first and not last:
        return False
    return None


def check_declared_input(manifest: Manifest, name: str, shape: Shape, dtype: str) -> None:
    """The manifest's input against the model's signature, before any data flows: the layout
    (when the model's shape tells it) and the dtype (a quantised TFLite input also accepts
    float32: the runner quantises it)."""
    declared = manifest.input
    channels_last = _channels_last(shape)
    if channels_last is not None and (declared.layout == "NHWC") != channels_last:
        model_layout = "NHWC" if channels_last else "NCHW"
        raise SignatureError(
            manifest.error(
                ("inputs", 0, "layout"),
                f"the model input {name!r} is {model_layout} {_shape_text(shape)}, the manifest "
                f"declares {declared.layout}: a layout mismatch; end the preprocessing with "
                f"'layout: {{order: {model_layout}}}' and declare 'layout: {model_layout}'",
            ).format()
        )
    if declared.dtype != dtype:
        raise SignatureError(
            manifest.error(
                ("inputs", 0, "dtype"),
                f"model input {name!r} is {dtype}, the manifest declares {declared.dtype}",
            ).format()
        )


def check_batch_shape(name: str, expected: Shape, batch: np.ndarray, layout: str) -> None:
    """A batch against the model's input shape (None: any size), before the model runs."""
    got = list(batch.shape)
    if len(expected) != len(got):
        raise SignatureError(
            f"the model input {name!r} has rank {len(expected)} {_shape_text(expected)}, the "
            f"pipeline produces {got} ({layout})"
        )
    if all(want is None or want == size for want, size in zip(expected[1:], got[1:])):
        return
    hint = "a size mismatch (check the crop and resize steps)"
    if sorted(d for d in expected[1:] if d is not None) == sorted(got[1:]):
        channels_last = _channels_last(expected)
        model_layout = None if channels_last is None else ("NHWC" if channels_last else "NCHW")
        hint = (
            f"a layout mismatch: the model is {model_layout}, the pipeline {layout}"
            if model_layout
            else "a layout mismatch (the same sizes in another order)"
        )
    raise SignatureError(
        f"the model input {name!r} expects {_shape_text(expected)}, the pipeline produces "
        f"{got} ({layout}): {hint}"
    )


def _choose_output(manifest: Manifest, outputs: Sequence[str], what: str) -> str:
    wanted = manifest.postprocess.output
    if wanted is None:
        if len(outputs) == 1:
            return outputs[0]
        raise SignatureError(
            manifest.error(
                ("postprocess", "output"),
                f"the {what} has outputs {list(outputs)}: name the one that holds the class "
                "scores with postprocess.output",
            ).format()
        )
    if wanted not in outputs:
        raise SignatureError(
            manifest.error(
                ("postprocess", "output"),
                f"the {what}'s outputs are {list(outputs)}, postprocess.output names {wanted!r}",
            ).format()
        )
    return wanted


def _runtime_setting(manifest: Manifest, name: str, default: Any) -> Any:
    """A runtime setting that not every version of the schema has (seed, deterministic_ops)."""
    return getattr(manifest.runtime, name, default)


# --- TensorFlow -----------------------------------------------------------------------------


def import_framework(name: str) -> None:
    """Import the framework's module now (ImportError if it is installed but broken)."""
    if name == "tflite":
        _interpreter_class()
    else:
        _tensorflow()


def _tensorflow() -> Any:
    import tensorflow as tf

    return tf


def _configure_tensorflow(tf: Any, manifest: Manifest) -> dict[str, Any]:
    """Threads, determinism and seed; returns what is in effect (TensorFlow fixes its thread
    pools when it first runs an op, after which a different request cannot apply)."""
    runtime = manifest.runtime
    notes = []
    threading = tf.config.threading
    for kind, requested in (
        ("intra_op", runtime.intra_op_threads),
        ("inter_op", runtime.inter_op_threads),
    ):
        getter = getattr(threading, f"get_{kind}_parallelism_threads")
        setter = getattr(threading, f"set_{kind}_parallelism_threads")
        if requested and getter() != requested:
            try:
                setter(requested)
            except RuntimeError:
                notes.append(
                    f"{kind}_threads {requested} requested, but TensorFlow had already started "
                    f"with {getter() or 'its default'} in this process"
                )
    seed = _runtime_setting(manifest, "seed", None)
    if seed is not None:
        tf.random.set_seed(seed)
    deterministic = bool(_runtime_setting(manifest, "deterministic_ops", False))
    if deterministic:
        tf.config.experimental.enable_op_determinism()
    info: dict[str, Any] = {
        "intra_op_threads": threading.get_intra_op_parallelism_threads() or "default (all cores)",
        "inter_op_threads": threading.get_inter_op_parallelism_threads() or "default",
        "tf_deterministic_ops": deterministic,
        "seed": seed,
    }
    if notes:
        info["threads_note"] = "; ".join(notes)
    return info


def _tf_device(tf: Any, device: str) -> tuple[str, dict[str, Any]]:
    if device != "cuda":
        return "/CPU:0", {}
    gpus = tf.config.list_physical_devices("GPU")
    if not gpus:
        why = (
            "this TensorFlow build has no CUDA support (e.g. tensorflow-cpu)"
            if not tf.test.is_built_with_cuda()
            else "TensorFlow sees no usable GPU"
        )
        raise DeviceUnavailable(why, how="pip install 'tensorflow[and-cuda]' and check nvidia-smi")
    details = tf.config.experimental.get_device_details(gpus[0])
    return "/GPU:0", {
        "gpu": details.get("device_name", gpus[0].name),
        "tensor_float_32": tf.config.experimental.tensor_float_32_execution_enabled(),
    }


def _tf_dtype_name(dtype: Any) -> str:
    return str(getattr(dtype, "name", dtype))


def _dims(shape: Any) -> Shape:
    return [None if d is None or d < 0 else int(d) for d in list(shape)]


def _safe_extract(archive: Path, target: Path) -> None:
    """Extract a SavedModel tar: plain files and folders only, every path inside ``target``."""
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        for member in members:
            name = Path(member.name)
            if name.is_absolute() or ".." in name.parts or not (member.isfile() or member.isdir()):
                raise IntegrityError(
                    f"{archive}: refusing member {member.name!r}: a SavedModel archive holds "
                    "only plain files and folders inside it"
                )
        # members checked above; the "data" filter too where this Python has it
        if hasattr(tarfile, "data_filter"):
            tar.extractall(target, members=members, filter="data")
        else:
            tar.extractall(target, members=members)
    if not (target / "saved_model.pb").is_file():
        raise IntegrityError(f"{archive}: no saved_model.pb at the top of the archive")


class TensorFlowRunner:
    """A SavedModel signature, a Keras model or a frozen graph, called on numpy batches."""

    def __init__(
        self,
        call: Callable[[np.ndarray], np.ndarray],
        input_name: str,
        input_shape: Shape,
        info: dict[str, Any],
    ) -> None:
        self._call = call
        self.input_name = input_name
        self.input_shape = input_shape
        self.info = info

    @classmethod
    def load(cls, manifest: Manifest, device: str, settings: Settings) -> TensorFlowRunner:
        tf = _tensorflow()
        threads = _configure_tensorflow(tf, manifest)
        tf_device, device_info = _tf_device(tf, device)
        model = manifest.model
        assert model.file is not None
        loader = {
            "saved_model": cls._saved_model,
            "keras": cls._keras,
            "frozen_graph": cls._frozen_graph,
        }[model.format]
        # The loaders read the verified copy (its file name is the original's, for messages).
        with (
            verified(manifest, model.file, ("model", "file"), settings) as file,
            tf.device(tf_device),
        ):
            call, name, shape, dtype, output, extra = loader(tf, manifest, file.local, tf_device)
        check_declared_input(manifest, name, shape, dtype)
        info = {
            "framework": "tensorflow",
            "framework_version": tf.__version__,
            "device": device,
            "tf_device": tf_device,
            "format": model.format,
            **extra,
            "input": name,
            "output": output,
            "input_shape": _shape_text(shape),
            **threads,
            **device_info,
        }
        return cls(call, name, shape, info)

    @staticmethod
    def _saved_model(
        tf: Any, manifest: Manifest, path: Path, tf_device: str
    ) -> tuple[Callable[[np.ndarray], np.ndarray], str, Shape, str, str, dict[str, Any]]:
        if not tarfile.is_tarfile(path):
            raise SignatureError(
                f"{manifest.source}: {path.name} is not a tar archive: a 'saved_model' file is "
                "the SavedModel folder as a tar (tar -C <folder> -cf model.tar .)"
            )
        folder = tempfile.TemporaryDirectory(prefix="mlrepro-savedmodel-")
        _safe_extract(path, Path(folder.name))
        loaded = tf.saved_model.load(folder.name)
        name = manifest.model.signature or DEFAULT_SIGNATURE
        signatures = dict(loaded.signatures)
        if name not in signatures:
            raise SignatureError(
                manifest.error(
                    ("model", "signature"),
                    f"the SavedModel has signatures {sorted(signatures)}, the manifest asks for "
                    f"{name!r} (model.signature)",
                ).format()
            )
        signature = signatures[name]
        _, specs = signature.structured_input_signature
        declared = manifest.input.name
        if declared not in specs:
            raise SignatureError(
                manifest.error(
                    ("inputs", 0, "name"),
                    f"signature {name!r} has inputs {sorted(specs)}, the manifest names "
                    f"{declared!r}",
                ).format()
            )
        if len(specs) != 1:
            raise SignatureError(
                f"{manifest.source}: signature {name!r} takes {len(specs)} inputs "
                f"{sorted(specs)}; image classification feeds one"
            )
        spec = specs[declared]
        outputs = signature.structured_outputs
        output = _choose_output(manifest, sorted(outputs), f"signature {name!r}")

        def call(batch: np.ndarray) -> np.ndarray:
            with tf.device(tf_device):
                scores: np.ndarray = signature(**{declared: tf.constant(batch)})[output].numpy()
                return scores

        # The loaded object and its files live as long as the runner's call does.
        # (The ignores on keep_alive: mypy has no attributes on a function object.)
        call.keep_alive = (loaded, folder)  # type: ignore[attr-defined]
        call.signature = signature  # type: ignore[attr-defined]  # for layer_outputs
        weakref.finalize(call, folder.cleanup)
        return (
            call,
            declared,
            _dims(spec.shape),
            _tf_dtype_name(spec.dtype),
            output,
            {"signature": name},
        )

    @staticmethod
    def _keras(
        tf: Any, manifest: Manifest, path: Path, tf_device: str
    ) -> tuple[Callable[[np.ndarray], np.ndarray], str, Shape, str, str, dict[str, Any]]:
        import keras

        try:
            # safe_mode refuses to deserialise Python lambdas: nothing in the file runs as code.
            model = keras.saving.load_model(path, compile=False, safe_mode=True)
        except (ValueError, TypeError, OSError) as exc:
            raise SignatureError(
                f"{manifest.source}: Keras cannot load {path.name}: {str(exc).splitlines()[0]}"
            ) from None
        if len(model.inputs) != 1:
            raise SignatureError(
                f"{manifest.source}: the Keras model takes {len(model.inputs)} inputs; image "
                "classification feeds one"
            )
        tensor = model.inputs[0]
        name = tensor.name
        if manifest.input.name != name:
            raise SignatureError(
                manifest.error(
                    ("inputs", 0, "name"),
                    f"the Keras model's input is {name!r}, the manifest names "
                    f"{manifest.input.name!r}",
                ).format()
            )
        output_names = list(getattr(model, "output_names", None) or [])
        output = _choose_output(manifest, output_names or ["output_0"], "Keras model")
        position = output_names.index(output) if output_names else 0
        shape = _dims(tensor.shape)
        spec = tf.TensorSpec([None, *shape[1:]], _tf_dtype_name(tensor.dtype))

        # tensorflow has no type stubs: its decorator is untyped (the ignore), its tensors Any.
        @tf.function(input_signature=[spec], reduce_retracing=True)  # type: ignore[untyped-decorator]
        def forward(images: Any) -> Any:
            out = model(images, training=False)
            return out[position] if isinstance(out, (list, tuple)) else out

        def call(batch: np.ndarray) -> np.ndarray:
            with tf.device(tf_device):
                scores: np.ndarray = forward(tf.constant(batch)).numpy()
                return scores

        call.keras_model = model  # type: ignore[attr-defined]  # for layer_outputs

        call.keep_alive = model  # type: ignore[attr-defined]
        return (
            call,
            name,
            shape,
            _tf_dtype_name(tensor.dtype),
            output,
            {"keras_version": keras.__version__},
        )

    @staticmethod
    def _frozen_graph(
        tf: Any, manifest: Manifest, path: Path, tf_device: str
    ) -> tuple[Callable[[np.ndarray], np.ndarray], str, Shape, str, str, dict[str, Any]]:
        v1 = tf.compat.v1
        graph_def = v1.GraphDef()
        try:
            graph_def.ParseFromString(path.read_bytes())
        except Exception as exc:  # protobuf's DecodeError
            raise SignatureError(
                f"{manifest.source}: {path.name} is not a TensorFlow GraphDef: {exc}"
            ) from None
        graph = tf.Graph()
        with graph.as_default():
            v1.import_graph_def(graph_def, name="")
        input_tensor = _graph_tensor(graph, manifest.input.name, manifest, "input")
        if input_tensor.op.type != "Placeholder":
            raise SignatureError(
                f"{manifest.source}: {input_tensor.name!r} is a {input_tensor.op.type} op, not "
                "a Placeholder: name the graph's input"
            )
        if manifest.postprocess.output is not None:
            output_tensor = _graph_tensor(graph, manifest.postprocess.output, manifest, "output")
        else:
            sinks = _sink_tensors(graph)
            if len(sinks) != 1:
                raise SignatureError(
                    f"{manifest.source}: a frozen graph declares no outputs and it ends in "
                    f"{[t.name for t in sinks][:8]}: name the one with the class scores with "
                    "postprocess.output (e.g. 'logits:0')"
                )
            output_tensor = sinks[0]
        runtime = manifest.runtime
        config = v1.ConfigProto(
            intra_op_parallelism_threads=runtime.intra_op_threads or 0,
            inter_op_parallelism_threads=runtime.inter_op_threads or 0,
            device_count={"GPU": 1 if tf_device.startswith("/GPU") else 0},
        )
        session = v1.Session(graph=graph, config=config)

        def call(batch: np.ndarray) -> np.ndarray:
            scores: np.ndarray = session.run(output_tensor, {input_tensor: batch})
            return scores

        weakref.finalize(call, session.close)
        shape = _dims(input_tensor.shape.as_list()) if input_tensor.shape.rank is not None else []
        return (
            call,
            input_tensor.name,
            shape,
            _tf_dtype_name(input_tensor.dtype),
            output_tensor.name,
            {
                # Per-session thread pools: a frozen graph gets the manifest's counts.
                "session_intra_op_threads": runtime.intra_op_threads or "default",
                "session_inter_op_threads": runtime.inter_op_threads or "default",
            },
        )

    def check_batch(self, batch: np.ndarray, layout: str) -> None:
        """The batch's shape against the model's input signature, before the model runs."""
        if self.input_shape:
            check_batch_shape(self.input_name, self.input_shape, batch, layout)

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        return np.asarray(self._call(batch))

    def layer_outputs(self, batch: np.ndarray) -> list[tuple[str, str, np.ndarray]]:
        """Every layer's output on ``batch``, in the model's order, as (name, op, value). A Keras
        model: a second model over the loaded one whose outputs are all its layers'. A
        SavedModel: every op of its signature's graph that computes on the input (constants
        and the arithmetic on weights left out), fetched from the graph with its variables
        frozen (:func:`_graph_op_outputs`). Frozen graphs give none."""
        import keras

        model = getattr(self._call, "keras_model", None)
        signature = getattr(self._call, "signature", None)
        if model is None and signature is not None:
            return _graph_op_outputs(signature, batch)
        if model is None:
            return []
        layers = [
            layer
            for layer in model.layers
            if not isinstance(layer, keras.layers.InputLayer) and len(layer._inbound_nodes) == 1
        ]
        tapped = keras.Model(model.inputs, [layer.output for layer in layers])
        values = tapped(batch, training=False)
        values = values if isinstance(values, (list, tuple)) else [values]
        return [
            (layer.name, type(layer).__name__, np.asarray(value))
            for layer, value in zip(layers, values)
        ]

    def synchronize(self) -> None:
        """Nothing to wait for: ``.numpy()`` returns when the device work is done."""

    def model_call(self, batch: np.ndarray) -> Callable[[], object]:
        """The model call alone on ``batch``, for latency measurement."""
        call = self._call
        return lambda: call(batch)


# Ops that move or describe tensors without computing on their values: not layers.
_NOT_LAYERS = frozenset(
    {"Const", "Placeholder", "Identity", "IdentityN", "NoOp", "Shape", "StridedSlice", "Pack",
     "Reshape", "Squeeze", "ExpandDims", "Cast"}
)  # fmt: skip


def _graph_op_outputs(signature: Any, batch: np.ndarray) -> list[tuple[str, str, np.ndarray]]:
    """The outputs of the ops of a SavedModel signature that compute on its input, in graph
    order. The signature's variables are frozen into constants (``convert_variables_to_
    constants_v2``, TensorFlow's own freezing), the graph is imported into a v1 function and
    pruned to fetch every such op's first output: one run gives them all."""
    tf = _tensorflow()
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    frozen = convert_variables_to_constants_v2(signature)
    graph_def = frozen.graph.as_graph_def()
    input_name = frozen.inputs[0].name

    def imported() -> None:
        tf.compat.v1.import_graph_def(graph_def, name="")

    wrapped = tf.compat.v1.wrap_function(imported, [])
    graph = wrapped.graph
    source = graph.get_tensor_by_name(input_name).op
    # Only ops downstream of the input: the weights' own arithmetic (batch-norm folding on
    # constants) is the same for every input and says nothing about where outputs diverge.
    reached = {source.name}
    layers = []
    for op in graph.get_operations():  # graph order is a topological order
        if op is source or not any(t.op.name in reached for t in op.inputs):
            continue
        reached.add(op.name)
        if op.type not in _NOT_LAYERS and op.outputs and op.outputs[0].dtype.is_floating:
            layers.append(op)
    if not layers:
        return []
    pruned = wrapped.prune(
        feeds=[graph.get_tensor_by_name(input_name)], fetches=[op.outputs[0] for op in layers]
    )
    values = pruned(tf.constant(batch))
    return [(op.name, op.type, np.asarray(v)) for op, v in zip(layers, values)]


def _graph_tensor(graph: Any, name: str, manifest: Manifest, what: str) -> Any:
    tensor_name = name if ":" in name else f"{name}:0"
    try:
        return graph.get_tensor_by_name(tensor_name)
    except (KeyError, ValueError):
        placeholders = [op.name for op in graph.get_operations() if op.type == "Placeholder"]
        known = f"; its placeholders: {placeholders[:8]}" if what == "input" else ""
        raise SignatureError(
            f"{manifest.source}: the frozen graph has no tensor {tensor_name!r} (the {what}){known}"
        ) from None


def _sink_tensors(graph: Any) -> list[Any]:
    """Outputs of ops that no other op consumes (constants and no-ops aside)."""
    consumed = {t.name for op in graph.get_operations() for t in op.inputs}
    return [
        t
        for op in graph.get_operations()
        if op.type not in ("Const", "NoOp", "Placeholder", "Assert")
        for t in op.outputs
        if t.name not in consumed
    ]


# --- TFLite (LiteRT) --------------------------------------------------------------------------


def _interpreter_class() -> tuple[Any, str]:
    import importlib.metadata

    from ai_edge_litert.interpreter import Interpreter

    return Interpreter, importlib.metadata.version("ai-edge-litert")


def quantize(values: np.ndarray, scale: float, zero_point: int, dtype: np.dtype) -> np.ndarray:
    """float → int8/uint8 as TFLite's QUANTIZE op does: ``round(x / scale) + zero_point``,
    rounding half away from zero (``std::round``), clamped to the type's range."""
    scaled = values.astype(np.float32) / np.float32(scale)
    rounded = np.sign(scaled) * np.floor(np.abs(scaled) + np.float32(0.5))
    info = np.iinfo(dtype)
    quantized: np.ndarray = np.clip(rounded + zero_point, info.min, info.max).astype(dtype)
    return quantized


def dequantize(values: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    """int8/uint8 → float32: ``(q − zero_point) × scale``."""
    floats: np.ndarray = ((values.astype(np.int32) - zero_point) * np.float32(scale)).astype(
        np.float32
    )
    return floats


class TFLiteRunner:
    """A ``.tflite`` model on LiteRT's interpreter; quantised inputs and outputs are converted
    with the model's own scale and zero point."""

    def __init__(self, interpreter: Any, info: dict[str, Any], quantized_input: bool) -> None:
        self.interpreter = interpreter
        self.info = info
        self.quantized_input = quantized_input
        details = interpreter.get_input_details()[0]
        self.input_index = details["index"]
        self.input_dtype = np.dtype(details["dtype"])
        self.input_quant = details["quantization"]
        self.input_shape: Shape = _dims(details["shape_signature"])
        self.input_name = info["input"]
        out = next(
            d for d in interpreter.get_output_details() if d["name"] == info["output_tensor"]
        )
        self.output_index = out["index"]
        self.output_dtype = np.dtype(out["dtype"])
        self.output_quant = out["quantization"]
        self._shape: tuple[int, ...] | None = None
        self.model_content: bytes | None = None  # the verified model, for layer_outputs

    @classmethod
    def load(cls, manifest: Manifest, device: str, settings: Settings) -> TFLiteRunner:
        if device == "cuda":
            raise DeviceUnavailable(
                "the TFLite interpreter runs on the CPU (its GPU delegate is for Android and iOS)",
                how="list only 'cpu' in runtime.devices for TFLite manifests",
            )
        interpreter_class, version = _interpreter_class()
        assert manifest.model.file is not None
        threads = manifest.runtime.intra_op_threads
        try:
            with verified(manifest, manifest.model.file, ("model", "file"), settings) as file:
                path = file.path
                # The interpreter maps the verified copy; the mapping outlives its removal.
                interpreter = interpreter_class(model_path=str(file.local), num_threads=threads)
                # The verified bytes, for layer fingerprints (a second interpreter that keeps
                # every intermediate tensor): read from the copy the interpreter mapped.
                model_content = file.local.read_bytes()
        except ValueError as exc:
            raise SignatureError(
                f"{manifest.source}: LiteRT cannot load {path.name}: {exc}"
            ) from None
        inputs = interpreter.get_input_details()
        outputs = interpreter.get_output_details()
        if len(inputs) != 1:
            raise SignatureError(
                f"{manifest.source}: the TFLite model takes {len(inputs)} inputs; image "
                "classification feeds one"
            )
        # Names: the signature's (``input``), or the tensor's (``serving_default_input:0``).
        signature_names = _signature_names(interpreter)
        tensor_name = inputs[0]["name"]
        names = [n for n in (signature_names.get("input"), tensor_name) if n]
        declared = manifest.input.name
        if declared not in names:
            raise SignatureError(
                manifest.error(
                    ("inputs", 0, "name"),
                    f"the TFLite model's input is {' or '.join(map(repr, names))}, the manifest "
                    f"names {declared!r}",
                ).format()
            )
        tensor_outputs = {d["name"]: d["name"] for d in outputs}
        choices = signature_names.get("outputs") or tensor_outputs  # name → tensor name
        wanted = manifest.postprocess.output
        if wanted is not None and wanted not in choices and wanted in tensor_outputs:
            output, output_tensor = wanted, wanted
        else:
            output = _choose_output(manifest, sorted(choices), "TFLite model")
            output_tensor = choices[output]
        model_dtype = np.dtype(inputs[0]["dtype"]).name
        scale, zero_point = inputs[0]["quantization"]
        quantized_input = model_dtype in ("int8", "uint8") and scale != 0.0
        if quantized_input and manifest.input.dtype == "float32":
            if len(inputs[0]["quantization_parameters"]["scales"]) > 1:
                raise SignatureError(
                    f"{manifest.source}: the TFLite input is quantised per channel; feed it "
                    f"{model_dtype} data from the pipeline"
                )
            effective = "float32"  # the runner quantises; the pipeline stays in float
        else:
            quantized_input = False
            effective = model_dtype
        shape = _dims(inputs[0]["shape_signature"])
        check_declared_input(manifest, declared, shape, effective)
        out_detail = next(d for d in outputs if d["name"] == output_tensor)
        info: dict[str, Any] = {
            "framework": "tflite",
            "framework_version": version,
            "interpreter": "ai_edge_litert.interpreter.Interpreter",
            "device": "cpu",
            "format": "tflite",
            "input": declared,
            "output": output,
            "output_tensor": out_detail["name"],
            "input_shape": _shape_text(shape),
            "input_dtype": model_dtype,
            "intra_op_threads": threads or "default",
            "inter_op_threads": "n/a (the interpreter runs one op at a time)",
            "op_resolver": "AUTO (default delegates: XNNPACK)",
        }
        if quantized_input:
            info["input_quantization"] = {"scale": float(scale), "zero_point": int(zero_point)}
        out_scale, out_zero = out_detail["quantization"]
        if np.dtype(out_detail["dtype"]).kind in "iu" and out_scale != 0.0:
            info["output_quantization"] = {
                "scale": float(out_scale),
                "zero_point": int(out_zero),
            }
        runner = cls(interpreter, info, quantized_input)
        runner.model_content = model_content
        return runner

    def check_batch(self, batch: np.ndarray, layout: str) -> None:
        """The batch's shape against the model's input signature, before the model runs."""
        check_batch_shape(self.input_name, self.input_shape, batch, layout)

    def layer_outputs(
        self, batch: np.ndarray
    ) -> list[tuple[str, str, np.ndarray, str, float | None]]:
        """Every op's output on ``batch``, in the interpreter's execution order, as (tensor
        name, op name, value, stored dtype): a second interpreter on the verified bytes that
        preserves every intermediate tensor. Quantised tensors are dequantised with their own
        scale and zero point (so that an int8 model compares with its float32 golden), and
        keep their stored dtype."""
        if self.model_content is None:
            return []
        interpreter_class, _ = _interpreter_class()
        traced = interpreter_class(
            model_content=self.model_content, experimental_preserve_all_tensors=True
        )
        details = traced.get_input_details()[0]
        traced.resize_tensor_input(details["index"], list(batch.shape), strict=True)
        traced.allocate_tensors()
        traced.set_tensor(details["index"], self._prepare(batch))
        traced.invoke()
        tensors = {t["index"]: t for t in traced.get_tensor_details()}
        found = []
        for op in traced._get_ops_details():  # the only API that lists ops with their outputs
            if op["op_name"] == "DELEGATE":
                continue  # a delegate's node repeats the outputs of the ops it took over
            for index in op["outputs"]:
                if index < 0 or index not in tensors:
                    continue
                detail = tensors[index]
                value = np.asarray(traced.get_tensor(index))
                stored = value.dtype.name
                scale, zero_point = detail["quantization"]
                quantised = value.dtype.kind in "iu" and bool(scale)
                if quantised:
                    value = dequantize(value, scale, zero_point)
                found.append(
                    (
                        str(detail["name"]),
                        str(op["op_name"]),
                        value,
                        stored,
                        float(scale) if quantised else None,
                    )
                )
        return found

    def _prepare(self, batch: np.ndarray) -> np.ndarray:
        if self.quantized_input:
            scale, zero_point = self.input_quant
            return quantize(batch, scale, zero_point, self.input_dtype)
        return np.ascontiguousarray(batch, dtype=self.input_dtype)

    def _resize(self, shape: tuple[int, ...]) -> None:
        """Resize the input tensor to the batch's shape (dynamic dimensions only: strict)."""
        if self._shape != shape:
            self.interpreter.resize_tensor_input(self.input_index, list(shape), strict=True)
            self.interpreter.allocate_tensors()
            self._shape = shape

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        self._resize(tuple(batch.shape))
        self.interpreter.set_tensor(self.input_index, self._prepare(batch))
        self.interpreter.invoke()
        out = self.interpreter.get_tensor(self.output_index)
        if "output_quantization" in self.info:
            scale, zero_point = self.output_quant
            return dequantize(out, scale, zero_point)
        return np.asarray(out, dtype=np.float32)

    def synchronize(self) -> None:
        """Nothing to wait for: ``invoke`` returns when the outputs are computed."""

    def model_call(self, batch: np.ndarray) -> Callable[[], object]:
        """``invoke`` alone on ``batch`` (set once), for latency measurement."""
        self._resize(tuple(batch.shape))
        self.interpreter.set_tensor(self.input_index, self._prepare(batch))
        invoke: Callable[[], object] = self.interpreter.invoke
        return invoke


def _signature_names(interpreter: Any) -> dict[str, Any]:
    """The serving signature's input name and output names → tensor names, when the model
    has exactly one signature with one input."""
    with contextlib.suppress(Exception):
        signatures = interpreter.get_signature_list()
        if len(signatures) == 1:
            key = next(iter(signatures))
            runner = interpreter.get_signature_runner(key)
            inputs = runner.get_input_details()
            outputs = runner.get_output_details()
            out = {}
            details = {d["index"]: d["name"] for d in interpreter.get_output_details()}
            for name, detail in outputs.items():
                out[name] = details.get(detail["index"], name)
            if len(inputs) == 1:
                return {"input": next(iter(inputs)), "outputs": out}
            return {"outputs": out}
    return {}
