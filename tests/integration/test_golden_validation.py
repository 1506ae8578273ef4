"""Goldens are validated, not trusted.

* A golden edited by hand (class indices as strings or floats, labels as booleans, scores as
  strings or NaN, an out-of-range class, metrics that contradict the samples, another manifest's
  name) fails its item naming the file, the line, the field and what it should be (the title of
  the field in pytest_mlrepro/golden.schema.json, or the check no schema can say); only
  --mlrepro-update replaces it.
* ``NaN`` or ``Infinity`` anywhere in a golden (Python's JSON parser accepts both; the store
  never writes them) fails the item naming the field.
* A golden recorded with another number of classes is a drift that an update re-records.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import QUIET, SCALE, Project, line_of, sha256

from pytest_mlrepro.goldens import _store as golden_store

Row = list[object]


def run(project: Project, *args: str) -> pytest.RunResult:
    """pytest on the project, in this process."""
    return project.pytester.runpytest(*QUIET, *args)


def sample_line(text: str, sample: str) -> int:
    """The 1-based line of ``sample``'s row in a golden as the store writes it."""
    return line_of(text, f'["{sample}", ')


def edit_row(text: str, index: int, change: Callable[[Row], None]) -> tuple[str, int]:
    """``text`` with sample row ``index`` changed in place; returns it and the row's line."""
    data = json.loads(text)
    row = data["samples"][index]
    number = sample_line(text, row[0])
    change(row)
    lines = text.split("\n")
    comma = "," if lines[number - 1].endswith(",") else ""
    lines[number - 1] = "    " + json.dumps(row) + comma
    return "\n".join(lines), number


def set_item(i: int, j: int | None, value: object) -> Callable[[Row], None]:
    def change(row: Row) -> None:
        if j is None:
            row[i] = value
        else:
            row[i][j] = value  # type: ignore[index]

    return change


def hand_edits(text: str) -> dict[str, tuple[str, str]]:
    """name → (edited golden text, the line the failure must show)."""
    data = json.loads(text)
    rows = data["samples"]
    top1 = rows[3][2][0]
    out: dict[str, tuple[str, str]] = {}
    wrong_class = "expected a class index (an integer), got"
    table: list[tuple[str, int, str, Callable[[Row], None], str]] = [
        (
            "tiny_class_str",
            3,
            "[2][0]",
            set_item(2, 0, str(top1)),
            f'{wrong_class} "{top1}" (a string)',
        ),
        (
            "tiny_class_float",
            3,
            "[2][0]",
            set_item(2, 0, float(top1)),
            f"{wrong_class} {top1}.0 (a float)",
        ),
        ("tiny_class_range", 3, "[2][0]", set_item(2, 0, 7), "class index 7 is out of range"),
        (
            "tiny_label_bool",
            1,
            "[1]",
            set_item(1, None, True),
            "expected a label (an integer), got true (a boolean)",
        ),
        (
            "tiny_score_str",
            3,
            "[3][0]",
            set_item(3, 0, "0.5"),
            'expected a score (a number), got "0.5" (a string)',
        ),
        (
            "tiny_score_nan",
            3,
            "[3][0]",
            set_item(3, 0, float("nan")),
            "nan is not a finite number: a golden holds only finite numbers",
        ),
    ]
    for name, index, field, change, message in table:
        edited, line = edit_row(text, index, change)
        where = f"samples[{index}]{field}".replace("[", "[[]")  # fnmatch's literal "["
        out[name] = (edited, f"golden/{name}.json:{line}: {where}: *{message}*")
    # Stored metrics that contradict the stored samples.
    wrong = text.replace(f'    "top1": {data["metrics"]["top1"]},', '    "top1": 12.5,', 1)
    line = line_of(wrong, '"top1": 12.5')
    out["tiny_metrics"] = (
        wrong,
        f"golden/tiny_metrics.json:{line}: metrics.top1: 12.5 (a float) contradicts the stored "
        f"samples, which give {data['metrics']['top1']}*",
    )
    return out


