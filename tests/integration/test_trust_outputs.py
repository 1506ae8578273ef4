"""Verdicts that cannot lie, on the model's side (issue 10, items 1, 7 and 8).

* A model whose outputs hold NaN or ±Inf, for one sample or for all, fails its item naming how
  many samples and which, in a plain run and in an update run (nothing recorded); no ranking or
  comparison takes a NaN.
* Every file ONNX Runtime reads for a model (its external data) is pinned by a sha256 and checked
  before the model runs; a change is an integrity error that ``--mlrepro-update`` cannot absorb,
  and an external data path out of the model's folder is refused.
* A file that is not a valid model of its format, a fixed batch dimension, a class count or an
  input size the manifest contradicts: one clear message naming the file (or the manifest line),
  never a raw traceback; a fixed batch size is honoured by running at the model's batch.

The runs are in-process (``pytester.runpytest``): onnxruntime is imported here first, so that
pytester's restoring of ``sys.modules`` keeps it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from helpers import (
    QUIET,
    SCALE,
    Project,
    line_of,
    make_onnx_with_input,
    run_patiently,
    sha256,
)

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

# pytest_mlrepro is imported inside the tests: on the code before these changes, each plugin test
# then fails on its own assertions, not on this module's imports.


def run(project: Project, *args: str) -> pytest.RunResult:
    """pytest on the project, in this process."""
    return project.pytester.runpytest(*QUIET, *args)


def _save(model: onnx.ModelProto, path: Path, **kwargs: object) -> str:
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path), **kwargs)  # type: ignore[arg-type]
    return sha256(path)


def means_graph(
    extra_nodes: Sequence[onnx.NodeProto] = (),
    extra_inits: Sequence[onnx.TensorProto] = (),
    *,
    logits: str = "logits",
    classes: int = 3,
    batch: int | str = "batch",
) -> onnx.ModelProto:
    """The tiny model (``logits = 10 × channel means``, as ``scaled``), then ``extra_nodes``
    that make the output ``logits`` from it."""
    nodes = [
        helper.make_node("ReduceMean", ["input"], ["means"], axes=[2, 3], keepdims=1),
        helper.make_node("Flatten", ["means"], ["flat"], axis=1),
        helper.make_node("Mul", ["flat", "scale"], ["scaled" if extra_nodes else logits]),
        *extra_nodes,
    ]
    graph = helper.make_graph(
        nodes,
        "trust",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, "h", "w"])],
        [helper.make_tensor_value_info(logits, TensorProto.FLOAT, [batch, classes])],
        initializer=[helper.make_tensor("scale", TensorProto.FLOAT, [], [SCALE]), *extra_inits],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


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
    return _save(model, path)


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


# --- 1. non-finite outputs ------------------------------------------------------------------


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


# --- 7. every file the runtime reads for a model is pinned ---------------------------------


def write_external(folder: Path, location: str = "tiny.onnx.data") -> str:
    """The tiny model as ``tiny_ext.onnx`` with its one weight (the scale) in the external data
    file ``location`` (relative to ``folder``). Returns the ``.onnx`` file's sha256."""
    model = means_graph()
    # Only raw_data tensors go to external data.
    scale = numpy_helper.from_array(np.array(SCALE, np.float32), "scale")
    model.graph.initializer[0].CopyFrom(scale)
    path = folder / "tiny_ext.onnx"
    onnx.save(
        model,
        str(path),
        save_as_external_data=True,
        all_tensors_to_one_file=True,
        location=location,
        size_threshold=0,
    )
    return sha256(path)


def external_manifest(project: Project, sha: str, pins: dict[str, str] | None) -> str:
    text = project.manifest("tiny_onnx", model_path="../models/tiny_ext.onnx", sha=sha)
    if pins is not None:
        lines = "".join(f"    {loc}: {pin}\n" for loc, pin in pins.items())
        text = text.replace("inputs:\n", "  external_data:\n" + lines + "inputs:\n", 1)
    return text


