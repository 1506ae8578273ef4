"""A failing item is located at the manifest line of the field its verdict or diagnosis blames
(issue 44, 2): pytest-github-actions-annotate-failures' ``::error`` annotation names that line
(GITHUB_ACTIONS=true), and pytest's ``--tb=line`` prints it."""

from __future__ import annotations

import importlib.util

import pytest
from helpers import PREPROCESS_BGR, PREPROCESS_RGB, Project

needs_annotate = pytest.mark.skipif(
    importlib.util.find_spec("pytest_github_actions_annotate_failures") is None,
    reason="pytest-github-actions-annotate-failures is not installed (pip install -e '.[compat]')",
)


def line_of(project: Project, manifest: str, text: str) -> int:
    """The 1-based line of the manifest that holds ``text`` (its only one)."""
    lines = (project.path / "manifests" / f"{manifest}.yaml").read_text().splitlines()
    found = [n for n, line in enumerate(lines, 1) if text in line]
    assert len(found) == 1, (text, lines)
    return found[0]


@pytest.fixture
def drifting(serial_project: Project) -> Project:
    """tiny_onnx's normalize step divides by 128 instead of the golden's 255 (a scale drift);
    tiny_bgr decodes BGR against an RGB golden; tiny_loose passes."""
    p = serial_project
    p.make(
        {
            "tiny_onnx.yaml": p.manifest("tiny_onnx"),
            "tiny_bgr.yaml": p.manifest("tiny_bgr"),
            "tiny_loose.yaml": p.manifest("tiny_loose"),
        },
        goldens=["tiny_onnx", "tiny_loose"],
    )
    # tiny_bgr: the golden of tiny_onnx as recorded (its own name inside), under its name.
    golden = p.golden("tiny_onnx").read_text().replace('"tiny_onnx"', '"tiny_bgr"')
    p.golden("tiny_bgr").write_text(golden)
    onnx = p.path / "manifests" / "tiny_onnx.yaml"
    onnx.write_text(onnx.read_text().replace("std: [255]", "std: [128]"))
    bgr = p.path / "manifests" / "tiny_bgr.yaml"
    bgr.write_text(bgr.read_text().replace(PREPROCESS_RGB, PREPROCESS_BGR))
    return p


@needs_annotate
def test_the_annotation_names_the_drifting_fields_line(
    drifting: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(drifting.path))
    result = drifting.run("-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=2)
    said = result.stderr.str()
    normalize = line_of(drifting, "tiny_onnx", "normalize:")
    decode = line_of(drifting, "tiny_bgr", "decode:")
    assert normalize > 1 and decode > 1
    assert f"::error file=manifests/tiny_onnx.yaml,line={normalize}::" in said, said
    assert f"::error file=manifests/tiny_bgr.yaml,line={decode}::" in said, said
    assert "line=1::" not in said


@needs_annotate
def test_without_a_diagnosis_the_model_block_and_an_error_its_field(
    drifting: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    # A model file whose bytes are not its pin: the error names model.file.sha256's line.
    bgr = drifting.path / "manifests" / "tiny_bgr.yaml"
    bgr.write_text(bgr.read_text().replace("../models/tiny.onnx", "../models/tiny.pt"))
    result = drifting.run("-p", "no:randomly", "--mlrepro-no-diagnose")
    result.assert_outcomes(passed=1, failed=2)
    said = result.stderr.str()
    model = line_of(drifting, "tiny_onnx", "model:")
    sha = line_of(drifting, "tiny_bgr", "sha256:")
    assert f"::error file=manifests/tiny_onnx.yaml,line={model}::" in said, said
    assert f"::error file=manifests/tiny_bgr.yaml,line={sha}::" in said, said


def test_tb_line_prints_the_fields_line(drifting: Project) -> None:
    result = drifting.run("-p", "no:randomly", "--tb=line")
    result.assert_outcomes(passed=1, failed=2)
    normalize = line_of(drifting, "tiny_onnx", "normalize:")
    result.stdout.fnmatch_lines(
        [f"manifests/tiny_onnx.yaml:{normalize}: manifests/tiny_onnx.yaml ?cpu?: results drifted*"]
    )