def test_hand_edited_goldens_fail_naming_file_line_and_field_and_only_update_replaces_them(
    serial_project: Project, mlrepro_assets: Path
) -> None:
    project = serial_project
    source = (mlrepro_assets / "golden" / "tiny_onnx.json").read_text()
    edits = hand_edits(source)
    names = [*edits, "tiny_named"]
    project.make({f"{name}.yaml": project.manifest(name) for name in names})
    for name, (text, _) in edits.items():
        project.golden(name).write_text(text.replace('"tiny_onnx"', f'"{name}"'))
    # Another manifest's golden, copied under this manifest's name: it says whose it is.
    project.golden("tiny_named").write_text(source)
    before = {name: project.golden(name).read_bytes() for name in names}

    result = run(project)
    result.assert_outcomes(failed=len(names))
    for _, expected in edits.values():
        result.stdout.fnmatch_lines([expected])
    name_line = source.split("\n").index('  "name": "tiny_onnx",') + 1
    result.stdout.fnmatch_lines(
        [
            f"golden/tiny_named.json:{name_line}: name: the golden belongs to 'tiny_onnx', not "
            "to 'tiny_named' (manifests/tiny_named.yaml)*",
            "(only --mlrepro-update replaces it: pytest manifests/tiny_named.yaml *)",
        ]
    )
    assert {name: project.golden(name).read_bytes() for name in names} == before

    update = run(project, "--mlrepro-update")
    update.assert_outcomes(passed=len(names))
    for name in names:
        golden = golden_store.read(project.golden(name))
        assert golden is not None and golden.name == name
    run(project).assert_outcomes(passed=len(names))


def make_wide_onnx(path: Path, classes: int) -> None:
    """The tiny model with ``classes`` outputs: the 3 channel-mean logits, then zeros."""
    import onnx
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("ReduceMean", ["input"], ["means"], axes=[2, 3], keepdims=1),
        helper.make_node("Flatten", ["means"], ["flat"], axis=1),
        helper.make_node("Mul", ["flat", "scale"], ["logits3"]),
        helper.make_node("Pad", ["logits3", "pads"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_wide",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, "h", "w"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes])],
        initializer=[
            helper.make_tensor("scale", TensorProto.FLOAT, [], [SCALE]),
            helper.make_tensor("pads", TensorProto.INT64, [4], [0, 0, 0, classes - 3]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def test_a_golden_recorded_with_another_class_count_is_a_drift_an_update_rerecords(
    serial_project: Project,
) -> None:
    project = serial_project
    project.make({})
    make_wide_onnx(project.path / "models" / "wide.onnx", 5)
    wide = project.manifest(
        "tiny_classes",
        model_path="../models/wide.onnx",
        sha=sha256(project.path / "models" / "wide.onnx"),
    ).replace("classes: 3}", "classes: 5}")
    manifest = project.path / "manifests" / "tiny_classes.yaml"
    # A softmax spreads the scores over the two extra classes: they enter the recorded top-k.
    manifest.write_text(wide + "postprocess: {softmax: true, top_k: 5}\n")
    run(project, "--mlrepro-update").assert_outcomes(passed=1)
    recorded = golden_store.read(project.golden("tiny_classes"))
    assert recorded is not None and recorded.results.topk.max() == 4

    manifest.write_text(project.manifest("tiny_classes") + "postprocess: {softmax: true}\n")
    before = project.golden("tiny_classes").read_bytes()
    result = run(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "manifests/tiny_classes.yaml [[]cpu[]]: the golden golden/tiny_classes.json was "
            "recorded with 5 classes, the model now has 3: its results cannot be compared.*",
            "  pytest manifests/tiny_classes.yaml --mlrepro-update",
        ]
    )
    assert project.golden("tiny_classes").read_bytes() == before
    update = run(project, "--mlrepro-update")
    update.assert_outcomes(passed=1)
    update.stdout.fnmatch_lines(["*golden updated (number of classes changed)*"])
    run(project).assert_outcomes(passed=1)


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_a_non_finite_metric_in_a_golden_fails_naming_the_field(
    serial_project: Project, value: str
) -> None:
    project = serial_project.make(
        {"tiny_onnx.yaml": serial_project.manifest("tiny_onnx")}, goldens=["tiny_onnx"]
    )
    golden = project.golden("tiny_onnx")
    text = golden.read_text()
    start = text.index('"top1": ', text.index('"metrics"'))
    end = text.index(",", start)
    golden.write_text(text[:start] + f'"top1": {value}' + text[end:])
    before = golden.read_bytes()
    result = project.run()
    result.assert_outcomes(failed=1)
    shown = {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}[value]
    result.stdout.fnmatch_lines(
        [f"*golden/tiny_onnx.json*: metrics.top1: {shown} is not a finite number: a golden holds "
         "only finite numbers (the file was edited or tampered with)*"]
    )
    assert golden.read_bytes() == before
