"""The published JSON Schema of a manifest (pytest_mlrepro/manifest.schema.json) against the code.

The file is generated from the schema code (the dataclasses of spec.py and pipeline.py), so it must
equal a fresh generation; and the code is the judge, so every manifest the code accepts must
validate, and manifests the code rejects for a rule the schema states must be rejected by both.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import subprocess
import sys
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from diag_helpers import manifest_text as diag_manifest_text
from helpers import CHILD_TIMEOUT_S, LOOSE, REPO, manifest_text, state_dict_manifest

from pytest_mlrepro._schema import yaml_key
from pytest_mlrepro._yaml import load_yaml
from pytest_mlrepro.errors import ManifestError
from pytest_mlrepro.manifest import _spec as spec
from pytest_mlrepro.manifest.json_schema import (
    SCHEMA_FILE,
    builtin_steps,
    manifest_json_schema,
    render,
)
from pytest_mlrepro.pipeline import _steps as pipeline

SHA = "ab" * 32
EXAMPLES = sorted((REPO / "manifests").glob("*.yaml"))

# Every section and every step, with the options the example manifests do not use.
EVERYTHING = f"""\
name: everything
version: "2.0"
task: image-classification
description: every section
framework: {{name: onnxruntime, version: ">=1.17,<2"}}
model:
  format: onnx
  file: {{cache: model.onnx, build: my_export, sha256: {SHA}}}
inputs:
  - name: input
    dtype: float32
    layout: NCHW
    preprocess:
      - decode: {{backend: tf, order: BGR, dct_method: INTEGER_ACCURATE}}
      - color: {{order: RGB}}
      - crop: {{fraction: 0.875, rounding: tf}}
      - resize: {{size: 224, method: area, backend: tf, antialias: true}}
      - cast: {{dtype: float32}}
      - scale: {{divisor: 255}}
      - normalize: {{mean: [0.5], std: [0.5]}}
      - layout
postprocess: {{softmax: false, top_k: 3, output: logits}}
dataset:
  name: imagenet-sample
  checksums: data.sha256
  labels: labels.csv
  labels_dir: labels
  file_column: file
  label_column: class_index
  classes: 1000
  class_names: synset.txt
  url: https://example.com/data/
  limit: 10
tolerances: {{top1: 0.5, top5: 0.5, agreement: 0.99, score: 0.001}}
runtime:
  batch_size: 8
  intra_op_threads: 1
  inter_op_threads: 1
  devices: [cpu, cuda]
  graph_optimization: basic
  seed: 0
  deterministic_ops: true
  timeout_s: 60
latency:
  batch_sizes: [1, 32]
  measure: [model, end_to_end]
  tolerance: {{p50: 1.25, p99: 2}}
  min_rounds: 20
  min_time: 2.0
  max_time: 20.0
  warmup_rounds: 5
  warmup_time: 0.2
  attempts: 3
determinism: {{runs: 2, tolerance: 0.0}}
reference: {{manifest: other, agreement: 0.98, score: 0.45, top1: 0.99}}
golden: golden/everything.json
"""


def _accepted_texts(tmp_path: Path) -> dict[str, str]:
    """Manifests the code accepts: the examples, the test helpers' manifests, EVERYTHING."""
    texts = {p.name: p.read_text() for p in EXAMPLES}
    texts["helpers.onnx"] = manifest_text("tiny_onnx", sha=SHA, assets=tmp_path, extra=LOOSE)
    texts["helpers.torchscript"] = manifest_text(
        "tiny_torch", "torch", version=">=2.2", sha=SHA, assets=tmp_path
    )
    # state_dict_manifest hashes the TorchScript file whose section it then replaces.
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "tiny.pt").write_bytes(b"not read as a model")
    texts["helpers.state_dict"] = state_dict_manifest(
        "tiny_sd", "my_builder", "weights.pt", SHA, assets=tmp_path
    )
    texts["diag_helpers"] = diag_manifest_text("blocks", "blocks.onnx", SHA)
    texts["everything"] = EVERYTHING
    texts["string reference"] = EVERYTHING.replace(
        "reference: {manifest: other, agreement: 0.98, score: 0.45, top1: 0.99}",
        "reference: other",
    )
    texts["empty blocks read as defaults"] = EVERYTHING.replace(
        "postprocess: {softmax: false, top_k: 3, output: logits}", "postprocess:"
    )
    texts["state_dict from a package"] = (
        EVERYTHING.replace(
            f"  format: onnx\n  file: {{cache: model.onnx, build: my_export, sha256: {SHA}}}\n",
            f"  format: state_dict\n  builder: b\n"
            f"  weights: {{package: pkg, path: w.pth, sha256: {SHA}}}\n",
        )
        .replace("name: onnxruntime", "name: torch")
        .replace("  graph_optimization: basic\n", "")
    )
    return texts


