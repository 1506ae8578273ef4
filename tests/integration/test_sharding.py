"""Sharding through pytest: ``--mlrepro-shard I/N`` runs whose results merge into exactly the
unsharded run's (``results.merge_shards``), and ``mlrepro_shards = K``, which splits each accuracy
item into K shard items and gives one merged verdict for the whole item (serial and ``-n 2``).

The project: the tiny ONNX model over 40 images (tests/helpers.py), its golden recorded by the
plugin at the start of each test; a drift is the manifest's decoder switched to BGR (classes 0
and 2 swap, class 1 stays: a partial agreement).
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from helpers import PREPROCESS_BGR, XDIST, Project, checksum_list, recorded_project_of

from pytest_mlrepro.results import (
    Row,
    load_results,
    merge_shards,
    results_schema,
    row_json,
    row_of,
)

N_IMAGES = 40
MANIFEST = "manifests/tiny_onnx.yaml"
WHOLE = f"{MANIFEST}::accuracy[cpu]"
METRICS = ("samples", "top1", "top5", "agreement", "max_score_diff", "verdict", "outcome")


def _project(project: Project) -> Project:
    """The tiny ONNX manifest over 40 images, with its golden recorded by the plugin."""
    return recorded_project_of(project, N_IMAGES)


@pytest.fixture
def sharded(serial_project: Project) -> Project:
    return _project(serial_project)


def _drift(project: Project) -> None:
    """Results that drift: the decoder now gives BGR (classes 0 and 2 swap)."""
    project.path.joinpath(MANIFEST).write_text(project.manifest("tiny_onnx", decode=PREPROCESS_BGR))


def _rows(project: Project, name: str) -> dict[str, dict[str, Any]]:
    """The accuracy rows of a results file, validated (load_results and the JSON Schema), as
    the file holds them."""
    path = project.path / name
    jsonschema.Draft202012Validator(results_schema()).validate(json.loads(path.read_text()))
    rows = load_results(path).results
    return {row.nodeid: row_json(row) for row in rows if "accuracy[" in row.nodeid}


def _shard_runs(project: Project, *args: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The unsharded run's row and the rows of shards 1/2 and 2/2 (each run alone)."""
    whole = project.run("--mlrepro-json", "whole.json", *args)
    parts = []
    for index in (1, 2):
        run = project.run(f"--mlrepro-shard={index}/2", "--mlrepro-json", f"s{index}.json", *args)
        # A shard passes on its own: its tolerance verdict is the merge's.
        assert run.ret == 0, run.stdout.str()
        run.stdout.fnmatch_lines(["*this run is shard*", "*mlrepro merge*"])
        (row,) = _rows(project, f"s{index}.json").values()
        assert row["verdict"] == f"shard {index}/2 compared (verdict at the merge)"
        assert row["shard"] == {"index": index, "count": 2}
        parts.append(row)
    document = json.loads((project.path / "s1.json").read_text())
    assert document["shard"] == {"index": 1, "count": 2}
    assert document["format"] == 2
    assert whole.ret in (0, 1)
    return _rows(project, "whole.json")[WHOLE], parts


def _same_evaluation(merged: dict[str, Any], whole: dict[str, Any]) -> None:
    assert {k: merged.get(k) for k in METRICS} == {k: whole.get(k) for k in METRICS}
    assert merged["per_sample"] == whole["per_sample"]


def test_shard_runs_merge_into_the_unsharded_run(sharded: Project) -> None:
    whole, parts = _shard_runs(sharded)
    assert whole["verdict"] == "pass"
    assert whole["samples"] == N_IMAGES
    # Each shard evaluated a part, the parts are disjoint and together the data set.
    ids = [set(p["per_sample"]["now"]["ids"]) for p in parts]
    assert all(0 < len(s) < N_IMAGES for s in ids)
    assert not ids[0] & ids[1]
    assert ids[0] | ids[1] == set(whole["per_sample"]["now"]["ids"])
    # The golden's samples partitioned the same way.
    assert [set(p["per_sample"]["golden"]["ids"]) for p in parts] == ids
    merged = merge_shards([row_of(p) for p in parts])
    assert isinstance(merged, Row)  # the typed record; the file's row is its JSON
    _same_evaluation(row_json(merged), whole)
    # What identifies the evaluation is the same in every part.
    for key in ("manifest_file", "manifest_digest", "hardware_slug", "tolerances"):
        assert parts[0][key] == parts[1][key] == whole[key]


def test_drifted_shard_runs_merge_into_the_unsharded_drift(sharded: Project) -> None:
    _drift(sharded)
    whole, parts = _shard_runs(sharded, "--mlrepro-no-diagnose")
    assert whole["verdict"] == "drift"
    assert 0 < whole["agreement"] < 1
    merged = merge_shards([row_of(p) for p in parts])
    assert merged.verdict == "drift" and merged.outcome == "failed"
    _same_evaluation(row_json(merged), whole)


