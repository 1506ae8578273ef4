"""A latency result says which ratio decided its verdict, and a golden the machine now beats by a
wide margin (recorded on a busy machine) is flagged as stale with the command that re-records it:
in the terminal table, the results file and the merged matrix."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import jsonschema
import pytest
from helpers import Project

# Imported under the name pytest gives test_latency.py (its folder is on sys.path): one module
# object, whichever of the two files pytest collects first.
from test_latency import golden_files, results, sleepy_project
from test_latency import sleepy_weights as sleepy_weights  # the fixture

from pytest_mlrepro.cli import main
from pytest_mlrepro.results import results_schema

ITEM = "manifests/sleepy.yaml::latency[cpu-b1]"
COMMAND = "pytest 'manifests/sleepy.yaml::latency[cpu-b1]' --mlrepro-update"
DECIDED = ("absolute ratio: model p50", "both ratios", "normalised ratio: model p50")


@pytest.mark.slow
def test_a_golden_recorded_slow_is_flagged_stale_until_re_recorded(
    serial_project: Project,
    sleepy_weights: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    project = sleepy_project(serial_project, sleepy_weights)
    # The golden recorded while the model took 60 ms a call (as on a busy machine)...
    monkeypatch.setenv("SLEEPY_MS", "60")
    project.run("-k", "latency", "--mlrepro-update").assert_outcomes(passed=1)
    (golden,) = golden_files(project, "sleepy")
    recorded = golden.read_bytes()
    # ...and the machine now runs it in 6 ms: it passes, and the golden is flagged stale.
    monkeypatch.setenv("SLEEPY_MS", "6")
    fast = project.run("-k", "latency", "--mlrepro-json", "out.json", "--mlrepro-machine", "m1")
    fast.assert_outcomes(passed=1)
    row = results(project)[ITEM]
    document = json.loads((project.path / "out.json").read_text())
    jsonschema.Draft202012Validator(results_schema()).validate(document)
    assert row["ratio_to_golden"] < 0.5
    assert row["ratio_to_golden"] == pytest.approx(row["p50_ms"] / row["golden_p50_ms"], rel=1e-3)
    assert row["stale_golden"] == {"ratio": row["ratio_to_golden"], "command": COMMAND}
    assert row["decided_by"].startswith(DECIDED), row["decided_by"]
    fast.stdout.fnmatch_lines(
        [
            "manifest *device *batch *measure *golden *now *×golden *×norm *rounds *verdict "
            "*decided by",
            "sleepy *cpu *1 *model *ms p50 *ms *×0.* *×* *(stale golden) *"
            + row["decided_by"].split(":")[0]
            + ":*",
            "stale latency golden: sleepy [[]cpu, batch 1[]] runs at ×0.* of its golden's p50 "
            "(below ×0.5: recorded on a busy machine? against it a real slowdown would pass); "
            "re-record:",
            f"  {COMMAND.replace('[', '[[]')}",
        ]
    )
    assert golden.read_bytes() == recorded  # a flag, not a rewrite
    # The merged matrix shows it too, with the command; a stale golden alone fails nothing.
    capsys.readouterr()
    assert main(["merge", str(project.path / "out.json")]) == 0
    out = capsys.readouterr().out
    assert "## Stale latency goldens" in out and f"`{COMMAND}`" in out
    assert f"| {row['decided_by']} |" in out

    # The printed command re-records it; then nothing is stale.
    project.run(*shlex.split(COMMAND)[1:]).assert_outcomes(passed=1)
    assert golden.read_bytes() != recorded
    again = project.run("-k", "latency", "--mlrepro-json", "out.json")
    again.assert_outcomes(passed=1)
    row = results(project)[ITEM]
    assert "stale_golden" not in row and row["ratio_to_golden"] > 0.5
    assert "stale latency golden" not in again.stdout.str()
    assert json.loads(golden.read_text())["batches"]["1"]["measurements"]["model"]
