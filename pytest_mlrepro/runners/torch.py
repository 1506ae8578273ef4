"""PyTorch: TorchScript files, ``torch.export`` archives, and registered builders + state_dict."""

from __future__ import annotations

import contextlib
import pickle
from typing import Any

import numpy as np
import torch

from .. import registry
from ..artifacts import verified
from ..errors import BuildError, DeviceUnavailable, IntegrityError, SignatureError
from ..settings import Settings
from ..spec import Manifest

_TORCH_TYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "uint8": torch.uint8,
    "int8": torch.int8,
}


def _set_threads(intra: int | None, inter: int | None) -> None:
    if intra:
        torch.set_num_threads(intra)
    if inter and torch.get_num_interop_threads() != inter:
        # Only settable before the first parallel work; the recorded value tells what held.
        with contextlib.suppress(RuntimeError):
            torch.set_num_interop_threads(inter)


class TorchRunner:
    def __init__(self, module: Any, device: torch.device, info: dict[str, Any]) -> None:
        self.module = module
        self.device = device
        self.info = info

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
        _set_threads(runtime.intra_op_threads, runtime.inter_op_threads)
        model = manifest.model
        if model.format == "state_dict":
            module = cls._from_builder(manifest, settings)
        else:
            assert model.file is not None
            path = verified(manifest, model.file, ("model", "file"), settings)
            if model.format == "torchscript":
                module = torch.jit.load(str(path), map_location="cpu")
            else:
                module = torch.export.load(str(path)).module()
        if hasattr(module, "eval") and model.format != "torch_export":
            module.eval()
        module = module.to(target)
        info = {
            "framework": "torch",
            "framework_version": torch.__version__,
            "device": device,
            "format": model.format,
            "intra_op_threads": torch.get_num_threads(),
            "inter_op_threads": torch.get_num_interop_threads(),
            "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
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
            raise manifest.error(
                ("model", "builder"),
                f"no model builder {model.builder!r} is "
                f"registered (registered: {known}); register one in conftest.py "
                f"with @pytest_mlrepro.model_builder({model.builder!r})",
            )
        path = verified(manifest, model.weights, ("model", "weights"), settings)
        try:
            state = torch.load(str(path), map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as exc:
            raise IntegrityError(
                f"{manifest.source}: refusing {path}: it is not a plain tensor file and loading "
                f"it would need to run code from the file (weights_only=True refused it): "
                f"{str(exc).splitlines()[0]}"
            ) from None
        if not isinstance(state, dict):
            raise BuildError(
                f"{manifest.source}: {path} holds a {type(state).__name__}, not a state_dict"
            )
        try:
            module = builder()
        except Exception as exc:
            raise BuildError(
                f"{manifest.source}: model builder {model.builder!r} failed: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        try:
            module.load_state_dict(state, strict=True)
        except RuntimeError as exc:
            raise SignatureError(
                f"{manifest.source}: the weights do not fit the model from "
                f"builder {model.builder!r}: {exc}"
            ) from None
        return module

    def check_batch(self, batch: np.ndarray, layout: str) -> None:
        """PyTorch modules declare no input signature; shape errors surface on the first call."""

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            tensor = torch.from_numpy(batch).to(self.device)
            try:
                out = self.module(tensor)
            except RuntimeError as exc:
                first = str(exc).splitlines()[0]
                raise SignatureError(
                    f"the model rejected a batch of shape {list(batch.shape)}: {first}"
                ) from None
            if isinstance(out, (tuple, list)):
                out = out[0]
            return out.float().cpu().numpy()
