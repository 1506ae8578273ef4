"""Train the second example's grey-digit classifier and write it as ONNX, a PyTorch state_dict
and TFLite (``examples/digits/README.md``).

    python examples/train_digits.py [--data DIGITS_TRAIN] [--out examples/digits]

The data: ``digits-train/`` (898 grey 8×8 PNGs, ``labels.csv``), by default under
``$MLREPRO_DATA`` (else ``../shared/data``). Seeded and deterministic on the CPU (one thread,
torch's deterministic algorithms, full-batch training in a fixed order): a rerun on the same
machine writes the same weights; the three files make the same predictions as the committed ones
on the test half (``tests/examples/test_digits_example.py``, slow). Under a minute on 2 cores.

The pixels are read exactly as the manifests' pipeline reads them: Pillow mode ``L``, float32,
divided by 255.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:  # `python examples/train_digits.py` from the repository
    sys.path.insert(0, str(HERE.parent))

from examples.digits_cnn import CLASSES, SIZE, build_model  # noqa: E402

SEED = 0
EPOCHS = 300
LEARNING_RATE = 0.01
FILES = ("digits_cnn.onnx", "digits_cnn.pt", "digits_cnn.tflite")


def read_digits(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """The images (N×1×8×8 float32, 0..1) and labels of a digits folder, in labels.csv order."""
    from PIL import Image

    images, labels = [], []
    with (folder / "labels.csv").open(newline="") as handle:
        for row in csv.DictReader(handle):
            with Image.open(folder / row["file"]) as image:
                grey = np.asarray(image.convert("L"), np.float32)
            if grey.shape != (SIZE, SIZE):
                raise SystemExit(f"{folder / row['file']}: {grey.shape}, not {SIZE}×{SIZE}")
            images.append(grey / np.float32(255.0))
            labels.append(int(row["class_index"]))
    return np.stack(images)[:, None], np.asarray(labels, np.int64)


def train(images: np.ndarray, labels: np.ndarray) -> object:
    """The trained module: full-batch Adam, cross-entropy, seeded, one thread."""
    import torch

    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    model = build_model()
    optimiser = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    x, y = torch.from_numpy(images), torch.from_numpy(labels)
    loss_fn = torch.nn.CrossEntropyLoss()
    model.train()
    for _ in range(EPOCHS):
        optimiser.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimiser.step()
    model.eval()
    return model


def write_onnx(model: object, target: Path) -> None:
    import torch

    assert isinstance(model, torch.nn.Module)
    torch.onnx.export(
        model,
        (torch.zeros(1, 1, SIZE, SIZE),),
        str(target),
        input_names=["input"],
        output_names=["logits"],
        dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}},
        opset_version=17,
        dynamo=False,
    )


def write_state_dict(model: object, target: Path) -> None:
    import torch

    assert isinstance(model, torch.nn.Module)
    torch.save(model.state_dict(), str(target))


def write_tflite(model: object, target: Path) -> None:
    """The same network in TensorFlow ops (NHWC: input N×8×8×1), the trained weights moved
    over (convolution kernels to H×W×in×out; the linear layer's inputs reordered from torch's
    C×H×W flattening to H×W×C), converted with the TFLite converter, no optimisation."""
    import tensorflow as tf
    import torch

    assert isinstance(model, torch.nn.Module)
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    k1, b1 = state["0.weight"].transpose(2, 3, 1, 0), state["0.bias"]
    k2, b2 = state["2.weight"].transpose(2, 3, 1, 0), state["2.bias"]
    half = SIZE // 2
    dense = state["6.weight"].reshape(CLASSES, 32, half, half).transpose(2, 3, 1, 0)
    dense = dense.reshape(half * half * 32, CLASSES)
    bias = state["6.bias"]

    class Digits(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, SIZE, SIZE, 1], tf.float32, "input")])
        def serve(self, x: tf.Tensor) -> dict[str, tf.Tensor]:
            h = tf.nn.relu(tf.nn.conv2d(x, k1, 1, "SAME") + b1)
            h = tf.nn.relu(tf.nn.conv2d(h, k2, 1, "SAME") + b2)
            h = tf.nn.max_pool2d(h, 2, 2, "VALID")
            h = tf.reshape(h, [-1, half * half * 32])
            return {"logits": tf.matmul(h, dense) + bias}

    module = Digits()
    with tempfile.TemporaryDirectory() as tmp:
        tf.saved_model.save(module, tmp, signatures={"serving_default": module.serve})
        converter = tf.lite.TFLiteConverter.from_saved_model(tmp, ["serving_default"])
        target.write_bytes(bytes(converter.convert()))


def main(argv: list[str] | None = None) -> int:
    data = Path(os.environ.get("MLREPRO_DATA", HERE.parent.parent / "shared" / "data"))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=data / "digits-train")
    parser.add_argument("--out", type=Path, default=HERE / "digits")
    args = parser.parse_args(argv)
    if not (args.data / "labels.csv").is_file():
        raise SystemExit(f"{args.data}: no labels.csv (set MLREPRO_DATA or pass --data)")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    images, labels = read_digits(args.data)
    model = train(images, labels)
    args.out.mkdir(parents=True, exist_ok=True)
    write_onnx(model, args.out / FILES[0])
    write_state_dict(model, args.out / FILES[1])
    write_tflite(model, args.out / FILES[2])
    for name in FILES:
        digest = hashlib.sha256((args.out / name).read_bytes()).hexdigest()
        print(f"{digest}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
