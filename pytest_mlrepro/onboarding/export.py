"""A PyTorch model as an ONNX file built into the mlrepro cache, repeatably, so that the model
file need not be committed: the manifest pins the sha256 of the file that the registered builder
makes (``model.file: {cache: NAME.onnx, build: NAME, sha256: ...}``). A conftest.py registers one
with :func:`onnx_artifact` (the example: docs/onboarding.md, "Exporting a PyTorch model
reproducibly"; ``examples/efficientnet_lite0.py`` does the same for the example's Lite0).

The file is byte-identical from run to run on one machine with the same torch version: the
TorchScript-based exporter (``dynamo=False``) traces an ``eval()`` module on a zero input of fixed
shape, with fixed input/output names, a fixed opset and only the batch dimension left free. It is
not byte-identical from one machine to the next (an Intel Xeon and an AMD EPYC wrote other bytes
with the same torch, onnx and protobuf): where the same file must run on every machine, fetch the
exported bytes (``model.file.url``, or a model mirror); a build that differs from the pin fails
naming this machine and the packages it used against the golden's.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

from ..errors import Unavailable
from ..registry import artifact_builder

DEFAULT_OPSET = 17


def export_onnx(
    module: object,
    target: Path,
    *,
    size: int | tuple[int, int] = 224,
    channels: int = 3,
    layout: str = "NCHW",
    opset: int = DEFAULT_OPSET,
    input_name: str = "input",
    output_name: str = "logits",
) -> None:
    """Write ``module`` (a ``torch.nn.Module``) to ``target`` as ONNX, repeatably on one machine."""
    try:
        import torch
    except ImportError:
        raise Unavailable(
            "exporting to ONNX needs torch", how="pip install 'pytest-mlrepro[export]'"
        ) from None
    height, width = (size, size) if isinstance(size, int) else size
    shape = (1, channels, height, width) if layout == "NCHW" else (1, height, width, channels)
    assert isinstance(module, torch.nn.Module)
    module.eval()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            (torch.zeros(*shape),),
            str(target),
            dynamo=False,
            opset_version=opset,
            input_names=[input_name],
            output_names=[output_name],
            dynamic_axes={input_name: {0: "batch"}, output_name: {0: "batch"}},
        )


def onnx_artifact(
    name: str,
    make_module: Callable[[], object],
    *,
    size: int | tuple[int, int] = 224,
    opset: int = DEFAULT_OPSET,
    layout: str = "NCHW",
) -> Callable[[Path], None]:
    """Register an artifact builder ``name`` that exports ``make_module()`` to the cache."""

    def build(target: Path) -> None:
        export_onnx(make_module(), target, size=size, opset=opset, layout=layout)

    return artifact_builder(name)(build)


__all__ = ["export_onnx", "onnx_artifact"]
