"""Measure how the TensorFlow and TFLite runtimes of EfficientNet-Lite0 agree with PyTorch, on raw
logits (the plugin compares probabilities), and what tf.io.decode_jpeg's DCT method changes.

    MLREPRO_CACHE=/tmp/mlcache python scripts/tf_agreement.py --data ../shared/data \
        [--limit N] [--out results.json]

Runs each committed manifest's model through the project's own pipeline and runner (models built
into the cache by the registered builders, checksums verified), then prints, against PyTorch:
top-1 accuracy, top-1 agreement, and the largest absolute logit difference. The decoder part
re-runs the ONNX model with the same recipe decoded by tf.io.decode_jpeg (INTEGER_FAST and
INTEGER_ACCURATE) and compares per-sample results with Pillow's.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import conftest  # noqa: E402, F401  (registers the example's builders)
from pytest_mlrepro.data._datasets import resolve_dataset  # noqa: E402
from pytest_mlrepro.evaluation._evaluate import run_model  # noqa: E402
from pytest_mlrepro.manifest._spec import Manifest, load_manifest  # noqa: E402
from pytest_mlrepro.pipeline._steps import Decode  # noqa: E402
from pytest_mlrepro.runners import load_runner  # noqa: E402
from pytest_mlrepro.settings import Settings  # noqa: E402

RUNTIMES = [
    "efficientnet_lite0_torch",
    "efficientnet_lite0_onnx",
    "efficientnet_lite0_keras",
    "efficientnet_lite0_saved_model",
    "efficientnet_lite0_tflite",
    "efficientnet_lite0_tflite_int8",
]


def logits(manifest: Manifest, settings: Settings, limit: int | None) -> tuple[np.ndarray, Any]:
    if limit:
        manifest = dataclasses.replace(
            manifest, dataset=dataclasses.replace(manifest.dataset, limit=limit)
        )
    dataset = resolve_dataset(manifest, settings)
    runner = load_runner(manifest, "cpu", settings)
    return run_model(runner, manifest, dataset), dataset


def with_decoder(manifest: Manifest, decode: Decode) -> Manifest:
    steps = (decode, *manifest.input.preprocess[1:])
    inputs = (dataclasses.replace(manifest.input, preprocess=steps),)
    return dataclasses.replace(manifest, inputs=inputs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--skip-runtimes", action="store_true")
    args = parser.parse_args()
    settings = Settings.for_project(
        REPO,
        cache_dir=Path(os.environ["MLREPRO_CACHE"]) if "MLREPRO_CACHE" in os.environ else None,
        data_mirrors=[args.data],
    )
    report: dict[str, Any] = {"runtimes": {}, "decoders": {}}
    reference = None
    labels = None
    names = [] if args.skip_runtimes else RUNTIMES
    for name in names:
        manifest = load_manifest(REPO / "manifests" / f"{name}.yaml")
        start = time.perf_counter()
        out, dataset = logits(manifest, settings, args.limit)
        seconds = time.perf_counter() - start
        labels = np.asarray([s.label for s in dataset.samples])
        if reference is None:
            reference = out
        row = {
            "samples": len(out),
            "top1": float(np.mean(out.argmax(1) == labels) * 100),
            "agreement_vs_torch": float(np.mean(out.argmax(1) == reference.argmax(1))),
            "max_abs_logit_diff_vs_torch": float(np.abs(out - reference).max()),
            "seconds": round(seconds, 1),
        }
        report["runtimes"][name] = row
        print(name, json.dumps(row), flush=True)

    onnx = load_manifest(REPO / "manifests" / "efficientnet_lite0_onnx.yaml")
    decoders = {
        "pil": Decode(backend="pil"),
        "tf INTEGER_ACCURATE": Decode(backend="tf", dct_method="INTEGER_ACCURATE"),
        "tf INTEGER_FAST": Decode(backend="tf", dct_method="INTEGER_FAST"),
    }
    base = None
    for label, decode in decoders.items():
        out, dataset = logits(with_decoder(onnx, decode), settings, args.limit)
        labels = np.asarray([s.label for s in dataset.samples])
        if base is None:
            base = out
        row = {
            "top1": float(np.mean(out.argmax(1) == labels) * 100),
            "top1_agreement_vs_pil": float(np.mean(out.argmax(1) == base.argmax(1))),
            "samples_with_other_top1": int(np.sum(out.argmax(1) != base.argmax(1))),
            "max_abs_logit_diff_vs_pil": float(np.abs(out - base).max()),
        }
        report["decoders"][label] = row
        print("onnx decode", label, json.dumps(row), flush=True)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
