"""A model whose outputs hold NaN or ±Inf, for one sample or for all, fails its item naming how
many samples and which, in a plain run and in an update run (nothing recorded); no ranking or
comparison takes a NaN.

The runs are in-process (``pytester.runpytest``): onnxruntime is imported here first, so that
pytester's restoring of ``sys.modules`` keeps it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from helpers import QUIET, SCALE, Project, means_graph, save_onnx

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from onnx import helper, numpy_helper  # noqa: E402

# pytest_mlrepro is imported inside the tests: on the code before these checks, each plugin test
# then fails on its own assertions, not on this module's imports.


def run(project: Project, *args: str) -> pytest.RunResult:
    """pytest on the project, in this process."""
    return project.pytester.runpytest(*QUIET, *args)


def write_nonfinite(path: Path, value: float, above: float) -> str:
    """The tiny model, except that every output of a sample whose red logit is above ``above``
    is ``value`` (NaN or ±Inf). Returns the file's sha256."""
    model = means_graph(
        [
            helper.make_node("Slice", ["scaled", "zero", "one", "one"], ["red"]),
            helper.make_node("Greater", ["red", "above"], ["broken"]),
            helper.make_node("Where", ["broken", "value", "scaled"], ["logits"]),
        ],
        [
            numpy_helper.from_array(np.array([0], np.int64), "zero"),
            numpy_helper.from_array(np.array([1], np.int64), "one"),
            numpy_helper.from_array(np.array(above, np.float32), "above"),
            numpy_helper.from_array(np.array(value, np.float32), "value"),
        ],
    )
    return save_onnx(model, path)


def red_logits(project: Project, manifest: str) -> dict[str, float]:
    """Each sample's red logit under the tiny model, through the manifest's own pipeline."""
    from pytest_mlrepro.manifest._spec import load_manifest

    m = load_manifest(project.path / "manifests" / manifest)
    folder = project.path / "data" / "tiny"
    pipe = m.pipeline
    out = {}
    for line in (folder / "labels.csv").read_text().splitlines()[1:]:
        name = line.split(",")[0]
        out[name] = float(pipe((folder / name).read_bytes(), name)[0].mean() * SCALE)
    return out


def nonfinite_project(project: Project, value: float, broken: str) -> tuple[str, list[str]]:
    """The ``tiny_onnx`` project (with its golden, recorded from the honest model) whose model
    now outputs ``value`` for one sample (``broken='one'``) or all (``'all'``). Returns the
    golden's text and the ids of the broken samples."""
    project.make({"tiny_onnx.yaml": project.manifest("tiny_onnx")}, goldens=["tiny_onnx"])
    reds = red_logits(project, "tiny_onnx.yaml")
    ranked = sorted(reds.values(), reverse=True)
    above = (ranked[0] + ranked[1]) / 2 if broken == "one" else -1.0
    sha = write_nonfinite(project.path / "models" / "broken.onnx", value, above)
    manifest = project.manifest("tiny_onnx", model_path="../models/broken.onnx", sha=sha)
    (project.path / "manifests" / "tiny_onnx.yaml").write_text(manifest)
    return project.golden("tiny_onnx").read_text(), [i for i, r in reds.items() if r > above]




@pytest.mark.parametrize(
    ("value", "broken"),
    [(math.nan, "one"), (math.inf, "one"), (-math.inf, "one"), (math.nan, "all")],
    ids=["nan-one", "inf-one", "-inf-one", "nan-all"],
)
def test_nonfinite_outputs_fail_and_record_nothing(
    serial_project: Project, value: float, broken: str
) -> None:
    golden, ids = nonfinite_project(serial_project, value, broken)
    assert len(ids) == (1 if broken == "one" else 24)
    report = serial_project.path / "report.json"
    result = run(serial_project, "-q", f"--mlrepro-json={report}")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert f"the model produced non-finite outputs (NaN or ±Inf) for {len(ids)} of 24" in text
    assert ids[0] in text
    assert "Traceback" not in text and "pitfall" not in text
    props = json.loads(report.read_text())
    (item,) = [r for r in props["results"] if "accuracy" in r["nodeid"]]
    assert item["verdict"] == "non-finite outputs"
    assert item["diagnosis"] == "the model produced non-finite outputs"

    # An update run fails the same way and leaves the golden as it was ...
    result = run(serial_project, "-q", "--mlrepro-update")
    result.assert_outcomes(failed=1)
    assert f"non-finite outputs (NaN or ±Inf) for {len(ids)} of 24" in result.stdout.str()
    assert "not JSON compliant" not in result.stdout.str()
    assert serial_project.golden("tiny_onnx").read_text() == golden
    # ... and records none where there was none.
    serial_project.golden("tiny_onnx").unlink()
    result = run(serial_project, "-q", "--mlrepro-update")
    result.assert_outcomes(failed=1)
    assert "non-finite outputs" in result.stdout.str()
    assert not serial_project.golden("tiny_onnx").exists()


def test_no_ranking_or_comparison_takes_a_nan() -> None:
    from pytest_mlrepro.errors import GoldenError, NonFiniteOutputs
    from pytest_mlrepro.goldens._metrics import Results, compare, softmax, top_k
    from pytest_mlrepro.manifest._spec import Tolerances

    scores = np.array([[0.1, 0.7, 0.2], [math.nan, 0.5, 0.5]])
    with pytest.raises(NonFiniteOutputs, match="1 of 2 samples: row 1"):
        top_k(scores, 2)
    with pytest.raises(NonFiniteOutputs, match="1 of 2 samples: row 1"):
        softmax(np.array([[1.0, 2.0, 3.0], [1.0, math.inf, 0.0]]))
    good = Results(
        ids=("a", "b"),
        labels=np.array([1, 1]),
        topk=np.array([[1, 2], [1, 2]]),
        topk_scores=np.array([[0.7, 0.2], [0.5, 0.5]]),
    )
    with pytest.raises(NonFiniteOutputs, match="samples: b"):
        compare(good, good, scores, Tolerances())
    nan_golden = Results(good.ids, good.labels, good.topk, np.array([[0.7, 0.2], [math.nan, 0.5]]))
    finite = np.array([[0.1, 0.7, 0.2], [0.0, 0.5, 0.5]])
    with pytest.raises(GoldenError, match=r"not finite .* 1 samples: b"):
        compare(nan_golden, good, finite, Tolerances())
