"""PyTorch: TorchScript files, ``torch.export`` archives, and registered builders + state_dict."""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .. import registry
from .._visible import described
from ..errors import BuildError, DeviceUnavailable, IntegrityError, MlreproError, SignatureError
from ..manifest import Manifest
from ..settings import Settings
from ._artifacts import VerifiedFile, verified
from ._profiling import OperatorCalls, ProfiledCalls
from ._signature import CheckedInput, ModelSignature, check_signature
from ._warnings import first_line, loading
from .torch_archive import vet_export_archive, weights_only_refusal


def _set_determinism(seed: int | None, deterministic: bool) -> None:
    """Set at every load: the manifest, not an earlier one in the same process, decides."""
    if seed is not None:
        torch.manual_seed(seed)
    if deterministic:
        # cuBLAS needs a fixed workspace for deterministic results (read when CUDA initialises).
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cudnn.benchmark = False
    # torch.use_deterministic_algorithms without importing the compiler, whose import was most
    # of a first load (docs/measurements.md): the kernels read only the C++ flag.
    set_flag = getattr(torch._C, "_set_deterministic_algorithms", None)
    if sys.modules.get("torch._inductor.config") is not None or set_flag is None:
        torch.use_deterministic_algorithms(deterministic)
    else:
        set_flag(deterministic, warn_only=False)
    torch.backends.cudnn.deterministic = deterministic


# torch's own intra-op thread count, before any manifest changed it: a manifest that leaves
# runtime.intra_op_threads unset gets this, not what an earlier manifest in the process set.
_DEFAULT_INTRA_OP_THREADS = torch.get_num_threads()


