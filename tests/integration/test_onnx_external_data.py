"""Every file ONNX Runtime reads for a model (its external data) is pinned by a sha256 and checked
before the model runs; a change is an integrity error that ``--mlrepro-update`` cannot absorb,
and an external data path out of the model's folder is refused.

The runs are in-process (``pytester.runpytest``): onnxruntime is imported here first, so that
pytester's restoring of ``sys.modules`` keeps it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import QUIET, SCALE, Project, line_of, means_graph, sha256

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def run(project: Project, *args: str) -> pytest.RunResult:
    """pytest on the project, in this process."""
    return project.pytester.runpytest(*QUIET, *args)


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

    def init(name: str) -> TensorProto:
        return numpy_helper.from_array(np.full(64, 1.5, np.float32), name)

    def out(name: str) -> Any:
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
