"""TFLite flatbuffers on LiteRT's interpreter (``ai_edge_litert``), quantised tensors converted
with the model's own scale and zero point."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import DeviceUnavailable, SignatureError
from ...manifest import Manifest
from ...settings import Settings
from .._artifacts import verified
from .._signature import CheckedInput, ModelSignature, check_signature, shape_text
from .._warnings import loading
from ._config import Shape, dims


def litert_interpreter() -> tuple[Any, str]:
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
    return np.asarray((values.astype(np.int32) - zero_point) * np.float32(scale), np.float32)


class TFLiteRunner(CheckedInput):
    """A ``.tflite`` model on LiteRT's interpreter, quantised with the model's own parameters."""

    def __init__(
        self, interpreter: Any, info: dict[str, Any], model_content: bytes, output_index: int
    ) -> None:
        self.interpreter = interpreter
        # What the runner converts with: the quantisation its info records (absent: none).
        self.info = info
        details = interpreter.get_input_details()[0]
        self.input_index = details["index"]
        self.input_dtype = np.dtype(details["dtype"])
        self.input_shape: Shape = dims(details["shape_signature"])
        self.input_name = info["input"]
        self.output_index = output_index
        self._shape: tuple[int, ...] | None = None
        self.model_content = model_content  # the verified model, for layer_outputs

    @classmethod
    def load(cls, manifest: Manifest, device: str, settings: Settings) -> TFLiteRunner:
        if device == "cuda":
            raise DeviceUnavailable(
                "the TFLite interpreter runs on the CPU (its GPU delegate is for Android and iOS)",
                how="list only 'cpu' in runtime.devices for TFLite manifests",
            )
        interpreter_class, version = litert_interpreter()
        assert manifest.model.file is not None
        threads = manifest.runtime.intra_op_threads
        with verified(manifest, manifest.model.file, ("model", "file"), settings) as file:
            # The interpreter maps the verified copy; the mapping outlives its removal.
            with loading(manifest, f"LiteRT cannot load {file.path.name}", error=SignatureError):
                interpreter = interpreter_class(model_path=str(file.local), num_threads=threads)
            # The verified bytes, for layer fingerprints (a second interpreter that keeps
            # every intermediate tensor): read from the copy the interpreter mapped.
            model_content = file.local.read_bytes()
        inputs = interpreter.get_input_details()
        outputs = interpreter.get_output_details()
        # Names: the signature's (``input``), or the tensor's (``serving_default_input:0``).
        named = signature_names(interpreter)
        tensor_name = inputs[0]["name"]
        tensor_outputs = {d["name"]: d["name"] for d in outputs}
        choices = named.get("outputs") or tensor_outputs  # name → tensor name
        wanted = manifest.postprocess.output
        if wanted is not None and wanted not in choices and wanted in tensor_outputs:
            choices = tensor_outputs  # the output named by its tensor
        model_dtype = np.dtype(inputs[0]["dtype"]).name
        scale, zero_point = inputs[0]["quantization"]
        # Float data for a quantised input: the runner quantises, the pipeline stays in float.
        quantized_input = (
            model_dtype in ("int8", "uint8") and scale != 0.0 and manifest.input.dtype == "float32"
        )
        if quantized_input and len(inputs[0]["quantization_parameters"]["scales"]) > 1:
            raise SignatureError(
                f"{manifest.source}: the TFLite input is quantised per channel; feed it "
                f"{model_dtype} data from the pipeline"
            )
        shape = dims(inputs[0]["shape_signature"])
        shapes = {d["name"]: dims(d["shape_signature"]) for d in outputs}
        # One input is shown by its signature name; its tensor's name is accepted too.
        names = [d["name"] for d in inputs] if len(inputs) > 1 else [named.get("input")]
        signature = ModelSignature(
            "the TFLite model",
            shape,
            inputs=[n or tensor_name for n in names],
            aliases=[tensor_name],
            dtype="float32" if quantized_input else model_dtype,
            outputs={name: shapes.get(tensor) for name, tensor in choices.items()},
        )
        output = check_signature(manifest, signature)
        assert output is not None
        out_detail = next(d for d in outputs if d["name"] == choices[output])
        info: dict[str, Any] = {
            "framework": "tflite",
            "framework_version": version,
            "interpreter": "ai_edge_litert.interpreter.Interpreter",
            "device": "cpu",
            "format": "tflite",
            "input": manifest.input.name,
            "output": output,
            "output_tensor": out_detail["name"],
            "input_shape": shape_text(shape),
            "input_dtype": model_dtype,
            "intra_op_threads": threads or "default",
            "inter_op_threads": "n/a (the interpreter runs one op at a time)",
            "op_resolver": "AUTO (default delegates: XNNPACK)",
        }
        if quantized_input:
            info["input_quantization"] = {"scale": float(scale), "zero_point": int(zero_point)}
        out_scale, out_zero = out_detail["quantization"]
        if np.dtype(out_detail["dtype"]).kind in "iu" and out_scale != 0.0:
            info["output_quantization"] = {"scale": float(out_scale), "zero_point": int(out_zero)}
        return cls(interpreter, info, model_content, out_detail["index"])

    def layer_outputs(
        self, batch: np.ndarray
    ) -> list[tuple[str, str, np.ndarray, str, float | None]]:
        """From a second interpreter that keeps every tensor; dequantised, so that an int8 model
        compares with its float32 golden."""
        interpreter_class, _ = litert_interpreter()
        with warnings.catch_warnings():
            # LiteRT warns that preserving every tensor is for debugging and costs memory:
            # that is what this is, on one probe batch, and the warning would otherwise reach
            # the users' pytest output as if something were wrong with their model.
            warnings.filterwarnings("ignore", message=".*experimental_preserve_all_tensors")
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
                shown_scale = float(scale) if quantised else None
                found.append((str(detail["name"]), str(op["op_name"]), value, stored, shown_scale))
        return found

    def _prepare(self, batch: np.ndarray) -> np.ndarray:
        quant = self.info.get("input_quantization")
        if quant is not None:
            return quantize(batch, quant["scale"], quant["zero_point"], self.input_dtype)
        return np.ascontiguousarray(batch, dtype=self.input_dtype)

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        self.model_call(batch)()
        out = self.interpreter.get_tensor(self.output_index)
        quant = self.info.get("output_quantization")
        if quant is not None:
            return dequantize(out, quant["scale"], quant["zero_point"])
        return np.asarray(out, dtype=np.float32)

    def model_call(self, batch: np.ndarray) -> Callable[[], object]:
        """``invoke`` alone on ``batch`` (set once), for latency measurement."""
        if self._shape != batch.shape:
            self.interpreter.resize_tensor_input(self.input_index, list(batch.shape), strict=True)
            self.interpreter.allocate_tensors()
            self._shape = batch.shape
        self.interpreter.set_tensor(self.input_index, self._prepare(batch))
        invoke: Callable[[], object] = self.interpreter.invoke
        return invoke


def signature_names(interpreter: Any) -> dict[str, Any]:
    """The one serving signature's input name and output names → tensor names, if any."""
    with contextlib.suppress(Exception):
        signatures = interpreter.get_signature_list()
        if len(signatures) == 1:
            key = next(iter(signatures))
            runner = interpreter.get_signature_runner(key)
            inputs = runner.get_input_details()
            details = {d["index"]: d["name"] for d in interpreter.get_output_details()}
            out = {n: details.get(d["index"], n) for n, d in runner.get_output_details().items()}
            if len(inputs) == 1:
                return {"input": next(iter(inputs)), "outputs": out}
            return {"outputs": out}
    return {}
