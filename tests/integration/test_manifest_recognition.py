"""Collection claims manifests by their shape, through pytest: a manifest written as JSON (or as
one flow mapping) is collected and runs, and a Hydra config or a DVC ``params.yaml`` with
``model:`` and ``dataset:`` sections under ``manifests/`` is left to its own project."""

from __future__ import annotations

import json
import textwrap

import yaml
from helpers import Project

HYDRA = """\
    defaults:
      - _self_
    model:
      _target_: torchvision.models.resnet50
      num_classes: ${dataset.classes}
    dataset:
      root: /data/imagenet
      classes: 1000
    """
DVC = """\
    model: {name: efficientnet, format: onnx, dropout: 0.2}
    dataset: {path: data/prepared, split: 0.2}
    """


def test_a_json_manifest_is_collected_and_foreign_configs_are_not(
    serial_project: Project,
) -> None:
    project = serial_project
    as_json = json.dumps(yaml.safe_load(project.manifest("tiny_onnx")), indent=2)
    project.make({"tiny_onnx.yaml": as_json}, goldens=["tiny_onnx"])
    (project.path / "manifests" / "config.yaml").write_text(textwrap.dedent(HYDRA))
    (project.path / "manifests" / "params.yaml").write_text(textwrap.dedent(DVC))
    (project.path / "test_ok.py").write_text("def test_ok():\n    assert True\n")
    result = project.run("-rA", "--mlrepro-strict")
    result.assert_outcomes(passed=2)  # test_ok and the JSON manifest's accuracy item
    result.stdout.fnmatch_lines(["*manifests/tiny_onnx.yaml::accuracy*"])
    output = "\n".join(result.outlines)
    assert "config.yaml" not in output and "params.yaml" not in output, output
