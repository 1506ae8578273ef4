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