def _code_accepts(text: str) -> bool:
    try:
        data, lines = load_yaml(text.encode(), "m.yaml")
        spec.parse_manifest(data, "m.yaml", lines)
    except ManifestError:
        return False
    return True


def _validator() -> jsonschema.Draft7Validator:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema)


def test_the_published_schema_is_the_generated_one() -> None:
    """Regenerate with `python -m pytest_mlrepro.manifest.json_schema` after changing the schema
    code."""
    assert SCHEMA_FILE.read_text(encoding="utf-8") == render(manifest_json_schema()), (
        "pytest_mlrepro/manifest.schema.json is stale: run "
        "python -m pytest_mlrepro.manifest.json_schema"
    )


def test_the_schema_ships_with_the_package() -> None:
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '"manifest.schema.json"' in pyproject.split("[tool.setuptools.package-data]")[1]


def test_every_manifest_the_code_accepts_validates(tmp_path: Path) -> None:
    validator = _validator()
    for name, text in _accepted_texts(tmp_path).items():
        assert _code_accepts(text), name  # the premise: the code accepts it
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(
            yaml.safe_load(text)
        )]  # fmt: skip
        assert errors == [], name


def _example() -> dict[str, Any]:
    data = yaml.safe_load((REPO / "manifests" / "efficientnet_lite0_onnx.yaml").read_text())
    assert isinstance(data, dict)
    return data


def _set(path: str, value: object) -> Callable[[dict[str, Any]], None]:
    """An edit that sets the value at a dotted path (list indices as numbers)."""

    def edit(data: dict[str, Any]) -> None:
        *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        node: Any = data
        for p in parents:
            node = node[p]
        node[last] = value

    return edit


def _delete(path: str) -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
        node: Any = data
        for p in parents:
            node = node[p]
        del node[last]

    return edit


