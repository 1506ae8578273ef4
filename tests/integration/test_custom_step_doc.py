"""The custom-step example of docs/manifest.md, run as it is written: its Python block becomes a
project's ``conftest.py`` and its manifest lines a manifest's preprocessing. The step records a
golden with step fingerprints of its output like a built-in step; a change of its parameter
drifts, and the HTML report's pictures show it as the first step that differs."""

from __future__ import annotations

import re
import textwrap

import pytest
from helpers import REPO, Project, make_onnx_with_channels

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

DOC = (REPO / "docs" / "manifest.md").read_text(encoding="utf-8")


def block_after(marker: str, language: str) -> str:
    """The fenced ``language`` block right after ``<!-- marker -->`` in the manifest reference."""
    found = re.search(rf"<!-- {marker} -->\n```{language}\n(.*?)```", DOC, re.S)
    assert found is not None, f"docs/manifest.md has no {language} block after {marker}"
    return found.group(1)


def manifest_with_the_step(project: Project, sha: str, cutoff: str) -> str:
    """The tiny project's manifest, its preprocessing opened by the documented lines."""
    documented = textwrap.dedent(block_after("custom-step-manifest", "yaml"))
    lines = [line.strip() for line in documented.splitlines() if line.strip().startswith("- ")]
    assert [line.split(":")[0] for line in lines] == ["- decode", "- autocontrast"]
    head, step = lines
    text = project.manifest(
        "custom_step",
        model_path="../models/grey.onnx",
        sha=sha,
        decode=head.removeprefix("- ").replace("decode: ", "{decode: ", 1) + "}",
    )
    step = step.removeprefix("- ").replace("cutoff: 2", f"cutoff: {cutoff}")
    return text.replace("      - {crop:", f"      - {{{step}}}\n      - {{crop:", 1)


def test_the_documented_custom_step_records_fingerprints_and_drift_pictures(
    serial_project: Project,
) -> None:
    project = serial_project
    project.make({})
    (project.path / "conftest.py").write_text(block_after("custom-step-example", "python"))
    sha = make_onnx_with_channels(project.path / "models" / "grey.onnx", 1)
    manifests = project.path / "manifests"
    for old in manifests.glob("*.yaml"):
        old.unlink()
    path = manifests / "custom_step.yaml"
    path.write_text(manifest_with_the_step(project, sha, "2"))
    assert "- {autocontrast: {cutoff: 2}}" in path.read_text()

    project.run("--mlrepro-update").assert_outcomes(passed=1)
    golden = project.golden("custom_step").read_text()
    assert '"autocontrast": {' in golden and '"cutoff": 2' in golden  # recorded as it ran
    # The step probes fingerprint the custom step's output like any step's.
    assert re.search(r'\[\s*"[^"]+",\s*1,\s*"autocontrast",\s*\{', golden), golden[-3000:]
    project.run().assert_outcomes(passed=1)

    # Its parameter changed: a drift whose first differing step is the custom one.
    path.write_text(manifest_with_the_step(project, sha, "30"))
    result = project.run("--mlrepro-html", "out/report.html")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "the manifest changed autocontrast.cutoff from 2 to 30" in out
    # Its step fingerprints tell where the outputs part: at the custom step, not before.
    assert "autocontrast: mean |Δ|" in out and "decode identical" in out
    page = (project.path / "out" / "report.html").read_text(encoding="utf-8")
    block = re.search(r'<div class="drift" .*?(?=<div class="drift" |</section>)', page, re.S)
    assert block is not None, "no drift pictures"
    assert '<span class="step first-step">autocontrast</span>' in block.group(0)
    assert block.group(0).count('class="probe"') == 3
