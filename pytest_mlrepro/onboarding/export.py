"""A PyTorch model exported to ONNX in the mlrepro cache rather than committed: the same bytes on
one machine (not across CPUs: docs/example.md), which the manifest pins."""

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
