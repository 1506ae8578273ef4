"""Five held-out re-parametrisations of the example's EfficientNet-Lite0 ONNX model, each
expecting another input convention (colour order, value transform, layout); the geometry stays
the model's own (crop 0.875, bilinear), which is what discovery must find. Each variant is the
fixed Lite0 file (``$MLREPRO_DATA/models``) behind front ops that turn its convention back into
Lite0's (x − 127)/128 RGB NCHW, so all five classify exactly as Lite0 does, up to float rounding.

Used by tests/integration/test_discovery_resize.py and benchmarks/discovery.py."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pytest_mlrepro.onboarding._presets import CAFFE, IMAGENET, MINUS_ONE_ONE, RAW, ZERO_ONE, Values

LITE0 = "efficientnet_lite0-opset17.onnx"


@dataclass(frozen=True)
class Variant:
    name: str
    order: str  # the colour order the variant expects
    values: Values  # the value convention it expects (in its colour order, as the presets do)
    layout: str


VARIANTS = (
    Variant("bgr_caffe", "BGR", CAFFE, "NCHW"),
    Variant("rgb_zero_one_nhwc", "RGB", ZERO_ONE, "NHWC"),
    Variant("rgb_imagenet", "RGB", IMAGENET, "NCHW"),
    Variant("bgr_minus_one_one_nhwc", "BGR", MINUS_ONE_ONE, "NHWC"),
    Variant("rgb_raw", "RGB", RAW, "NCHW"),
)


def lite0_source(data: Path) -> Path:
    return data / "models" / LITE0


def write_variant(source: Path, variant: Variant, target: Path) -> Path:
    """Lite0 at ``source`` behind front ops that undo ``variant``'s convention, to ``target``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    inner = graph.input[0].name  # [batch, 3, 224, 224], (x - 127) / 128 RGB
    outer = "image"
    values = variant.values
    std = np.asarray(values.std or (1.0, 1.0, 1.0), np.float32)
    mean = np.asarray(values.mean or (0.0, 0.0, 0.0), np.float32)
    divisor = np.float32(values.divisor or 1.0)
    # v = (x / divisor - mean) / std, per channel in the variant's order: x = (v·std + mean)·d.
    consts = [
        numpy_helper.from_array((std * divisor).reshape(1, 3, 1, 1), "v_scale"),
        numpy_helper.from_array((mean * divisor).reshape(1, 3, 1, 1), "v_shift"),
        numpy_helper.from_array(np.asarray(127.0, np.float32), "v_127"),
        numpy_helper.from_array(np.asarray(128.0, np.float32), "v_128"),
        numpy_helper.from_array(np.asarray([2, 1, 0], np.int64), "v_flip"),
    ]
    nodes = []
    current = outer
    if variant.layout == "NHWC":
        nodes.append(helper.make_node("Transpose", [current], ["v_nchw"], perm=[0, 3, 1, 2]))
        current = "v_nchw"
    nodes += [
        helper.make_node("Mul", [current, "v_scale"], ["v_scaled"]),
        helper.make_node("Add", ["v_scaled", "v_shift"], ["v_raw"]),
    ]
    current = "v_raw"
    if variant.order == "BGR":
        nodes.append(helper.make_node("Gather", [current, "v_flip"], ["v_rgb"], axis=1))
        current = "v_rgb"
    nodes += [
        helper.make_node("Sub", [current, "v_127"], ["v_centred"]),
        helper.make_node("Div", ["v_centred", "v_128"], [inner]),
    ]
    shape: list[int | str] = (
        ["batch", 224, 224, 3] if variant.layout == "NHWC" else ["batch", 3, 224, 224]
    )
    old = list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes + old)
    graph.initializer.extend(consts)
    del graph.input[0]
    graph.input.insert(0, helper.make_tensor_value_info(outer, TensorProto.FLOAT, shape))
    onnx.checker.check_model(model)
    target.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(target))
    return target
