"""Integrity and safety, through the plugin: each attack or mismatch fails its own item with a
clear message, nothing in a file or a manifest is executed, and the good manifest still passes.

Attacks and mismatches: a truncated model, a tampered model, an input name, dtype, layout or size
the model does not have, a class count the model or the class-names file does not have, torch
files that would run code on load (a state_dict pickle, zip and legacy formats, and a
torch.export archive whose sample inputs unpickle code), a symlink out of the project (allowed
once an ini root names its target), and YAML tags that would construct Python objects.
"""

from __future__ import annotations

import shutil

import pytest
from helpers import (
    BUILDERS_CONFTEST,
    Project,
    line_of,
    make_empty_weights,
    make_evil_torch_files,
    make_onnx_with_input,
    sha256,
    state_dict_manifest,
)

CLEAN = "{decode: {backend: pil}}"


def _export_manifest(project: Project, name: str, file: str) -> str:
    text = project.manifest(name, "torch")
    return (
        text.replace("format: torchscript", "format: torch_export")
        .replace("../models/tiny.pt", f"../models/{file}")
        .replace(
            sha256(project.assets / "models" / "tiny.pt"), sha256(project.path / "models" / file)
        )
    )


def test_attacks_and_mismatches_fail_their_item_and_run_nothing(
    project: Project, tmp_path_factory: pytest.TempPathFactory
) -> None:
    assets, models = project.assets, project.path / "models"
    marker = tmp_path_factory.mktemp("marker") / "EXECUTED"
    outside = tmp_path_factory.mktemp("outside")
    shutil.copy(assets / "models" / "tiny.onnx", outside / "tiny.onnx")
    onnx_sha = sha256(assets / "models" / "tiny.onnx")

    models.mkdir()
    full = (assets / "models" / "tiny.onnx").read_bytes()
    (models / "truncated.onnx").write_bytes(full[: len(full) // 2])
    (models / "tampered.onnx").write_bytes(full[:-1] + bytes([full[-1] ^ 1]))
    make_onnx_with_input(models / "fixed.onnx", ["batch", 3, 32, 32])
    (models / "escape.onnx").symlink_to(outside / "tiny.onnx")
    make_evil_torch_files(models, marker)
    empty_sha = make_empty_weights(models / "empty.pt")
    evil_sha = sha256(models / "evil.pt")

    nhwc = project.manifest("tiny_nhwc", extra="").replace("layout: NCHW", "layout: NHWC")
    nhwc = nhwc.replace("{layout: {order: NCHW}}", "{layout: {order: NHWC}}")
    uint8 = project.manifest("tiny_uint8").replace(
        "    layout: NCHW\n", "    layout: NCHW\n    dtype: uint8\n"
    )
    uint8 = uint8.replace("      - {cast: {dtype: float32}}\n", "").replace(
        "      - {normalize: {mean: [0], std: [255]}}\n", ""
    )
    yaml_exec = project.manifest("tiny_yaml") + (
        f"description: !!python/object/apply:os.system ['touch {marker}']\n"
    )
    manifests = {
        "good.yaml": project.manifest("tiny_onnx"),
        "truncated.yaml": project.manifest(
            "tiny_truncated", model_path="../models/truncated.onnx", sha=onnx_sha
        ),
        "tampered.yaml": project.manifest(
            "tiny_tampered", model_path="../models/tampered.onnx", sha=onnx_sha
        ),
        "input_name.yaml": project.manifest("tiny_name").replace("- name: input", "- name: images"),
        "input_dtype.yaml": uint8,
        "input_layout.yaml": nhwc,
        "input_size.yaml": project.manifest(
            "tiny_size", model_path="../models/fixed.onnx", sha=sha256(models / "fixed.onnx")
        ),
        "classes.yaml": project.manifest("tiny_classes").replace("classes: 3}", "classes: 4}"),
        "class_names.yaml": project.manifest("tiny_names").replace(
            "classes: 3}", "classes: 3, class_names: names.txt}"
        ),
        "pickle_zip.yaml": state_dict_manifest(
            "tiny_pickle", "means", "../models/evil.pt", evil_sha, assets=assets
        ),
        "pickle_legacy.yaml": state_dict_manifest(
            "tiny_legacy",
            "means",
            "../models/evil_legacy.pt",
            sha256(models / "evil_legacy.pt"),
            assets=assets,
        ),
        "export_exec.yaml": _export_manifest(project, "tiny_export_evil", "evil.pt2"),
        "export_honest.yaml": _export_manifest(project, "tiny_export", "honest.pt2"),
        "state_dict.yaml": state_dict_manifest(
            "tiny_state", "means", "../models/empty.pt", empty_sha, assets=assets
        ),
        "escape.yaml": project.manifest(
            "tiny_escape", model_path="../models/escape.onnx", sha=onnx_sha
        ),
        "yaml_exec.yaml": yaml_exec,
    }
    project.make(manifests, goldens=["tiny_onnx"])
    (project.path / "conftest.py").write_text(BUILDERS_CONFTEST)
    # A class-names file with 2 names for 3 classes, covered by the checksum list.
    names = project.path / "data" / "tiny" / "names.txt"
    names.write_text("red\ngreen\n")
    with open(project.path / "manifests" / "tiny.sha256", "a") as fh:
        fh.write(f"{sha256(names)}  names.txt\n")

    result = project.run("--mlrepro-update")
    assert not marker.exists(), "a file or a manifest ran code"
    result.assert_outcomes(passed=3, failed=13)
    expected = {
        "truncated.yaml::accuracy[[]cpu[]]": [
            f"manifests/truncated.yaml:{line_of(manifests['truncated.yaml'], 'sha256:')}: "
            f"model.file.sha256: sha256 mismatch for *truncated.onnx: the manifest expects "
            f"{onnx_sha}, the file has {sha256(models / 'truncated.onnx')} (tampered, truncated "
            "or replaced: refusing to run it)"
        ],
        "tampered.yaml::accuracy[[]cpu[]]": ["*model.file.sha256: sha256 mismatch for *tampered*"],
        "input_name.yaml::accuracy[[]cpu[]]": [
            f"manifests/input_name.yaml:{line_of(manifests['input_name.yaml'], 'name: images')}: "
            "inputs[[]0[]].name: the model's inputs are [[]'input'[]], the manifest names 'images'"
        ],
        "input_dtype.yaml::accuracy[[]cpu[]]": [
            "manifests/input_dtype.yaml:*: inputs[[]0[]].dtype: model input 'input' is float32, "
            "the manifest declares uint8"
        ],
        "input_layout.yaml::accuracy[[]cpu[]]": [
            f"manifests/input_layout.yaml:{line_of(nhwc, 'layout: NHWC')}: "
            "inputs[[]0[]].layout: the model's input 'input' is [[]batch, 3, h, w[]]: channels "
            "first (NCHW), but the manifest declares NHWC*"
        ],
        "input_size.yaml::accuracy[[]cpu[]]": [
            "manifests/input_size.yaml:*: inputs[[]0[]].preprocess[[]2[]].resize.size: the "
            "preprocessing makes 16×16 images, the model's input 'input' is [[]batch, 3, 32, 32[]]"
            " (NCHW): it takes 32×32*"
        ],
        "classes.yaml::accuracy[[]cpu[]]": [
            "manifests/classes.yaml:*: dataset.classes: the model's output 'logits' is "
            "[[]batch, 3[]]: 3 classes, the manifest declares 4*"
        ],
        "class_names.yaml::accuracy[[]cpu[]]": [
            "manifests/class_names.yaml:*: dataset.class_names: *names.txt has 2 classes, the "
            "manifest declares 3"
        ],
        "pickle_zip.yaml::accuracy[[]cpu[]]": [
            "manifests/pickle_zip.yaml: refusing *evil.pt: it is not a plain tensor file and "
            "loading it would need to run code from the file (weights_only=True refused it): "
            "*GLOBAL posix.system*"
        ],
        "pickle_legacy.yaml::accuracy[[]cpu[]]": [
            "manifests/pickle_legacy.yaml: refusing *evil_legacy.pt: *weights_only=True "
            "refused it*posix.system*"
        ],
        "export_exec.yaml::accuracy[[]cpu[]]": [
            "manifests/export_exec.yaml: refusing *evil.pt2: its sample inputs "
            "(data/sample_inputs/model.pt) does not load with weights_only=True (*GLOBAL "
            "posix.system*); torch.export.load would unpickle it with "
            "weights_only=False, which can run code from the file*"
        ],
        "escape.yaml::accuracy[[]cpu[]]": [
            f"manifests/escape.yaml:*: model.file.path: '../models/escape.onnx' resolves to "
            f"{outside / 'tiny.onnx'}, outside the project (*); allow it with the ini key "
            "mlrepro_allowed_roots"
        ],
        "yaml_exec.yaml::manifest": [
            f"manifests/yaml_exec.yaml:{line_of(yaml_exec, '!!python')}: description: the tag "
            "'!!python/object/apply:os.system' is not allowed: a manifest is plain data*"
        ],
    }
    for node, lines in expected.items():
        result.stdout.fnmatch_lines(lines)
        result.stdout.fnmatch_lines([f"FAILED manifests/{node}*"])
    for name in ("tiny_onnx", "tiny_export", "tiny_state"):
        result.stdout.fnmatch_lines([f"{name} *cpu *24 *100.00 *100.00 *"])
    written = sorted(p.name for p in (project.path / "golden").iterdir())
    assert written == ["tiny_export.json", "tiny_onnx.json", "tiny_state.json"]

    # The escape is allowed once an ini root names where the link points.
    ini = project.path / "pytest.ini"
    ini.write_text(ini.read_text() + f"mlrepro_allowed_roots = {outside}\n")
    allowed = project.run("--mlrepro-update", "manifests/escape.yaml")
    allowed.assert_outcomes(passed=1)
    allowed.stdout.fnmatch_lines(["tiny_escape *cpu *onnxruntime *24 *golden recorded"])
    assert not marker.exists()