STEPS = "inputs.0.preprocess"
FILE = {"cache": "m.onnx", "sha256": SHA}
# Invalid manifests: a mistake a user makes, applied to the example ONNX manifest.
INVALID: dict[str, Callable[[dict[str, Any]], None]] = {
    "unknown top-level key": _set("tolerance", {"top1": 1}),
    "misspelt nested key": _set("runtime.batchsize", 8),
    "missing required section": _delete("dataset"),
    "missing required key": _delete("model.format"),
    "wrong type": _set("runtime.batch_size", "32"),
    "a boolean for a number": _set("tolerances", {"top1": True}),
    "bad enum value": _set(f"{STEPS}.2.resize.method", "bilnear"),
    "unknown framework": _set("framework.name", "jax"),
    "unknown task": _set("task", "detection"),
    "short sha256": _set("model.file.sha256", "abc"),
    "upper-case sha256": _set("model.file.sha256", SHA.upper()),
    "path and cache": _set("model.file", {**FILE, "path": "m.onnx"}),
    "neither path nor cache": _set("model.file", {"sha256": SHA}),
    "build without cache": _set("model.file", {"path": "m.onnx", "build": "b", "sha256": SHA}),
    "package without path": _set("model.file", {**FILE, "package": "pkg"}),
    "onnx with a builder": _set("model.builder", "b"),
    "onnx without a file": _delete("model.file"),
    "state_dict without weights": _set("model", {"format": "state_dict", "builder": "b"}),
    "state_dict with a file": _set(
        "model", {"format": "state_dict", "builder": "b", "weights": FILE, "file": FILE}
    ),
    "two inputs": lambda d: d["inputs"].append(copy.deepcopy(d["inputs"][0])),
    "no inputs": _set("inputs", []),
    "empty preprocessing": _set(f"{STEPS}", []),
    "unknown step": _set(f"{STEPS}.1", {"crpo": {"fraction": 0.875}}),
    "a step with two ops": _set(f"{STEPS}.1", {"crop": {"fraction": 0.875}, "color": {}}),
    "crop with fraction and size": _set(f"{STEPS}.1.crop.size", 224),
    "crop fraction above 1": _set(f"{STEPS}.1.crop.fraction", 1.5),
    "resize with size and shorter_side": _set(f"{STEPS}.2.resize.shorter_side", 256),
    "resize size of three": _set(f"{STEPS}.2.resize.size", [224, 224, 3]),
    "dataset name with a space": _set("dataset.name", "my data"),
    "dataset url not http": _set("dataset.url", "ftp://example.com/"),
    "dataset limit 0": _set("dataset.limit", 0),
    "manifest name with a slash": _set("name", "a/b"),
    "agreement above 1": _set("tolerances", {"agreement": 1.5}),
    "negative top-1 tolerance": _set("tolerances", {"top1": -1}),
    "top_k 0": _set("postprocess.top_k", 0),
    "batch size 0": _set("runtime.batch_size", 0),
    "no devices": _set("runtime.devices", []),
    "unknown device": _set("runtime.devices", ["tpu"]),
    "threads 0": _set("runtime.intra_op_threads", 0),
    "negative seed": _set("runtime.seed", -1),
    "timeout 0": _set("runtime.timeout_s", 0),
    "graph optimisation misspelt": _set("runtime.graph_optimization", "full"),
    "one determinism run": _set("determinism", {"runs": 1}),
    "latency statistic unknown": _set("latency", {"tolerance": {"p95": 1.25}}),
    "latency ratio not above 1": _set("latency", {"tolerance": {"p50": 0.9}}),
    "latency batch listed twice": _set("latency", {"batch_sizes": [1, 1]}),
    "latency measure unknown": _set("latency", {"measure": ["wall"]}),
    "latency attempts 0": _set("latency", {"attempts": 0}),
    "reference agreement 2": _set("reference", {"manifest": "x", "agreement": 2}),
    "reference unknown key": _set("reference", {"manifest": "x", "agreemnt": 0.9}),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_a_manifest_the_code_rejects_is_rejected_by_the_schema(case: str) -> None:
    data = _example()
    INVALID[case](data)
    text = yaml.safe_dump(data, sort_keys=False)
    assert not _code_accepts(text), f"{case}: the code accepts it (the case is wrong)"
    assert not _validator().is_valid(data), f"{case}: the JSON Schema accepts it"


def _schema_classes() -> dict[str, type]:
    """Every dataclass a manifest is read into, by name, found by walking the field types."""
    found: dict[str, type] = {}
    todo: list[Any] = [spec.Manifest, *builtin_steps().values()]
    while todo:
        tp = todo.pop()
        if dataclasses.is_dataclass(tp) and isinstance(tp, type):
            if tp.__name__ in found:
                continue
            found[tp.__name__] = tp
            todo.extend(typing.get_type_hints(tp).values())
        else:
            todo.extend(getattr(tp, "__args__", ()))
    return found


def test_every_key_the_code_accepts_is_in_the_schema() -> None:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    definitions = schema["definitions"]
    for name, cls in _schema_classes().items():
        keys = {
            yaml_key(f)
            for f in dataclasses.fields(cls)
            if f.init and not f.metadata.get("internal")
        }
        properties = schema if cls is spec.Manifest else definitions[name]
        assert set(properties["properties"]) == keys, name
    step_item = definitions["Input"]["properties"]["preprocess"]["items"]["anyOf"][1]
    built_in = {
        cls.op
        for cls in vars(pipeline).values()
        if isinstance(cls, type) and issubclass(cls, pipeline.Step) and cls is not pipeline.Step
    }
    assert set(step_item["properties"]) == set(builtin_steps()) == built_in


def test_a_project_writes_a_schema_with_its_custom_steps(tmp_path: Path) -> None:
    """`python -m pytest_mlrepro.manifest.json_schema --import MODULE` adds the steps MODULE
    registers, and the schema then accepts a manifest that uses one."""
    (tmp_path / "my_steps.py").write_text(
        "from dataclasses import dataclass\n"
        "from typing import ClassVar\n"
        "import pytest_mlrepro\n\n\n"
        "@pytest_mlrepro.register_step\n"
        "@dataclass(frozen=True)\n"
        "class Sharpen(pytest_mlrepro.Step):\n"
        '    op: ClassVar[str] = "sharpen"\n'
        "    amount: float = 1.0\n"
    )
    out = tmp_path / "schema.json"
    run = subprocess.run(
        [sys.executable, "-m", "pytest_mlrepro.manifest.json_schema", "--import", "my_steps",
         "--out", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    validator = jsonschema.Draft7Validator(json.loads(out.read_text()))
    data = _example()
    data["inputs"][0]["preprocess"].insert(1, {"sharpen": {"amount": 2.0}})
    assert validator.is_valid(data)
    data["inputs"][0]["preprocess"][1] = {"sharpen": {"amout": 2.0}}
    assert not validator.is_valid(data)
    # The published schema knows only the built-in steps.
    data["inputs"][0]["preprocess"][1] = {"sharpen": {"amount": 2.0}}
    assert not _validator().is_valid(data)


# The manifest section each class with bounded fields is read from.
SECTIONS = {
    "Postprocess": "postprocess",
    "Dataset": "dataset",
    "Tolerances": "tolerances",
    "Runtime": "runtime",
    "Determinism": "determinism",
    "Latency": "latency",
    "Reference": "reference",
}


def _bound_breakers() -> list[tuple[str, str, object]]:
    """(section, key, a value just outside the bound) for every bound a field declares in its
    metadata, the one place the loader and the JSON Schema both read it from."""
    cases: list[tuple[str, str, object]] = []
    for name, cls in _schema_classes().items():
        for f in dataclasses.fields(cls):
            bounds = f.metadata.get("schema", {})
            if not bounds:
                continue
            assert name in SECTIONS, f"{name}.{f.name}: add its section to SECTIONS"
            key = yaml_key(f)
            if "minimum" in bounds:
                cases.append((SECTIONS[name], key, bounds["minimum"] - 1))
            if "maximum" in bounds:
                cases.append((SECTIONS[name], key, bounds["maximum"] + 1))
            if "exclusiveMinimum" in bounds:
                cases.append((SECTIONS[name], key, bounds["exclusiveMinimum"]))
            if bounds.get("minItems"):
                cases.append((SECTIONS[name], key, []))
            if bounds.get("uniqueItems"):
                assert isinstance(f.default, tuple), f"{name}.{f.name}: a list with a default"
                cases.append((SECTIONS[name], key, [f.default[0]] * 2))
    return cases


@pytest.mark.parametrize(("section", "key", "value"), _bound_breakers())
def test_a_declared_bound_is_checked_on_load_and_stated_in_the_schema(
    section: str, key: str, value: object
) -> None:
    data = _example()
    data[section] = {"manifest": "other"} if section == "reference" else data.get(section, {})
    data[section][key] = value
    text = yaml.safe_dump(data, sort_keys=False)
    loaded, lines = load_yaml(text.encode(), "m.yaml")
    with pytest.raises(ManifestError, match=rf"^m\.yaml:\d+: {section}\.{key}: \w") as refused:
        spec.parse_manifest(loaded, "m.yaml", lines)
    assert "Traceback" not in str(refused.value)
    assert not _validator().is_valid(data), f"{section}.{key}={value!r}: the schema accepts it"