def test_external_data_is_pinned_and_checked(serial_project: Project) -> None:
    serial_project.make({}, goldens=["tiny_onnx"])
    models, manifest = serial_project.path / "models", serial_project.path / "manifests"
    sha = write_external(models)
    weights = models / "tiny.onnx.data"
    golden = serial_project.golden("tiny_onnx").read_text()

    # Not pinned: refused, in a plain and in an update run, with the entry to add.
    (manifest / "tiny_onnx.yaml").write_text(external_manifest(serial_project, sha, None))
    for args in ([], ["--mlrepro-update"]):
        result = run(serial_project, "-q", *args)
        result.assert_outcomes(failed=1)
        text = result.stdout.str()
        assert "external data files that the manifest does not pin: tiny.onnx.data" in text
        assert f"tiny.onnx.data: {sha256(weights)}" in text

    # Pinned: runs, and matches the golden of the same model in one file.
    text = external_manifest(serial_project, sha, {"tiny.onnx.data": sha256(weights)})
    (manifest / "tiny_onnx.yaml").write_text(text)
    run(serial_project, "-q").assert_outcomes(passed=1)

    # The weights edited (the .onnx unchanged): an integrity error, never a drift, and an
    # update run cannot absorb it.
    weights.write_bytes(np.array(SCALE * 1.01, np.float32).tobytes())
    assert sha256(models / "tiny_ext.onnx") == sha
    for args in ([], ["--mlrepro-update"]):
        result = run(serial_project, "-q", *args)
        result.assert_outcomes(failed=1)
        out = result.stdout.str()
        where = f"manifests/tiny_onnx.yaml:{line_of(text, 'tiny.onnx.data:')}"
        assert f"{where}: model.external_data['tiny.onnx.data']: sha256 mismatch" in out
        assert "drift" not in out
        assert serial_project.golden("tiny_onnx").read_text() == golden


def test_external_data_outside_the_model_folder_is_refused(serial_project: Project) -> None:
    serial_project.make({})
    models = serial_project.path / "models"
    write_external(models)
    # onnx.save refuses to write such a location: edit the saved model's protobuf instead.
    model = onnx.load(str(models / "tiny_ext.onnx"), load_external_data=False)
    (entry,) = [e for e in model.graph.initializer[0].external_data if e.key == "location"]
    entry.value = "../outside.data"
    (models / "tiny_ext.onnx").write_bytes(model.SerializeToString())
    sha = sha256(models / "tiny_ext.onnx")
    outside = serial_project.path / "outside.data"
    (models / "tiny.onnx.data").rename(outside)
    text = external_manifest(serial_project, sha, {"../outside.data": sha256(outside)})
    (serial_project.path / "manifests" / "tiny_onnx.yaml").write_text(text)
    result = run(serial_project, "-q", "--mlrepro-update")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "reads external data from '../outside.data', outside the model's folder" in out
    assert not serial_project.golden("tiny_onnx").exists()


def test_external_locations_are_found_wherever_a_tensor_can_be(tmp_path: Path) -> None:
    """The minimal protobuf reader finds what onnx's own walk finds: initializers of the graph
    and of an If branch, each in its own file; and refuses bytes that are not ONNX."""
    from onnx.external_data_helper import _get_all_tensors

    from pytest_mlrepro.runners._onnx_files import NotOnnx, external_locations

    def init(name: str) -> onnx.TensorProto:
        return numpy_helper.from_array(np.full(64, 1.5, np.float32), name)

    def out(name: str) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, [64])

    then = helper.make_graph(
        [helper.make_node("Identity", ["inner"], ["a"])], "then", [], [out("a")], [init("inner")]
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["outer"], ["b"])], "else", [], [out("b")]
    )
    graph = helper.make_graph(
        [helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other)],
        "branches",
        [helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [out("y")],
        [init("outer")],
    )
    path = tmp_path / "branches.onnx"
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=False,
              size_threshold=0)  # fmt: skip
    stored = onnx.load(str(path), load_external_data=False)
    theirs = {
        e.value for t in _get_all_tensors(stored) for e in t.external_data if e.key == "location"
    }
    assert external_locations(path.read_bytes()) == theirs == {"inner", "outer"}
    for junk in (b"", b"not an onnx model", path.read_bytes()[:-7]):
        with pytest.raises(NotOnnx):
            external_locations(junk)


# --- 8. errors, not tracebacks ---------------------------------------------------------------


def test_a_file_that_is_not_an_onnx_model(serial_project: Project) -> None:
    serial_project.make({})
    bad = serial_project.path / "models" / "bad.onnx"
    for content in (
        b"this is not an ONNX model\n",
        (serial_project.path / "models" / "tiny.onnx").read_bytes()[:-40],
    ):
        bad.write_bytes(content)
        text = serial_project.manifest(
            "tiny_onnx", model_path="../models/bad.onnx", sha=sha256(bad)
        )
        (serial_project.path / "manifests" / "tiny_onnx.yaml").write_text(text)
        result = run(serial_project, "-q")
        result.assert_outcomes(failed=1)
        out = result.stdout.str()
        where = f"manifests/tiny_onnx.yaml:{line_of(text, 'path: ../models/bad.onnx') - 1}"
        assert f"{where}: model.file: " in out
        assert f"{bad} is not a" in out and "ONNX model" in out
        assert "Traceback" not in out and "onnxruntime_pybind11_state" not in out