def _load_state(manifest: Manifest, file: VerifiedFile) -> Any:
    """Loaded with ``weights_only=True``: a file that would run code is refused."""
    path = file.path
    with loading(
        manifest,
        f"{path} is not a torch.save file that torch {torch.__version__} can read",
        "; model.weights must name a state_dict saved with torch.save",
        field="weights",
    ):
        try:
            return torch.load(str(file.local), map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as exc:
            raise IntegrityError(
                f"{manifest.source}: refusing {path}: it is not a plain tensor file and loading "
                f"it would need to run code from the file (weights_only=True refused it): "
                f"{weights_only_refusal(exc)}"
            ) from None


class TorchRunner(CheckedInput):
    def __init__(self, module: Any, device: torch.device, info: dict[str, Any]) -> None:
        self.module = module
        self.device = device
        self.info = info
        # A module declares no input: its batches are not checked before it runs (a shape it
        # rejects is its own error, see __call__).
        self.input_name, self.input_shape = "input", ()

    @classmethod
    def load(cls, manifest: Manifest, device: str, settings: Settings) -> TorchRunner:
        if device == "cuda" and not torch.cuda.is_available():
            why = (
                "this torch build has no CUDA support"
                if torch.version.cuda is None
                else "torch sees no usable GPU"
            )
            raise DeviceUnavailable(why, how="install a CUDA build of torch and check nvidia-smi")
        target = torch.device(device)
        runtime = manifest.runtime
        torch.set_num_threads(runtime.intra_op_threads or _DEFAULT_INTRA_OP_THREADS)
        inter = runtime.inter_op_threads
        if inter and torch.get_num_interop_threads() != inter:
            # Only settable before the first parallel work; the recorded value tells what held.
            with contextlib.suppress(RuntimeError):
                torch.set_num_interop_threads(inter)
        _set_determinism(runtime.seed, runtime.deterministic_ops)
        model = manifest.model
        if model.format == "state_dict":
            module = cls._from_builder(manifest, settings)
        else:
            assert model.file is not None
            with verified(manifest, model.file, ("model", "file"), settings) as file:
                kind = "TorchScript" if model.format == "torchscript" else "torch.export"
                if model.format != "torchscript":
                    # torch.export.load may unpickle code: the archive is vetted first.
                    vet_export_archive(file.local, manifest.source, shown=file.path)
                # torch's warnings (torch.jit.load's DeprecationWarning in 2.13) are issued
                # after the load: -W error never makes one a damaged archive (_warnings).
                with loading(
                    manifest,
                    f"{file.path} is not a {kind} archive that this torch {torch.__version__} "
                    "can load",
                    "; check model.format",
                ):
                    if model.format == "torchscript":
                        jit_load: Callable[..., Any] = torch.jit.load  # untyped in torch
                        module = jit_load(str(file.local), map_location="cpu")
                    else:
                        module = torch.export.load(str(file.local)).module()
        if hasattr(module, "eval") and model.format != "torch_export":
            module.eval()
        found = input_shape(module, manifest.input.layout)
        if found is not None:  # a module declares no names, dtype or outputs: its input shape
            shape, source = found
            check_signature(manifest, ModelSignature("the model", shape, source=source))
        module = module.to(target)
        info = {
            "framework": "torch",
            "framework_version": torch.__version__,
            "device": device,
            "format": model.format,
            "intra_op_threads": torch.get_num_threads(),
            "inter_op_threads": torch.get_num_interop_threads(),
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
            "cudnn_deterministic": torch.backends.cudnn.deterministic,
            "seed": runtime.seed,
        }
        if device == "cuda":
            info["gpu"] = torch.cuda.get_device_name(0)
            info["cudnn_allow_tf32"] = torch.backends.cudnn.allow_tf32
            info["matmul_allow_tf32"] = torch.backends.cuda.matmul.allow_tf32
        return cls(module, target, info)

    @staticmethod
    def _from_builder(manifest: Manifest, settings: Settings) -> Any:
        model = manifest.model
        assert model.builder is not None and model.weights is not None
        builder = registry.get_model_builder(model.builder)
        if builder is None:
            known = ", ".join(registry.registered()["model_builders"]) or "none"
            why = (
                f"no model builder {model.builder!r} is registered (registered: {known}); register "
                f"one in conftest.py with @pytest_mlrepro.model_builder({model.builder!r})"
            )
            raise manifest.error(("model", "builder"), why)
        with verified(manifest, model.weights, ("model", "weights"), settings) as file:
            state = _load_state(manifest, file)

        def refused(error: type[MlreproError], field: str, why: str) -> MlreproError:
            return error(manifest.error(("model", field), why).format())

        if not isinstance(state, dict):
            why = f"{file.path} holds a {type(state).__name__}, not a state_dict"
            raise refused(BuildError, "weights", why)
        try:
            module = builder()
        except Exception as exc:
            why = f"model builder {model.builder!r} failed: {type(exc).__name__}: {exc}"
            raise refused(BuildError, "builder", why) from exc
        if not isinstance(module, torch.nn.Module):
            why = (
                f"model builder {model.builder!r} returned {described(module)}, not a "
                "torch.nn.Module: return the model's module (its weights are loaded into it)"
            )
            raise refused(BuildError, "builder", why)
        try:
            module.load_state_dict(state, strict=True)
        except RuntimeError as exc:
            why = f"the weights do not fit the model from builder {model.builder!r}: {exc}"
            raise refused(SignatureError, "weights", why) from None
        return module

    def layer_outputs(self, batch: np.ndarray) -> list[tuple[str, str, np.ndarray]]:
        """Every leaf module's output in call order, via forward hooks (none for TorchScript)."""
        found: list[tuple[str, str, np.ndarray]] = []
        handles = []

        def hook(name: str, module: Any, args: Any, output: Any) -> None:
            if isinstance(output, torch.Tensor):
                found.append((name, type(module).__name__, output.float().cpu().numpy()))

        try:
            for name, module in self.module.named_modules():
                if name and not any(True for _ in module.children()):
                    handles.append(module.register_forward_hook(functools.partial(hook, name)))
            self(batch)
        finally:
            for handle in handles:
                handle.remove()
        return found

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            tensor = torch.from_numpy(batch).to(self.device)
            try:
                out = self.module(tensor)
            except RuntimeError as exc:
                raise SignatureError(
                    f"the model rejected a batch of shape {list(batch.shape)}: {first_line(exc)}"
                ) from None
            if isinstance(out, (tuple, list)):
                out = out[0]
            scores: np.ndarray = out.float().cpu().numpy()
            return scores

    def model_call(self, batch: np.ndarray) -> Callable[[], object]:
        """Waits for the device: CUDA calls return before the kernels finish."""
        tensor = torch.from_numpy(np.ascontiguousarray(batch)).to(self.device)
        module, device = self.module, self.device

        def call() -> None:
            with torch.inference_mode():
                module(tensor)
            if device.type == "cuda":
                torch.cuda.synchronize(device)

        return call

    def operator_times(self, batch: np.ndarray, calls: int, warmup: int) -> ProfiledCalls:
        """Each op type's self time from ``torch.profiler`` (a module's ops carry no node name)."""
        from torch.profiler import ProfilerActivity, profile

        call = self.model_call(batch)
        for _ in range(warmup):
            call()
        cuda = self.device.type == "cuda"
        activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if cuda else [])]
        per_call: list[dict[str, float]] = []
        durations = []
        for _ in range(calls):
            with profile(activities=activities) as prof:
                start = time.perf_counter()
                call()
                durations.append(time.perf_counter() - start)
            times: dict[str, float] = {}
            for e in prof.key_averages():
                us = e.self_device_time_total if cuda else e.self_cpu_time_total
                if us > 0:
                    times[e.key] = times.get(e.key, 0.0) + us * 1e-6
            per_call.append(times)
        names = sorted({name for times in per_call for name in times})
        kind = "device" if cuda else "CPU"
        return ProfiledCalls(
            source=f"torch.profiler: self {kind} time per op type (key_averages)",
            call_seconds=tuple(durations),
            operators=tuple(
                OperatorCalls(name, name, None, tuple(t.get(name, 0.0) for t in per_call))
                for name in names
            ),
        )


def input_shape(module: Any, layout: str) -> tuple[list[object], str | None] | None:
    """A ``torch.export`` program's first rank-4 input, else a first ``Conv2d``'s channels, or
    None."""
    graph = getattr(module, "graph", None)
    if isinstance(module, torch.fx.GraphModule) and graph is not None:
        for node in graph.nodes:
            value = node.meta.get("val") if node.op == "placeholder" else None
            if isinstance(value, torch.Tensor) and value.dim() == 4:
                return [int(d) if isinstance(d, int) else str(d) for d in value.shape], None
        return None
    if not isinstance(module, torch.nn.Module) or isinstance(module, torch.jit.ScriptModule):
        return None
    for name, leaf in module.named_modules():
        if any(True for _ in leaf.children()) or not any(True for _ in leaf.parameters(False)):
            continue
        if not isinstance(leaf, torch.nn.Conv2d):
            return None  # the first layer with weights is not a convolution: nothing to read
        c = int(leaf.in_channels)
        shape: list[object] = ["?", c, "?", "?"] if layout == "NCHW" else ["?", "?", "?", c]
        return shape, f"the model's first convolution {name!r} is {leaf}"
    return None