def test_an_update_of_one_shard_is_a_usage_error(sharded: Project) -> None:
    result = sharded.run("--mlrepro-shard=1/2", "--mlrepro-update")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--mlrepro-update*shard 1/2*needs every sample*"])


@pytest.mark.parametrize("value", ["3/2", "0/2", "half", "1/0"])
def test_a_bad_shard_is_a_usage_error(sharded: Project, value: str) -> None:
    result = sharded.run(f"--mlrepro-shard={value}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--mlrepro-shard*expected*"])


def test_a_results_file_of_every_kind_of_item_is_valid(serial_project: Project) -> None:
    """Accuracy, latency and determinism rows, a skipped item and an invalid manifest: the
    written file validates against the schema and reads back."""
    extra = (
        "latency: {batch_sizes: [1], min_rounds: 3, min_time: 0.01, max_time: 1,"
        " warmup_rounds: 1, warmup_time: 0, attempts: 1}\n"
        "determinism: {runs: 2}\n"
    )
    serial_project.make(
        {
            "tiny_onnx.yaml": serial_project.manifest("tiny_onnx", extra=extra),
            # Invalid (no inputs, a file that is a number), but shaped as a manifest: claimed.
            "broken.yaml": (
                "name: broken\nframework: {name: onnxruntime}\nmodel: {format: onnx, file: 3}\n"
            ),
        },
        goldens=["tiny_onnx"],
    )
    serial_project.run("--mlrepro-json", "out.json", "--mlrepro-machine", "ci-a")
    document = json.loads((serial_project.path / "out.json").read_text())
    jsonschema.Draft202012Validator(results_schema()).validate(document)
    loaded = load_results(serial_project.path / "out.json")
    kinds = {row.kind or row.verdict for row in loaded.results}
    assert kinds == {"accuracy", "latency", "determinism", "invalid manifest"}, loaded.results
    latency = next(row for row in loaded.results if row.kind == "latency")
    assert isinstance(latency.hardware_key, dict) and latency.hardware_slug
    accuracy = next(row for row in loaded.results if row.kind == "accuracy")
    # A golden was compared: its samples are in the row; the determinism item compared none.
    per_sample = accuracy.per_sample
    assert per_sample is not None and per_sample.golden is not None
    assert per_sample.golden.ids == per_sample.now.ids
    assert all(row.per_sample is None for row in loaded.results if row.kind != "accuracy")


# --- mlrepro_shards = K: shard items merged into the whole item's verdict --------------------


def _split_run(
    project: Project, *args: str, ini: bool = False
) -> tuple[pytest.RunResult, dict[str, Any]]:
    """A run with 2 shard items per accuracy item (``--mlrepro-shards 2``, or with ``ini`` the
    ini key ``mlrepro_shards = 2``)."""
    if ini:
        with (project.path / "pytest.ini").open("a") as ini_file:
            ini_file.write("mlrepro_shards = 2\n")
    split = () if ini else ("--mlrepro-shards=2",)
    result = project.run(*split, "--mlrepro-json", "split.json", *args)
    rows = _rows(project, "split.json")
    # The results file holds the whole item's row only (its shard items' parts are in it).
    assert list(rows) == [WHOLE]
    return result, rows[WHOLE]


def test_split_items_pass_as_the_unsharded_item(sharded: Project) -> None:
    whole = sharded.run("--mlrepro-json", "whole.json")
    result, merged = _split_run(sharded, "-v", "--junitxml=junit.xml", ini=True)
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*accuracy?cpu??shard1of2? PASSED*",
            "*accuracy?cpu??shard2of2? PASSED*",
            "*tiny_onnx.yaml::accuracy?cpu? PASSED*",
        ]
    )
    result.assert_outcomes(passed=3)
    _same_evaluation(merged, _rows(sharded, "whole.json")[WHOLE])
    assert whole.ret == 0
    cases = ET.parse(sharded.path / "junit.xml").getroot().iter("testcase")
    assert sorted(case.get("name", "") for case in cases) == [
        "tiny_onnx::accuracy[cpu]",
        "tiny_onnx::accuracy[cpu][shard1of2]",
        "tiny_onnx::accuracy[cpu][shard2of2]",
    ]