def test_a_torch_weights_file_that_is_not_one(serial_project: Project) -> None:
    from helpers import BUILDERS_CONFTEST, state_dict_manifest

    serial_project.make({})
    (serial_project.path / "conftest.py").write_text(BUILDERS_CONFTEST)
    bad = serial_project.path / "models" / "bad.pt"
    bad.write_bytes(b"this is not a torch file at all\n" * 4)
    text = state_dict_manifest(
        "bad_weights", "means", "../models/bad.pt", sha256(bad), assets=serial_project.assets
    )
    (serial_project.path / "manifests" / "bad.yaml").write_text(text)
    result = run_patiently(serial_project, "-q")  # torch: in a child process
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    where = f"manifests/bad.yaml:{line_of(text, 'weights:')}: model.weights: "
    assert f"{where}{bad} is not a torch.save file" in out
    assert "Traceback" not in out and "IndexError: pop from empty list" not in out.splitlines()


@pytest.mark.parametrize("batch_size", [8, 5, 24])
def test_a_fixed_batch_model_runs_at_its_batch(serial_project: Project, batch_size: int) -> None:
    """Batch 5 fixed in the model: any runtime.batch_size, and the short last batch (24 = 4 × 5
    + 4), give the golden's results."""
    serial_project.make({}, goldens=["tiny_onnx"])
    path = serial_project.path / "models" / "fixed.onnx"
    make_onnx_with_input(path, [5, 3, "h", "w"])
    text = serial_project.manifest("tiny_onnx", model_path="../models/fixed.onnx", sha=sha256(path))
    text = text.replace("batch_size: 8", f"batch_size: {batch_size}")
    (serial_project.path / "manifests" / "tiny_onnx.yaml").write_text(text)
    result = run(serial_project, "-q")
    result.assert_outcomes(passed=1)


def write_with_background(path: Path) -> str:
    """The tiny model with a first "background" class: 4 outputs for 3 labelled classes."""
    model = means_graph(
        [helper.make_node("Concat", ["background", "scaled"], ["logits"], axis=1)],
        [numpy_helper.from_array(np.zeros((1, 1), np.float32), "background")],
        classes=4,
        batch=1,
    )
    return _save(model, path)


def test_class_count_refused_before_any_image(serial_project: Project) -> None:
    serial_project.make({})
    path = serial_project.path / "models" / "background.onnx"
    sha = write_with_background(path)
    text = serial_project.manifest("tiny_onnx", model_path="../models/background.onnx", sha=sha)
    (serial_project.path / "manifests" / "tiny_onnx.yaml").write_text(text)
    # Every image unreadable: the refusal must come before any is decoded.
    for image in (serial_project.path / "data" / "tiny").glob("*.png"):
        image.write_bytes(b"")
    (serial_project.path / "manifests" / "tiny.sha256").write_text(
        "".join(
            f"{sha256(p)}  {p.name}\n"
            for p in sorted((serial_project.path / "data" / "tiny").iterdir())
        )
    )
    result = run(serial_project, "-q")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    where = f"manifests/tiny_onnx.yaml:{line_of(text, 'dataset:')}"
    assert f"{where}: dataset.classes: the model's output 'logits' is [1, 4]: 4 classes" in out
    assert "declares 3" in out and "decode" not in out


def test_input_size_refused_with_the_step_that_sets_it(serial_project: Project) -> None:
    """A model taking 20 × 20 after a resize to 16 × 16 (the crop before it): the resize line."""
    serial_project.make({})
    path = serial_project.path / "models" / "sized.onnx"
    make_onnx_with_input(path, ["batch", 3, 20, 20])
    text = serial_project.manifest("tiny_onnx", model_path="../models/sized.onnx", sha=sha256(path))
    (serial_project.path / "manifests" / "tiny_onnx.yaml").write_text(text)
    result = run(serial_project, "-q")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    where = f"manifests/tiny_onnx.yaml:{line_of(text, '{resize:')}"
    assert f"{where}: inputs[0].preprocess[2].resize.size: the preprocessing makes 16×16" in out
    assert "it takes 20×20" in out
