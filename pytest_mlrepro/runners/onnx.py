"""ONNX Runtime: CPU, and CUDA when the CUDA execution provider really loads."""

from __future__ import annotations

import functools
import json
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from ..errors import DeviceUnavailable
from ..manifest import Manifest
from ..settings import Settings
from ._artifacts import check_external_data, verified
from ._profiling import ProfiledCalls, ProfileUnavailable, ort_operator_calls
from ._signature import CheckedInput, ModelSignature, check_signature, fixed_size
from ._warnings import loading

# The manifest's runtime.graph_optimization (None: ONNX Runtime's default, all) to ORT's levels.
_GRAPH_LEVELS = {
    "all": "ORT_ENABLE_ALL",
    "extended": "ORT_ENABLE_EXTENDED",
    "basic": "ORT_ENABLE_BASIC",
    "disabled": "ORT_DISABLE_ALL",
}

_ORT_TYPES = {
    "tensor(float)": "float32",
    "tensor(float16)": "float16",
    "tensor(uint8)": "uint8",
    "tensor(int8)": "int8",
}


class OnnxRunner(CheckedInput):
    def __init__(
        self,
        session: ort.InferenceSession,
        input_name: str,
        input_shape: Sequence[object],
        output_name: str,
        model_bytes: bytes,
        options: Any,
    ) -> None:
        self.session = session
        self.input_name, self.input_shape = input_name, input_shape
        self.output_name = output_name
        self.model_bytes = model_bytes  # the verified model, for layer_outputs
        self.options = options
        # A model exported with a fixed batch dimension takes exactly that many samples a call.
        self.fixed_batch = fixed_size(input_shape[0]) if input_shape else None
        self.info: dict[str, Any] = {}

    @classmethod
    def load(
        cls, manifest: Manifest, device: str, settings: Settings, *, shares_cpu: bool = False
    ) -> OnnxRunner:
        assert manifest.model.file is not None
        runtime = manifest.runtime
        options = ort.SessionOptions()
        options.intra_op_num_threads = runtime.intra_op_threads or 0
        options.inter_op_num_threads = runtime.inter_op_threads or 0
        graph_level = _GRAPH_LEVELS[runtime.graph_optimization or "all"]
        options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, graph_level)
        options.log_severity_level = 3
        options.use_deterministic_compute = runtime.deterministic_ops
        if shares_cpu:
            # Between runs ORT's pool threads spin waiting for work by default: on cores that
            # preprocessing needs next, that is time taken from it (see load_runner).
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.add_session_config_entry("session.inter_op.allow_spinning", "0")
        if runtime.seed is not None:
            ort.set_seed(runtime.seed)  # random ops (RandomNormal, Dropout in training mode)
        providers: list[Any] = ["CPUExecutionProvider"]
        if device == "cuda":
            if "CUDAExecutionProvider" not in ort.get_available_providers():
                raise DeviceUnavailable(
                    "this onnxruntime build has no CUDAExecutionProvider",
                    how="pip install onnxruntime-gpu (instead of onnxruntime)",
                )
            providers.insert(0, ("CUDAExecutionProvider", {"device_id": 0}))
        with verified(manifest, manifest.model.file, ("model", "file"), settings) as model:
            check_external_data(manifest, model)  # every file ORT reads for the model is pinned
            with loading(
                manifest,
                f"{model.path} is not a model that onnxruntime {ort.__version__} can load",
                "; check that it is an ONNX model (model.format) and re-export it if it is damaged",
            ):
                session = ort.InferenceSession(str(model.local), options, providers=providers)
            # The verified bytes, for layer fingerprints (a second session that keeps every node
            # output): read from the copy the session loaded, never from the file again.
            model_bytes = model.local.read_bytes()
        if device == "cuda" and session.get_providers()[0] != "CUDAExecutionProvider":
            # ONNX Runtime falls back to the CPU silently when the CUDA libraries do not load.
            raise DeviceUnavailable(
                "the CUDA execution provider did not load (CUDA/cuDNN libraries missing or "
                "mismatched); ONNX Runtime fell back to the CPU",
                how="install the CUDA and cuDNN versions that this onnxruntime-gpu release "
                "requires",
            )
        declared = manifest.input
        inputs = {i.name: i for i in session.get_inputs()}
        fed = inputs.get(declared.name)  # None: the name check says so
        signature = ModelSignature(
            "the model",
            fed.shape if fed is not None else [],
            inputs=list(inputs),
            dtype=_ORT_TYPES.get(fed.type, fed.type) if fed is not None else None,
            outputs={o.name: o.shape for o in session.get_outputs()},
        )
        wanted = check_signature(manifest, signature)
        assert wanted is not None  # the model names its outputs
        runner = cls(session, declared.name, signature.shape, wanted, model_bytes, options)
        runner.info = {
            "framework": "onnxruntime",
            "framework_version": ort.__version__,
            "device": device,
            "providers": session.get_providers(),
            "intra_op_threads": runtime.intra_op_threads or "default (all physical cores)",
            "inter_op_threads": runtime.inter_op_threads or "default",
            "graph_optimization_level": graph_level,
            "deterministic_compute": runtime.deterministic_ops,
            "seed": runtime.seed,
            "input_shape": [d if isinstance(d, int) else str(d) for d in runner.input_shape],
        }
        if runner.fixed_batch is not None and runner.fixed_batch != runtime.batch_size:
            runner.info["model_batch"] = runner.fixed_batch  # batches are split and padded
        return runner

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        size = self.fixed_batch
        if size is None or len(batch) == size:
            scores: np.ndarray = self.session.run([self.output_name], {self.input_name: batch})[0]
            return scores
        # A fixed batch dimension: run at the model's batch, the last chunk padded with zeros
        # (their outputs are dropped), so that any runtime.batch_size and a short last batch work.
        outputs = []
        for start in range(0, len(batch), size):
            chunk = batch[start : start + size]
            if len(chunk) < size:
                padding = np.zeros((size - len(chunk), *chunk.shape[1:]), chunk.dtype)
                chunk = np.concatenate([chunk, padding])
            out = self.session.run([self.output_name], {self.input_name: chunk})[0]
            outputs.append(out[: min(size, len(batch) - start)])
        return np.concatenate(outputs)

    def layer_outputs(
        self, batch: np.ndarray
    ) -> list[tuple[str, str, np.ndarray, str | None, float | None]]:
        """Every node output in graph order, via an in-memory copy of the model (needs ``onnx``;
        no external data)."""
        import onnx

        if self.fixed_batch not in (None, len(batch)):
            return []
        from onnx import numpy_helper

        model = onnx.load_from_string(self.model_bytes)
        graph = model.graph
        constants = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
        # Only what the input flows into: constants and the weights' own arithmetic say nothing
        # about this input (and would only grow the golden).
        fed = {self.input_name}
        wanted: list[tuple[str, str, str, float | None]] = []  # (tensor, shown name, op, scale)
        outputs = {o.name for o in graph.output}
        for node in graph.node:
            if not any(name in fed for name in node.input):
                continue
            # A quantised tensor's scale (QuantizeLinear's second input, when a scalar
            # constant): a changed scale is a precision change of its own.
            scale = None
            if node.op_type == "QuantizeLinear" and len(node.input) > 1:
                value = constants.get(node.input[1])
                if value is not None and value.size == 1:
                    scale = float(value.reshape(()))
            names = [name for name in node.output if name]
            for name in names:
                fed.add(name)
                shown = node.name if len(names) == 1 and node.name else name
                wanted.append((name, shown, node.op_type, scale))
                if name not in outputs:
                    graph.output.append(onnx.ValueInfoProto(name=name))
                    outputs.add(name)
        session = ort.InferenceSession(
            model.SerializeToString(), self.options, providers=["CPUExecutionProvider"]
        )
        values = session.run([name for name, _, _, _ in wanted], {self.input_name: batch})
        return [
            (shown, op, np.asarray(v), None, scale)
            for (_, shown, op, scale), v in zip(wanted, values)
            # Shape arithmetic (int64 and int32 sizes) is not a layer's output.
            if np.asarray(v).dtype not in (np.int64, np.int32)
        ]

    def model_call(self, batch: np.ndarray) -> Callable[[], object]:
        """On CUDA through IO binding, so that the host-device copies are not timed."""
        if self.fixed_batch is not None and len(batch) != self.fixed_batch:
            # The model runs at its own batch size: what is timed is the split, padded run.
            return functools.partial(self, batch)
        return self._bound_call(self.session, batch)

    def _bound_call(self, session: ort.InferenceSession, batch: np.ndarray) -> Callable[[], object]:
        if self.info.get("device") == "cuda":
            binding = session.io_binding()
            on_gpu = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(batch), "cuda", 0)
            binding.bind_ortvalue_input(self.input_name, on_gpu)
            binding.bind_output(self.output_name, "cuda", 0)
            run_bound = session.run_with_iobinding
            wait = binding.synchronize_outputs

            def call() -> None:
                run_bound(binding)
                wait()

            call.keep_alive = on_gpu  # type: ignore[attr-defined]  # the input outlives the loop
            return call
        return functools.partial(session.run, [self.output_name], {self.input_name: batch})

    def operator_times(self, batch: np.ndarray, calls: int, warmup: int) -> ProfiledCalls:
        """From ONNX Runtime's profiler on a second session; ProfileUnavailable if it cannot."""
        if self.fixed_batch not in (None, len(batch)):
            raise ProfileUnavailable(
                f"the model runs at its own fixed batch of {self.fixed_batch} (split calls)"
            )
        with tempfile.TemporaryDirectory(prefix="mlrepro-ort-profile-") as folder:
            # The options are read when a session is made: this session's are left as they were.
            self.options.enable_profiling = True
            self.options.profile_file_prefix = str(Path(folder) / "profile")
            try:
                providers = self.session.get_providers()
                settings = self.session.get_provider_options()
                session = ort.InferenceSession(
                    self.model_bytes,
                    self.options,
                    providers=providers,
                    provider_options=[settings.get(p, {}) for p in providers],
                )
            except Exception as exc:  # a model whose weights live in external files
                raise ProfileUnavailable(f"onnxruntime could not profile it: {exc}") from None
            finally:
                self.options.enable_profiling = False
            call = self._bound_call(session, batch)
            for _ in range(warmup + calls):
                call()
            trace = Path(session.end_profiling())
            events = json.loads(trace.read_text(encoding="utf-8"))
        return ort_operator_calls(events, skip=warmup)
