"""``mlrepro history``: results files of many nights, read as ``mlrepro merge`` reads them. Whatever
a file holds, the command answers 0 (the history) or 2 (``mlrepro history: FILE: $.json.path:
message``), within bounded time and memory, never a traceback; a file without its time is
refused by name. Every command here runs as in CI: a child process under an address-space limit
(2 GiB) and a time limit."""

from __future__ import annotations

import copy
import json
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import CHILD_TIMEOUT_S, dev_zero_link, fifo_file, nested_json, two_gib_file

from pytest_mlrepro.results import FORMAT, manifest_identity

REPO = Path(__file__).resolve().parents[2]
MEMORY_LIMIT = 2 << 30
TIME_LIMIT_S = CHILD_TIMEOUT_S  # a hang detector (helpers.py)
IDS = [f"s{i}.png" for i in range(6)]
TOL = {"top1": 0.5, "top5": 0.5, "agreement": 0.99, "score": 0.01}
CONTENT: dict[str, Any] = {
    "name": "tiny",
    "inputs": [{"preprocess": [{"decode": {"order": "RGB"}}]}],
    "runtime": {"intra_op_threads": None},
}


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def history(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_mlrepro.cli", "history", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=TIME_LIMIT_S,
        preexec_fn=_limit_memory,
        cwd=REPO,
    )


def _results(top1: list[int]) -> dict[str, Any]:
    return {
        "ids": IDS,
        "labels": [i % 3 for i in range(6)],
        "topk": [[c, (c + 1) % 3] for c in top1],
        "topk_scores": [[0.7, 0.2] for _ in IDS],
    }


def night(day: int, *, order: str = "RGB", drifted: bool = False) -> dict[str, Any]:
    content = copy.deepcopy(CONTENT)
    content["inputs"][0]["preprocess"][0]["decode"]["order"] = order
    golden = [i % 3 for i in range(6)]
    now = [(c + 1) % 3 if drifted and i < 3 else c for i, c in enumerate(golden)]
    row = {
        "kind": "accuracy",
        "manifest": "tiny",
        "device": "cpu",
        "nodeid": "manifests/tiny.yaml::accuracy[cpu]",
        "framework_version": "1.20.0",
        "top1": 50.0 if drifted else 100.0,
        "top5": 100.0,
        "golden_top1": 100.0,
        "golden_top5": 100.0,
        "agreement": 0.5 if drifted else 1.0,
        "tolerances": TOL,
        "outcome": "failed" if drifted else "passed",
        "verdict": "drift" if drifted else "pass",
        "per_sample": {
            "now": _results(now),
            "golden": _results(golden),
            "score_diff": {s: 0.0 for s in IDS},
        },
        **manifest_identity(content),
    }
    return {
        "format": FORMAT,
        "created": f"2026-11-{day:02d}T01:00:00Z",
        "machine": {"name": "t4", "environment": {"python": "3.11"}},
        "shard": None,
        "results": [row],
    }


def write(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value))
    return path


def test_the_nights_in_words_the_first_night_outside_and_what_changed(tmp_path: Path) -> None:
    files = [
        write(tmp_path / "c.json", night(3, order="BGR", drifted=True)),
        write(tmp_path / "a.json", night(1)),
        write(tmp_path / "b.json", night(2)),
    ]
    done = history(*files)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "3 nights: 2026-11-01, 2026-11-02, 2026-11-03"
    assert "tiny · t4 [cpu]: 3 nights; latest top-1 50.00, agreement 0.5000" in done.stdout
    assert "first outside tolerance: 2026-11-03 01:00 UTC (accuracy: drift)" in done.stdout
    assert "pipeline: inputs[0].preprocess[0].decode.order: 'RGB' → 'BGR'" in done.stdout


def _no_time(tmp_path: Path) -> Path:
    value = night(2)
    del value["created"]
    return write(tmp_path / "r.json", value)


def _bad_time(tmp_path: Path) -> Path:
    value = night(2)
    value["created"] = "2026-11-02 01:00"
    return write(tmp_path / "r.json", value)


def _edited_content(tmp_path: Path) -> Path:
    value = night(2)
    value["results"][0]["manifest_content"]["runtime"]["intra_op_threads"] = 4
    return write(tmp_path / "r.json", value)


def _edited_summary(tmp_path: Path) -> Path:
    value = night(2)
    value["results"][0]["diagnosis_summary"] = {"cause": "x", "lead": 3, "sections": []}
    return write(tmp_path / "r.json", value)


def _class_index_1e30(tmp_path: Path) -> Path:
    value = night(2)
    value["results"][0]["per_sample"]["now"]["topk"][0][0] = 10**30
    return write(tmp_path / "r.json", value)


HOSTILE = {
    "no created time": (_no_time, "the results file has no 'created' time"),
    "a created time that is not one": (_bad_time, "$.created: '2026-11-02 01:00' does not match"),
    "a manifest content edited after its digest": (
        _edited_content,
        "$.results[0].manifest_content: does not match the row's manifest_digest",
    ),
    "a diagnosis summary of the wrong type": (
        _edited_summary,
        "$.results[0].diagnosis_summary.lead: 3 is not of type 'string'",
    ),
    "class index 10**30": (
        _class_index_1e30,
        "$.results[0].per_sample.now.topk[0][0]: 1000000000000000000000000000000 is greater than "
        "the maximum of 2147483647",
    ),
    "100,000 nested lists": (nested_json, "nested deeper than 64 levels"),
    "a 2 GiB file": (two_gib_file, "2147483648 bytes, larger than the limit of"),
    "a FIFO": (fifo_file, "is a FIFO"),
    "a link to /dev/zero": (dev_zero_link, "is a device"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_night_exits_2_naming_the_file(tmp_path: Path, case: str) -> None:
    """Among good nights, one hostile file: refused, named, no page written."""
    make, message = HOSTILE[case]
    good = write(tmp_path / "good.json", night(1))
    path = make(tmp_path)
    page = tmp_path / "history.html"
    try:
        done = history(good, path, "--html", page)
    except subprocess.TimeoutExpired:
        pytest.fail(f"mlrepro history hung on {case}")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"mlrepro history: {path}: "), done.stderr
    assert message in done.stderr
    assert not page.exists()


def test_two_files_of_one_machine_on_one_day_are_refused(tmp_path: Path) -> None:
    first = write(tmp_path / "a.json", night(1))
    again = write(tmp_path / "b.json", night(1))
    done = history(first, again)
    assert done.returncode == 2
    assert done.stderr.startswith("mlrepro history: the night of 2026-11-01: ")
    assert "has this result twice" in done.stderr and "Traceback" not in done.stderr
