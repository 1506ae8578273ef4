"""A model whose output classes moved by one (a 1001-class head sliced at the wrong end) is named
a label offset, with the counterfactual that maps its predictions back."""

from __future__ import annotations

import pytest
from helpers import BareProject, lead_of, means_graph, save_onnx

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")


def test_every_prediction_one_class_on_is_named_a_label_offset(bare: BareProject) -> None:
    from onnx import TensorProto, helper

    bare.manifest("tiny_onnx")
    bare.run("--mlrepro-update").assert_outcomes(passed=1)
    # logits[:, j] = scaled[:, j - 1]: every class's score one index on (the last wraps round,
    # as the background column of a sliced head takes index 0).
    gather = helper.make_node("Gather", ["scaled", "order"], ["logits"], axis=1)
    order = helper.make_tensor("order", TensorProto.INT64, [3], [2, 0, 1])
    sha = save_onnx(means_graph([gather], [order]), bare.path / "models" / "shifted.onnx")
    bare.manifest("tiny_onnx", model_path="../models/shifted.onnx", sha=sha)
    result = bare.run()
    result.assert_outcomes(failed=1)
    lead = lead_of(result)
    assert lead.startswith(
        "Likely cause: a label offset — every prediction is the golden's class +1"
    ), lead
    assert "with labels shifted by −1, 24/24 predictions match the golden's" in lead, lead


def with_background(bare: BareProject) -> str:
    """The tiny model with a background class put in front (4 outputs: TF-slim's 1001 ↔ 1000
    in miniature); returns its sha256."""
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Slice", ["scaled", "zero", "one", "one"], ["first"]),
        helper.make_node("Mul", ["first", "nothing"], ["flat_zero"]),
        helper.make_node("Add", ["flat_zero", "low"], ["background"]),
        helper.make_node("Concat", ["background", "scaled"], ["logits"], axis=1),
    ]
    inits = [
        helper.make_tensor("zero", TensorProto.INT64, [1], [0]),
        helper.make_tensor("one", TensorProto.INT64, [1], [1]),
        helper.make_tensor("nothing", TensorProto.FLOAT, [], [0.0]),
        helper.make_tensor("low", TensorProto.FLOAT, [], [-100.0]),
    ]
    return save_onnx(means_graph(nodes, inits, classes=4), bare.path / "models" / "bg.onnx")


def test_a_background_class_in_front_is_named_in_either_declaration(bare: BareProject) -> None:
    bare.manifest("tiny_onnx")
    bare.run("--mlrepro-update").assert_outcomes(passed=1)
    sha = with_background(bare)
    # The manifest still declares 3 classes: refused, with the likely reason.
    bare.manifest("tiny_onnx", model_path="../models/bg.onnx", sha=sha)
    refused = bare.run()
    refused.assert_outcomes(failed=1)
    refused.stdout.fnmatch_lines(
        ["*4 classes, the manifest declares 3 (a model with a background class has one more*"]
    )
    # Declared: the golden's 3 classes against 4, mapped back by dropping the first.
    path = bare.path / "manifests" / "tiny_onnx.yaml"
    path.write_text(path.read_text().replace("classes: 3}", "classes: 4}"))
    result = bare.run()
    result.assert_outcomes(failed=1)
    text = " ".join(result.stdout.str().split())
    assert (
        "Likely cause: a background class at index 0 — the model has 4 output classes, the "
        "golden 3" in text
    ), text
    assert "with the first output dropped (labels shifted by −1), 24/24 predictions match" in text
