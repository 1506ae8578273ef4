"""ONNX Runtime: CPU, and CUDA when the CUDA execution provider really loads."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnxruntime as ort

from ..artifacts import verified
from ..errors import DeviceUnavailable, SignatureError
from ..settings import Settings
from ..spec import Manifest

_ORT_TYPES = {
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(uint8)": "uint8",
    "tensor(int8)": "int8",
}


class OnnxRunner:
    def __init__(
        self, session: ort.InferenceSession, input_name: str, output_name: str, info: dict[str, Any]
    ) -> None:
        self.session = session
        self.input_name = input_name
        self.output_name = output_name
        self.info = info
        self.expected_shape = session.get_inputs()[0].shape

    @classmethod
    def load(cls, manifest: Manifest, device: str, settings: Settings) -> OnnxRunner:
        assert manifest.model.file is not None
        path = verified(manifest, manifest.model.file, ("model", "file"), settings)
        runtime = manifest.runtime
        options = ort.SessionOptions()
        options.intra_op_num_threads = runtime.intra_op_threads or 0
        options.inter_op_num_threads = runtime.inter_op_threads or 0
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        if device == "cuda":
            if "CUDAExecutionProvider" not in ort.get_available_providers():
                raise DeviceUnavailable(
                    "this onnxruntime build has no CUDAExecutionProvider",
                    how="pip install onnxruntime-gpu (instead of onnxruntime)",
                )
            providers: list[Any] = [
                ("CUDAExecutionProvider", {"device_id": 0}),
                "CPUExecutionProvider",
            ]
        else:
            providers = ["CPUExecutionProvider"]
        session = ort.InferenceSession(str(path), options, providers=providers)
        if device == "cuda" and session.get_providers()[0] != "CUDAExecutionProvider":
            # ONNX Runtime falls back to the CPU silently when the CUDA libraries do not load.
            raise DeviceUnavailable(
                "the CUDA execution provider did not load (CUDA/cuDNN "
                "libraries missing or mismatched); ONNX Runtime fell back "
                "to the CPU",
                how="install the CUDA and cuDNN versions that "
                "this onnxruntime-gpu release requires",
            )
        inputs = {i.name: i for i in session.get_inputs()}
        declared = manifest.input
        if declared.name not in inputs:
            raise SignatureError(
                f"{manifest.source}: the model's inputs are {sorted(inputs)}, "
                f"the manifest names {declared.name!r}"
            )
        model_type = _ORT_TYPES.get(inputs[declared.name].type, inputs[declared.name].type)
        if model_type != declared.dtype:
            raise SignatureError(
                f"{manifest.source}: model input {declared.name!r} is "
                f"{model_type}, the manifest declares {declared.dtype}"
            )
        outputs = [o.name for o in session.get_outputs()]
        wanted = manifest.postprocess.output or outputs[0]
        if wanted not in outputs:
            raise SignatureError(
                f"{manifest.source}: the model's outputs are {outputs}, "
                f"postprocess.output names {wanted!r}"
            )
        runner = cls(session, declared.name, wanted, {})
        runner.info = {
            "framework": "onnxruntime",
            "framework_version": ort.__version__,
            "device": device,
            "providers": session.get_providers(),
            "intra_op_threads": runtime.intra_op_threads or "default (all physical cores)",
            "inter_op_threads": runtime.inter_op_threads or "default",
            "graph_optimization_level": "ORT_ENABLE_ALL",
            "input_shape": [d if isinstance(d, int) else str(d) for d in runner.expected_shape],
        }
        return runner

    def check_batch(self, batch: np.ndarray, layout: str) -> None:
        shape = self.expected_shape
        if len(shape) != batch.ndim:
            raise SignatureError(
                f"the model input {self.input_name!r} has rank {len(shape)} "
                f"{shape}, the pipeline produces {batch.shape} ({layout})"
            )
        for want, got in zip(shape[1:], batch.shape[1:]):
            if isinstance(want, int) and want != got:
                raise SignatureError(
                    f"the model input {self.input_name!r} expects {shape}, the pipeline "
                    f"produces {list(batch.shape)} ({layout}): a layout or size mismatch"
                )

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        return self.session.run([self.output_name], {self.input_name: batch})[0]
