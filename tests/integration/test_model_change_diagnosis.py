"""A drift of the model itself is named from what the golden recorded.

* A recorded golden keeps layer fingerprints; when the model changed, the failure, the HTML
  report and ``mlrepro diagnose`` name the first layer whose output differs.
* A drift that keeps every ranking and only moves the scores (a softmax added to the model) is
  named as a score-transform change.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import BareProject, command_in_process, lead_of, sha256, verdicts

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")


def with_max(source: Path, target: Path) -> str:
    """The bare model with its first layer changed (channel maxima instead of means)."""
    import onnx

    model = onnx.load(str(source))
    for node in model.graph.node:
        if node.op_type == "ReduceMean":
            node.op_type = "ReduceMax"
    onnx.checker.check_model(model)
    onnx.save(model, str(target))
    return sha256(target)


def test_the_failure_and_mlrepro_diagnose_show_the_layer_section(bare: BareProject) -> None:
    """A recorded golden keeps layer fingerprints; when the model changed, the failure
    and ``mlrepro diagnose`` name the first layer whose output differs."""

    bare.manifest("tiny_onnx")
    bare.run("--mlrepro-update").assert_outcomes(passed=1)
    layers = bare.golden_json("tiny_onnx")["probes"]["layers"]
    assert [row[:2] for row in layers["rows"]] == [
        ["means", "ReduceMean"], ["flat", "Flatten"], ["logits", "Mul"]
    ]  # fmt: skip
    # Reviewable: one layer a line.
    assert (
        '        ["means", "ReduceMean", [2, 3, 1, 1], "float32",'
        in bare.golden("tiny_onnx").read_text()
    )
    sha = with_max(bare.path / "models" / "tiny.onnx", bare.path / "models" / "tiny_max.onnx")
    bare.manifest("tiny_onnx", model_path="../models/tiny_max.onnx", sha=sha)
    result = bare.run("--mlrepro-html", "report.html")
    result.assert_outcomes(failed=1)
    # The HTML report shows it as a chart of the difference by layer depth.
    page = (bare.path / "report.html").read_text()
    assert 'alt="difference from the golden by layer depth"' in page
    result.stdout.fnmatch_lines(
        [
            "  the model, layer by layer, on the golden's 2 layer probes:",
            "    3 layers aligned by name",
            "    the first layer whose output differs is ReduceMax 'means' (layer 1 of 3:*",
        ]
    )
    done = command_in_process(bare.path, "diagnose", "manifests/tiny_onnx.yaml")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the first layer whose output differs is ReduceMax 'means'" in " ".join(
        done.stdout.split()
    )


def with_softmax(source: Path, target: Path) -> str:
    """The bare model with a Softmax at its end; returns the new file's sha256."""
    import onnx
    from onnx import helper

    model = onnx.load(str(source))
    graph = model.graph
    output = graph.output[0].name
    for node in graph.node:
        node.output[:] = [f"{name}_logits" if name == output else name for name in node.output]
    graph.node.append(helper.make_node("Softmax", [f"{output}_logits"], [output], axis=1))
    onnx.checker.check_model(model)
    onnx.save(model, str(target))
    return sha256(target)


def test_an_unchanged_ranking_with_moved_scores_names_the_score_transform(
    bare: BareProject,
) -> None:
    bare.manifest("tiny_onnx")
    bare.run("--mlrepro-update").assert_outcomes(passed=1)
    # The model now applies its own softmax; the manifest still applies one.
    sha = with_softmax(bare.path / "models" / "tiny.onnx", bare.path / "models" / "soft.onnx")
    bare.manifest("tiny_onnx", model_path="../models/soft.onnx", sha=sha)
    result = bare.run()
    result.assert_outcomes(failed=1)
    lead = lead_of(result)
    assert lead.startswith("Likely cause: the score transform — the model changed"), lead
    assert (
        "the ranking is identical to the golden's on every sample (top-3 classes in the same "
        "order on all 24), only the scores moved" in lead
    ), lead
    assert (
        "the model's own outputs are already probabilities (non-negative, summing to 1: it "
        "applies its own softmax) and the manifest applies postprocess.softmax on top" in lead
    ), lead
    assert "no known pitfall" not in lead
    assert verdicts(result)["tiny_onnx"] == "drift"