def test_split_items_drift_as_the_unsharded_item(sharded: Project) -> None:
    _drift(sharded)
    sharded.run("--mlrepro-json", "whole.json", "--mlrepro-no-diagnose")
    result, merged = _split_run(sharded, "--junitxml=junit.xml")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # The shard items compared their parts; the whole item fails with the drift explained.
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*tiny_onnx.yaml [[]cpu[]]: results drifted from the golden*",
            "*top-1 agreement*",
            "*merged from its 2 shard items*",
            "*mlrepro diagnose manifests/tiny_onnx.yaml*",
            "FAILED manifests/tiny_onnx.yaml::accuracy[[]cpu[]]*",
        ]
    )
    _same_evaluation(merged, _rows(sharded, "whole.json")[WHOLE])
    failed = [
        case.get("name")
        for case in ET.parse(sharded.path / "junit.xml").getroot().iter("testcase")
        if case.find("failure") is not None
    ]
    assert failed == ["tiny_onnx::accuracy[cpu]"]


def test_the_merged_drift_says_what_changed_in_the_data(sharded: Project) -> None:
    data = sharded.path / "data" / "tiny"
    labels = (data / "labels.csv").read_text()
    assert "\nimg01.png,1\n" in labels
    (data / "labels.csv").write_text(labels.replace("\nimg01.png,1\n", "\nimg01.png,2\n"))
    (sharded.path / "manifests" / "tiny.sha256").write_text(checksum_list(data))
    result, merged = _split_run(sharded)
    assert merged["verdict"] == "drift"
    result.stdout.fnmatch_lines(
        ["*shard ?/2: the data changed since the golden was recorded: the label of 1 sample*"]
    )


def test_a_shard_item_that_fails_fails_the_whole_item_naming_it(sharded: Project) -> None:
    sharded.golden("tiny_onnx").unlink()
    result, merged = _split_run(sharded)
    result.assert_outcomes(failed=3)
    assert merged["verdict"] == "no golden"
    result.stdout.fnmatch_lines(
        ["*2 of its 2 shard items failed*", "*shard 1/2: no golden*", "*shard 2/2: no golden*"]
    )


def test_a_shard_item_missing_leaves_the_whole_item_without_a_verdict(sharded: Project) -> None:
    result, merged = _split_run(sharded, "-k", "shard1of2")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert merged["verdict"] == "shards incomplete"
    result.stdout.fnmatch_lines(["*no verdict*missing shard 2/2*"])


def test_shard_items_that_all_skip_skip_the_whole_item(sharded: Project) -> None:
    shutil.rmtree(sharded.path / "data")
    result, merged = _split_run(sharded, "-rs")
    result.assert_outcomes(skipped=3)
    assert merged["outcome"] == "skipped"
    result.stdout.fnmatch_lines(
        ["SKIPPED*manifests/tiny_onnx.yaml*data set 'tiny' is not available*"]
    )


def test_the_machine_and_the_shard_from_ini_keys(sharded: Project) -> None:
    with (sharded.path / "pytest.ini").open("a") as ini:
        ini.write("mlrepro_machine = lab-3\nmlrepro_shard = 2/2\n")
    result = sharded.run("--mlrepro-json", "out.json")
    assert result.ret == 0, result.stdout.str()
    document = json.loads((sharded.path / "out.json").read_text())
    assert document["machine"]["name"] == "lab-3"
    assert document["shard"] == {"index": 2, "count": 2}
    (row,) = _rows(sharded, "out.json").values()
    assert row["verdict"] == "shard 2/2 compared (verdict at the merge)"
    # The command line wins over the ini key.
    sharded.run("--mlrepro-json", "out.json", "--mlrepro-machine=ci-b", "--mlrepro-shard=1/3")
    document = json.loads((sharded.path / "out.json").read_text())
    assert document["machine"]["name"] == "ci-b"
    assert document["shard"] == {"index": 1, "count": 3}


def test_an_update_run_does_not_split_items(sharded: Project) -> None:
    result = sharded.run("--mlrepro-shards=2", "--mlrepro-update", "-v")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["*tiny_onnx.yaml::accuracy?cpu? PASSED*"])
    assert "shard1of2" not in result.stdout.str()


@pytest.mark.about_xdist
@pytest.mark.parametrize("drifted", [False, True], ids=["pass", "drift"])
def test_split_items_under_xdist_give_the_serial_verdict(sharded: Project, drifted: bool) -> None:
    if drifted:
        _drift(sharded)
    serial, serial_row = _split_run(sharded, "--mlrepro-no-diagnose")
    Path(sharded.path / "split.json").rename(sharded.path / "serial.json")
    sharded.xdist = XDIST
    result, row = _split_run(sharded, "--mlrepro-no-diagnose", "-p", "xdist")
    assert result.ret == serial.ret == (1 if drifted else 0), result.stdout.str()
    result.assert_outcomes(passed=2 + (not drifted), failed=int(drifted))
    _same_evaluation(row, serial_row)
