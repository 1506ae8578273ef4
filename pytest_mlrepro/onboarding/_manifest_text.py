"""The manifest ``mlrepro init`` writes: complete and commented, every default written out."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .._names import record_command
from ..runners import shape_text
from ._data_folder import DataInfo
from ._model_info import ModelInfo
from ._presets import StepText

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")


def _scalar(value: object) -> str:
    """``value`` in YAML's flow style: JSON, a plain word unquoted only where YAML reads it back
    as that word (not ``yes``, ``null``)."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    if isinstance(value, str) and _PLAIN.fullmatch(value) and yaml.safe_load(value) == value:
        return value
    return json.dumps(value)


def _rel(path: Path, start: Path) -> str:
    return Path(os.path.relpath(path.resolve(), start.resolve())).as_posix()


@dataclass
class Recipe:
    steps: list[StepText]
    origin: list[str]  # comment lines: where the recipe came from
    # A comment after a step, by the step's index: a TODO on a step discovery left undecided.
    notes: dict[int, str] = field(default_factory=dict)


def render_manifest(
    name: str, model: ModelInfo, data: DataInfo, checksums: Path, out: Path,
    recipe: Recipe, height: int, width: int, classes: int,
) -> str:  # fmt: skip
    here = out.parent
    lines = [
        f"# Written by mlrepro init for {model.path.name} on the data set {data.folder.name}.",
        "# Check it, then record the golden:  " + record_command(_rel(out, Path.cwd())),
        f"name: {name}",
        'version: "1"  # your model\'s version: changing it says the results may change',
        "task: image-classification  # the only task so far",
        "framework:",
        f"  name: {model.framework}",
        "model:",
        f"  format: {model.format}",
    ]
    ref = [*_reference(model, here), f"    sha256: {model.sha256}"]
    if model.format == "state_dict":
        lines += [f"  builder: {_scalar(model.builder)}  # registered in conftest.py",
                  "  weights:", *ref]  # fmt: skip
    else:
        lines += ["  file:", *ref]
    if model.external_data:
        lines.append("  external_data:  # every external data file, pinned")
        lines += [f"    {_scalar(k)}: {v}" for k, v in sorted(model.external_data.items())]
    lines += [
        "inputs:",
        f"  - name: {_scalar(model.input_name)}",
        f"    dtype: {model.dtype}",
        f"    layout: {model.layout}  # "
        + (
            f"from the model's input shape {shape_text(model.shape)}"
            + (" and the data's band count" if model.layout_from_data else "")
            if model.shape
            else "channels first: the model file records no input shape"
        ),
        "    preprocess:",
    ]
    lines += [f"      # {line}" for line in recipe.origin]
    for index, step in enumerate(recipe.steps):
        ((op, params),) = step.items()
        note = recipe.notes.get(index)
        flow = ", ".join(f"{k}: {_scalar(v)}" for k, v in params.items())
        lines.append(f"      - {op}: {{{flow}}}" + (f"  # {note}" if note else ""))
    lines += [
        "postprocess:",
        "  softmax: true  # the model outputs logits (set false if it outputs probabilities)",
        "  top_k: 5",
        "dataset:",
        f"  name: {_scalar(data.folder.name)}  # the folder name under the data mirror "
        "(MLREPRO_DATA / ini mlrepro_data)",
        f"  checksums: {_scalar(_rel(checksums, here))}  # sha256sum list of every file",
    ]
    if data.labels_from == "folders":
        lines.append("  labels_from: folders  # one folder per class, indices in sorted order")
    else:
        lines += [
            f"  labels: {_scalar(data.labels)}",
            f"  file_column: {_scalar(data.file_column)}",
            f"  label_column: {_scalar(data.label_column)}",
        ]
    if data.class_names is not None:
        lines.append(f"  class_names: {_scalar(data.class_names)}")
    lines += [
        f"  classes: {classes}  # the model's outputs",
        "runtime:",
        "  batch_size: 32",
        f"# Input size {height}×{width}: {model.size_source}.",
    ]
    return "\n".join(lines) + "\n"


def _reference(model: ModelInfo, here: Path) -> list[str]:
    """The lines that say where the model file is: a package, the cache, or a relative path."""
    if model.package is not None:
        return [
            f"    package: {_scalar(model.package.name)}  # a file inside this installed package",
            f"    path: {_scalar(model.package.path)}",
        ]
    if model.artifact is not None:
        return [
            f"    cache: {_scalar(model.path.name)}  # in the mlrepro cache, made when missing by",
            f"    build: {_scalar(model.artifact)}  # this artifact builder (conftest.py)",
        ]
    return [f"    path: {_scalar(_rel(model.path, here))}  # relative to this file"]
