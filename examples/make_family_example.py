"""Write data/FAMILY (128 files, labels.csv) and models/FAMILY.onnx: a logistic regression on
the per-channel means of the images preprocessed by a known recipe. FAMILY: grey16 (16-bit grey
PNGs, recipe /65535), rgba (RGBA PNGs whose class is the alpha shape, /255 then (x-0.5)/0.5) or
bands (13-band uint16 .npy arrays, C×H×W, per-band mean/std)."""

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from PIL import Image


def main(family: str) -> None:
    rng = np.random.default_rng(0)
    folder = Path("data") / family
    folder.mkdir(parents=True)
    rows, means = [], []
    for i in range(128):
        label = i % 2
        if family == "grey16":  # a faint class: 30000 or 30400 of 65535
            x = np.full((16, 16, 1), 30000 + 400 * label + rng.normal(0, 200))
            Image.fromarray(x[:, :, 0].astype(np.uint16)).save(folder / f"{i}.png")
            x = x / 65535
        elif family == "rgba":  # random colours; an opaque square of 6 or 12 pixels
            x = rng.integers(0, 256, (16, 16, 4)).astype(np.float64)
            x[:, :, 3] = 0
            side = 12 if label else 6
            x[8 - side // 2 : 8 + side // 2, 8 - side // 2 : 8 + side // 2, 3] = 255
            Image.fromarray(x.astype(np.uint8), "RGBA").save(folder / f"{i}.png")
            x = (x / 255 - 0.5) / 0.5
        else:  # 13 bands at 1000..13000; class 1: band 4 brighter, band 9 darker
            levels = (
                1000 * np.arange(1, 14)
                + rng.normal(0, 250, 13)
                + 300 * label * (np.arange(13) == 4)
                - 300 * label * (np.arange(13) == 9)
            )
            x = np.broadcast_to(np.rint(levels), (16, 16, 13)).astype(np.uint16)
            np.save(folder / f"{i}.npy", np.ascontiguousarray(x.transpose(2, 0, 1)))
        rows.append(f"{i}.{'npy' if family == 'bands' else 'png'},{label}\n")
        means.append(x.reshape(-1, x.shape[2]).mean(0))
    (folder / "labels.csv").write_text("file,class_index\n" + "".join(rows))
    f, y = np.asarray(means), np.arange(128) % 2
    if family == "bands":  # the recipe: each band's mean and std over the data set
        f = (f - f.mean(0)) / f.std(0)
    # Logistic regression by maximum likelihood (Newton's method), on standardised features.
    mu, sd = f.mean(0), np.where(f.std(0) > 0, f.std(0), 1)
    z = np.column_stack([(f - mu) / sd, np.ones(len(f))])
    beta = np.zeros(z.shape[1])
    for _ in range(50):
        p = 1 / (1 + np.exp(-z @ beta))
        beta += np.linalg.solve(
            z.T @ (z * (p * (1 - p))[:, None]) + 1e-6 * np.eye(len(beta)),
            z.T @ (y - p) - 1e-6 * beta,
        )
    w, b = beta[:-1] / sd, beta[-1] - (beta[:-1] / sd) @ mu
    c = f.shape[1]
    shape = ["batch", 16, 16, c] if family == "rgba" else ["batch", c, 16, 16]
    graph = helper.make_graph(
        [
            helper.make_node("ReduceMean", ["input", "axes"], ["m"], keepdims=0),
            helper.make_node("MatMul", ["m", "head"], ["s"]),
            helper.make_node("Add", ["s", "bias"], ["logits"]),
        ],
        family,
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 2])],
        [
            numpy_helper.from_array(np.asarray([1, 2] if family == "rgba" else [2, 3]), "axes"),
            numpy_helper.from_array(np.stack([np.zeros(c), w], 1).astype(np.float32), "head"),
            numpy_helper.from_array(np.asarray([0, b], np.float32), "bias"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    Path("models").mkdir(exist_ok=True)
    onnx.save(model, f"models/{family}.onnx")


if __name__ == "__main__":
    main(sys.argv[1])
