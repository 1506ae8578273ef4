"""Which YAML files are manifests (_recognize.py): every real manifest whatever its YAML
style or encoding, and no Hydra, DVC, Kubernetes, Hugging Face card, MLflow or Kubeflow file."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
import yaml

from pytest_mlrepro.manifest import is_manifest, load_manifest

REPO = Path(__file__).resolve().parents[2]
REAL = (REPO / "manifests" / "efficientnet_lite0_onnx.yaml").read_text(encoding="utf-8")
PATTERNS = ["manifests/*.yaml", "manifests/*.yml"]


def _styles() -> dict[str, bytes]:
    """The same manifest, written in each style and encoding YAML allows."""
    data = yaml.safe_load(REAL)
    licence = "".join(f"# Licence line {i}: {'x' * 60}\n" for i in range(1500))  # ~100 KiB
    return {
        "block.yaml": REAL.encode(),
        "json.yaml": json.dumps(data, indent=2).encode(),
        "one_line_json.yml": json.dumps(data).encode(),
        "flow.yaml": yaml.safe_dump(data, default_flow_style=True, width=10**6).encode(),
        "indented_keys.yaml": ("---\n" + REAL).encode(),
        "long_comment.yaml": (licence + REAL).encode(),
        "utf8_bom.yaml": REAL.encode("utf-8-sig"),
        "utf16.yaml": REAL.encode("utf-16"),  # with its byte order mark
        "utf16_be.yaml": b"\xfe\xff" + REAL.encode("utf-16-be"),
        "utf32.yaml": REAL.encode("utf-32"),
        "crlf.yaml": REAL.replace("\n", "\r\n").encode(),
    }


@pytest.mark.parametrize("name", sorted(_styles()))
def test_every_style_of_a_real_manifest_is_claimed_and_loads(tmp_path: Path, name: str) -> None:
    folder = tmp_path / "manifests"
    folder.mkdir()
    path = folder / name
    path.write_bytes(_styles()[name])
    assert is_manifest(path, tmp_path, PATTERNS)
    assert load_manifest(path).name == "efficientnet_lite0_onnx"


FOREIGN = {
    # Hydra: a config group per section, with model and dataset (and interpolations).
    "hydra.yaml": """\
        defaults:
          - model: resnet
          - dataset: imagenet
          - _self_
        model:
          _target_: torchvision.models.resnet50
          weights: IMAGENET1K_V2
          num_classes: ${dataset.classes}
        dataset:
          name: imagenet
          root: /data/imagenet
          classes: 1000
        inputs:
          size: 224
        trainer: {max_epochs: 90, accelerator: gpu}
        """,
    # DVC params.yaml: plain parameters, also under model and dataset.
    "params.yaml": """\
        model:
          name: efficientnet
          format: onnx
          dropout: 0.2
        dataset:
          path: data/prepared
          split: 0.2
        framework:
          backend: pytorch
        train: {epochs: 10, lr: 0.001}
        """,
    "deployment.yaml": """\
        apiVersion: apps/v1
        kind: Deployment
        metadata: {name: model-server}
        spec:
          replicas: 2
          template:
            spec:
              containers:
                - name: server
                  image: example/model:1.0
                  args: ["--model", "/models/model.onnx", "--dataset", "x"]
        """,
    # A Hugging Face model card's metadata.
    "card.yaml": """\
        language: en
        license: apache-2.0
        library_name: transformers
        tags: [image-classification]
        datasets: [imagenet-1k]
        model-index:
          - name: vit-base
            results:
              - task: {type: image-classification}
                dataset: {name: ImageNet, type: imagenet-1k}
                metrics: [{type: accuracy, value: 0.81}]
        """,
    # MLflow's MLmodel file.
    "MLmodel.yaml": """\
        artifact_path: model
        flavors:
          onnx:
            code: null
            data: model.onnx
            onnx_version: 1.15.0
            providers: [CPUExecutionProvider]
          python_function:
            data: model.onnx
            env: {conda: conda.yaml, virtualenv: python_env.yaml}
            loader_module: mlflow.onnx
        model_uuid: 1234
        signature:
          inputs: '[{"type": "tensor", "tensor-spec": {"dtype": "float32", "shape": [-1, 3]}}]'
          outputs: '[{"type": "tensor"}]'
        """,
    # A Kubeflow pipeline.
    "pipeline.yaml": """\
        pipelineInfo: {name: train}
        root:
          dag:
            tasks:
              train:
                inputs:
                  parameters:
                    model: {runtimeValue: {constant: resnet}}
                    dataset: {runtimeValue: {constant: imagenet}}
        schemaVersion: 2.1.0
        sdkVersion: kfp-2.7.0
        """,
}


@pytest.mark.parametrize("name", sorted(FOREIGN))
def test_foreign_yaml_is_left_alone(tmp_path: Path, name: str) -> None:
    folder = tmp_path / "manifests"
    folder.mkdir()
    path = folder / name
    path.write_text(textwrap.dedent(FOREIGN[name]))
    assert yaml.safe_load(path.read_text()) is not None  # valid YAML, someone else's
    assert not is_manifest(path, tmp_path, PATTERNS)


def test_a_damaged_manifest_is_still_claimed(tmp_path: Path) -> None:
    """A syntax error, or two sections misspelt: claimed, so that loading reports it."""
    folder = tmp_path / "manifests"
    folder.mkdir()
    cases = {
        "syntax.yaml": REAL.replace("  top_k: 5", "  top_k: [5"),
        "misspelt.yaml": REAL.replace("framework:", "framwork:").replace("dataset:", "datset:"),
    }
    for name, text in cases.items():
        (folder / name).write_text(text)
        assert is_manifest(folder / name, tmp_path, PATTERNS), name


def test_a_fifo_is_not_read_and_an_oversized_file_only_by_its_head(tmp_path: Path) -> None:
    folder = tmp_path / "manifests"
    folder.mkdir()
    os.mkfifo(folder / "fifo.yaml")  # opening it to read would block the whole run
    assert not is_manifest(folder / "fifo.yaml", tmp_path, PATTERNS)
    with open(folder / "huge.yaml", "wb") as huge:
        huge.truncate(2 * 1024**3)  # sparse: costs no disk, and no memory if never read
    assert not is_manifest(folder / "huge.yaml", tmp_path, PATTERNS)
    # One that starts like a manifest is claimed, so that loading refuses it by its size
    # rather than the manifest silently never running.
    with open(folder / "big.yaml", "wb") as big:
        big.write(b"framework: {name: onnxruntime}\nmodel: {format: onnx, file: m.onnx}\n")
        big.truncate(2 * 1024**3)
    assert is_manifest(folder / "big.yaml", tmp_path, PATTERNS)
