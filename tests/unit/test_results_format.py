"""The results file's format 2 read back (pytest_mlrepro.results.load_results): its JSON Schema,
generated from the types (results_schema), and the rules beyond it (BEYOND_SCHEMA): a valid file
is accepted, a tampered one refused with the file and the JSON path of the bad field, whether
the schema states the rule or a check after it does. (Files written by pytest are read back in
tests/integration/test_sharding.py.)
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest

from pytest_mlrepro.goldens import Results
from pytest_mlrepro.results import (
    FORMAT,
    Part,
    ResultsFileError,
    json_path,
    load_results,
    results_schema,
    row_json,
)


def _document() -> dict[str, Any]:
    now = Results(
        ids=("a.png", "b.png", "c.png"),
        labels=np.asarray([0, 1, 2], np.int64),
        topk=np.asarray([[0, 1], [1, 0], [0, 2]], np.int64),
        topk_scores=np.asarray([[0.9, 0.1], [0.8, 0.2], [0.6, 0.4]]),
    )
    golden = Results(
        ids=("a.png", "b.png", "c.png"),
        labels=now.labels,
        topk=np.asarray([[0, 1], [1, 0], [2, 0]], np.int64),
        topk_scores=np.asarray([[0.9, 0.1], [0.8, 0.2], [0.5, 0.4]]),
    )
    part = Part(now, golden, {"a.png": 0.0, "b.png": 0.0, "c.png": 0.1})
    row = {
        "nodeid": "manifests/m.yaml::accuracy[cpu]",
        "outcome": "failed",
        "status": "failed",
        "manifest": "m",
        "manifest_file": "manifests/m.yaml",
        "manifest_digest": "ab" * 32,
        "device": "cpu",
        "framework": "onnxruntime",
        "framework_version": "1.20.0",
        "hardware_key": {"device": "cpu", "cpu": "x"},
        "hardware_slug": "cpu-x-1cpu-onnxruntime-1.20.0-threads-default-12345678",
        "samples": 3,
        "top1": 66.6667,
        "top5": 100.0,
        "agreement": 0.666667,
        "max_score_diff": 0.1,
        "verdict": "drift",
        "tolerances": {"top1": 0.5, "top5": 0.5, "agreement": 0.99, "score": 0.001},
        "per_sample": part.to_json(),
        "timing": {
            "seconds": 1.5,
            "call": 2.0,
            "phases": {"model": {"wall": 1.5, "cpu": 2.9}, "other": {"wall": 0.5, "cpu": 0.5}},
        },
    }
    skipped = {
        "nodeid": "manifests/t.yaml::accuracy[cpu]",
        "outcome": "skipped",
        "status": "skipped",
    }
    return {
        "format": FORMAT,
        "machine": {"name": "ci-1", "environment": {"python": "3.11"}},
        "shard": None,
        "results": [row, skipped],
        "one_time": {"framework import": {"wall": 3.0, "cpu": 3.1}},
    }


def _write(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(document))
    return path


def _schema_accepts(document: Any) -> bool:
    return jsonschema.Draft202012Validator(results_schema()).is_valid(document)


def test_the_schema_is_valid_json_schema_for_the_format_written() -> None:
    schema = results_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["format"]["enum"] == [FORMAT]
    row = schema["$defs"]["Row"]
    assert row["required"] == ["nodeid", "outcome"]
    # An optional field may be absent or null; a field of the core's types is typed whole.
    # Bounded by what a run can produce (issue 45): a percentage.
    assert row["properties"]["top1"] == {
        "type": ["number", "null"],
        "minimum": 0,
        "maximum": 100,
        "description": "top-1 accuracy in percent",
    }
    assert schema["$defs"]["Tolerances"]["required"] == ["top1", "top5", "agreement", "score"]


def test_the_status_is_read_as_written_and_derived_for_a_row_older_than_the_field(
    tmp_path: Path,
) -> None:
    document = _document()
    row = document["results"][0]
    # A status the verdict's wording would not give: the field is read as it is.
    written = {**row, "nodeid": "a", "status": "partial"}
    older = {k: v for k, v in row.items() if k != "status"}  # before the field: from the verdict
    recorded = {**older, "nodeid": "b", "outcome": "passed", "verdict": "golden recorded"}
    document["results"] = [written, older, recorded]
    assert _schema_accepts(document)
    rows = load_results(_write(tmp_path, document)).results
    assert [r.status for r in rows] == ["partial", "failed", "recorded"]
    document["results"] = [{**row, "status": "fine"}]
    with pytest.raises(ResultsFileError, match=r"\$\.results\[0\]\.status: 'fine' is not one of"):
        load_results(_write(tmp_path, document))


def test_a_valid_file_is_read(tmp_path: Path) -> None:
    document = _document()
    assert _schema_accepts(document)
    loaded = load_results(_write(tmp_path, document))
    assert loaded.format == FORMAT and loaded.machine.name == "ci-1" and loaded.shard is None
    assert [row_json(row) for row in loaded.results] == document["results"]
    assert loaded.results[0].per_sample is not None
    part = Part.of(loaded.results[0].per_sample)
    assert part.golden is not None and part.golden.ids == ("a.png", "b.png", "c.png")


def test_the_cpu_and_numeric_environment_is_read_as_written(tmp_path: Path) -> None:
    document = _document()
    env: dict[str, Any] = {
        "python": "3.11",
        "cpu_vendor": "GenuineIntel",
        "cpu_flags": ["avx2", "avx512f"],
        "numeric_packages": {"numpy": "2.1.0", "numpy-blas": "scipy-openblas 0.3.27"},
        "numeric_settings": {"OMP_NUM_THREADS": "1"},
    }
    document["machine"]["environment"] = env
    assert _schema_accepts(document)
    assert row_json(load_results(_write(tmp_path, document)).machine.environment) == env
    # The fields mlrepro merge reads are typed: a CPU that is not a text is refused, named.
    env["cpu"] = 7
    with pytest.raises(ResultsFileError, match=r"\$\.machine\.environment\.cpu: 7 is not of type"):
        load_results(_write(tmp_path, document))


def _set(path: tuple[str | int, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def tamper(document: dict[str, Any]) -> None:
        target: Any = document
        for part in path[:-1]:
            target = target[part]
        if value is _DELETE:
            del target[path[-1]]
        else:
            target[path[-1]] = value

    return tamper


_DELETE = object()
ROW = ("results", 0)
NOW = (*ROW, "per_sample", "now")
PHASES = (*ROW, "timing", "phases")

# (what is tampered with, the JSON path the error names, its message, whether the JSON Schema
# states the rule too; the lengths of per-sample lists and the score_diff keys it cannot)
TAMPERED = [
    (("machine", "name"), _DELETE, "$.machine", "'name' is a required property", True),
    (("machine", "name"), 7, "$.machine.name", "7 is not of type 'string'", True),
    (("shard",), {"index": 3, "count": 2}, "$.shard.index", "shard 3 of 2", False),
    (
        (*ROW, "outcome"),
        "exploded",
        "$.results[0].outcome",
        "'exploded' is not one of ['passed'",
        True,
    ),
    ((*ROW, "top1"), "high", "$.results[0].top1", "'high' is not of type 'number'", True),
    (
        (*ROW, "manifest_digest"),
        "abc",
        "$.results[0].manifest_digest",
        "does not match '^[0-9a-f]{64}$'",
        True,
    ),
    ((*ROW, "tolerances", "score"), _DELETE, "$.results[0].tolerances", "'score'", True),
    (
        (*NOW, "topk", 1, 0),
        "1",
        "$.results[0].per_sample.now.topk[1][0]",
        "not of type 'integer'",
        True,
    ),
    ((*NOW, "ids", 2), "a.png", "$.results[0].per_sample.now.ids", "non-unique elements", True),
    ((*NOW, "labels"), [0, 1], "$.results[0].per_sample.now.labels", "2 entries for 3", False),
    (
        (*NOW, "topk_scores", 0),
        [0.9],
        "$.results[0].per_sample.now.topk_scores[0]",
        "expected 2 scores, got 1",
        False,
    ),
    (
        (*ROW, "per_sample", "score_diff", "c.png"),
        _DELETE,
        "$.results[0].per_sample.score_diff",
        "one entry per sample in both",
        False,
    ),
    ((*ROW, "per_sample", "golden"), _DELETE, "$.results[0].per_sample", "'golden'", True),
    (("results",), {}, "$.results", "{} is not of type 'array'", True),
    (
        (*PHASES, "warp"),
        {"wall": 1, "cpu": 1},
        "$.results[0].timing.phases",
        "'warp' is not one of ['framework import'",
        True,
    ),
    (
        (*PHASES, "model", "cpu"),
        -1.0,
        "$.results[0].timing.phases.model.cpu",
        "-1.0 is less than the minimum of 0",
        True,
    ),
    ((*PHASES, "model", "wall"), _DELETE, "$.results[0].timing.phases.model", "'wall'", True),
    (
        (*ROW, "timing", "call"),
        "2 s",
        "$.results[0].timing.call",
        "'2 s' is not of type 'number'",
        True,
    ),
    (
        ("one_time", "framework import"),
        [3.0],
        '$.one_time["framework import"]',
        "[3.0] is not of type 'object'",
        True,
    ),
    (
        ("machine", "environment", "cpu_flags"),
        "avx2 fma",
        "$.machine.environment.cpu_flags",
        "'avx2 fma' is not of type 'array'",
        True,
    ),
    (
        ("machine", "environment", "numeric_packages"),
        {"onnxruntime": 1.2},
        "$.machine.environment.numeric_packages.onnxruntime",
        "1.2 is not of type 'string'",
        True,
    ),
]


@pytest.mark.parametrize(("where", "value", "path", "message", "in_schema"), TAMPERED)
def test_a_tampered_file_is_refused_naming_the_field(
    tmp_path: Path,
    where: tuple[str | int, ...],
    value: Any,
    path: str,
    message: str,
    in_schema: bool,
) -> None:
    document = copy.deepcopy(_document())
    _set(where, value)(document)
    file = _write(tmp_path, document)
    with pytest.raises(ResultsFileError) as refused:
        load_results(file)
    text = str(refused.value)
    assert text.startswith(f"{file}: {path}: "), text
    assert message in text
    if in_schema:
        assert not _schema_accepts(document)


@pytest.mark.parametrize("version", [1, 3, "2"])
def test_an_unknown_format_says_which_formats_are_read(tmp_path: Path, version: Any) -> None:
    document = _document()
    document["format"] = version
    assert not _schema_accepts(document)
    with pytest.raises(ResultsFileError, match=r"\$\.format: format .* reads format 2"):
        load_results(_write(tmp_path, document))


def test_non_finite_numbers_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(
        json.dumps(_document()).replace('"max_score_diff": 0.1', '"max_score_diff": NaN')
    )
    with pytest.raises(ResultsFileError, match=r"invalid JSON.*NaN is not a number JSON allows"):
        load_results(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"format": 2, "machine": ', "invalid JSON (line 1, column 26)"),
        (b"\xff\xfe", "not UTF-8 text"),
        (b"[]", "$: [] is not of type 'object'"),
    ],
)
def test_what_is_not_a_results_file_is_refused(
    tmp_path: Path, content: bytes, message: str
) -> None:
    path = tmp_path / "results.json"
    path.write_bytes(content)
    with pytest.raises(ResultsFileError) as refused:
        load_results(path)
    assert str(refused.value).startswith(f"{path}: ") and message in str(refused.value)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ResultsFileError, match=r"absent\.json: cannot read the results file"):
        load_results(tmp_path / "absent.json")


def test_json_paths_quote_keys_that_are_not_names() -> None:
    assert json_path(("results", 3, "per_sample", "score_diff", "cat 1.png")) == (
        '$.results[3].per_sample.score_diff["cat 1.png"]'
    )


# One tampering per rule the schema cannot state (BEYOND_SCHEMA): the schema accepts each such
# file, the reader refuses it naming the field.
BEYOND = {
    "shard index": (("shard",), {"index": 3, "count": 2}, "$.shard.index"),
    "per-sample lengths": ((*NOW, "labels"), [0, 1], "$.results[0].per_sample.now.labels"),
    "top-k width": ((*NOW, "topk", 2), [0], "$.results[0].per_sample.now.topk[2]"),
    "score_diff keys": (
        (*ROW, "per_sample", "score_diff", "z.png"),
        0.0,
        "$.results[0].per_sample.score_diff",
    ),
    "manifest digest": ((*ROW, "manifest_content"), {"name": "m"}, "$.results[0].manifest_content"),
    "created": (("created",), "2026-02-30T02:00:00Z", "$.created"),
}


def test_every_rule_beyond_the_schema_is_checked(tmp_path: Path) -> None:
    from pytest_mlrepro.results import BEYOND_SCHEMA

    assert set(BEYOND) == {name for name, _ in BEYOND_SCHEMA}
    for name, (where, value, path) in BEYOND.items():
        document = copy.deepcopy(_document())
        _set(where, value)(document)
        assert _schema_accepts(document), name
        file = _write(tmp_path, document)
        with pytest.raises(ResultsFileError) as refused:
            load_results(file)
        assert str(refused.value).startswith(f"{file}: {path}: "), (name, str(refused.value))


def test_mlrepro_schema_results_writes_the_schema_the_reader_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_mlrepro.cli import main

    assert main(["schema", "results"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert main(["schema", "results", "--out", str(tmp_path / "s.json")]) == 0
    written = json.loads((tmp_path / "s.json").read_text())
    assert printed == written == results_schema()
    validator = jsonschema.Draft202012Validator(written)
    document = _document()
    assert validator.is_valid(document)
    document["results"][0]["top1"] = "high"
    assert not validator.is_valid(document)


@pytest.mark.parametrize(
    ("value", "accepted"),
    [(1.0, True), (True, False), (-1, False), ("1", False), (2**31, False)],
)
def test_per_sample_lists_are_judged_as_the_library_judges_them(
    tmp_path: Path, value: Any, accepted: bool
) -> None:
    """The reader's one-pass check of long lists of numbers defers to the library for any list
    it does not clear: what it accepts, and the message and path of what it refuses, are the
    library's (an integral 1.0 is an integer in JSON Schema; a boolean is not a number)."""
    document = _document()
    document["results"][0]["per_sample"]["now"]["labels"][1] = value
    assert _schema_accepts(document) is accepted
    file = _write(tmp_path, document)
    if accepted:
        per_sample = load_results(file).results[0].per_sample
        assert per_sample is not None and per_sample.now.labels[1] == value
        return
    field = r"\$\.results\[0\]\.per_sample\.now\.labels\[1\]"
    with pytest.raises(ResultsFileError, match=rf": {field}: "):
        load_results(file)
