"""Integration tests of the pytest plugin: manifests collected and run as items in a subprocess,
each scenario once without and once with pytest-xdist (``-n 2``), on a tiny synthetic project (see
helpers.py): 24 images in 3 colour classes and a model that averages the channels, so that reading
the images as BGR swaps classes 0 and 2 (16 of the 24 top-1 predictions change).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import (
    CHILD_TIMEOUT_S,
    LOOSE,
    N_SAMPLES,
    PREPROCESS_BGR,
    PREPROCESS_RGB,
    Project,
    line_of,
    sha256,
)

SECTION = re.compile(r"^=+ mlrepro =+$")
SAMPLE_LINE = re.compile(r'^    \["img\d\d\.png", [0-2], \[[0-2], [0-2], [0-2]\], \[[^\]]+\]\],?$')


def golden_state(path: Path) -> tuple[bytes, int, int]:
    """What must not change when a golden is not rewritten: content, inode, mtime."""
    stat = path.stat()
    return path.read_bytes(), stat.st_ino, stat.st_mtime_ns


def count_sections(lines: list[str]) -> int:
    return sum(1 for line in lines if SECTION.match(line))


def to_bgr(project: Project, file: str) -> None:
    path = project.path / "manifests" / file
    text = path.read_text()
    assert PREPROCESS_RGB in text
    path.write_text(text.replace(PREPROCESS_RGB, PREPROCESS_BGR))


# --- recording, passing, results out ---------------------------------------------------------


@pytest.mark.about_xdist  # the results file and goldens come from the workers' reports
def test_record_then_pass_with_results_then_update_is_a_no_op(project: Project) -> None:
    # Under xdist the subject is what the workers report: a second ONNX manifest there (each
    # worker of each run would import torch for seconds); the serial run has the torch one.
    second, framework = ("tiny_twin", "onnxruntime") if project.xdist else ("tiny_torch", "torch")
    project.make(
        {
            "tiny_onnx.yaml": project.manifest("tiny_onnx"),
            f"{second}.yaml": project.manifest(second, framework),
        }
    )
    onnx, other = project.golden("tiny_onnx"), project.golden(second)
    assert not onnx.exists() and not other.exists()

    recorded = project.run("--mlrepro-update", "--mlrepro-json", "recorded.json")
    recorded.assert_outcomes(passed=2)
    assert recorded.ret == 0
    # A run that writes goldens passes, and its results say it compared nothing.
    written = json.loads((project.path / "recorded.json").read_text())["results"]
    assert [(row["outcome"], row["status"]) for row in written] == [("passed", "recorded")] * 2
    recorded.stdout.fnmatch_lines(
        [
            "tiny_onnx *cpu *onnxruntime *24 *golden recorded",
            f"{second} *cpu *{framework} *24 *golden recorded",
        ]
    )
    for path in (onnx, other):
        text = path.read_text()
        assert sum(1 for line in text.splitlines() if SAMPLE_LINE.match(line)) == N_SAMPLES, text
        data = json.loads(text)
        assert [row[0] for row in data["samples"]] == [f"img{i:02d}.png" for i in range(N_SAMPLES)]
        assert data["metrics"] == {"samples": N_SAMPLES, "top1": 100.0, "top5": 100.0}
    assert json.loads(onnx.read_text())["environment"]["runtime"]["framework"] == "onnxruntime"
    assert json.loads(other.read_text())["environment"]["runtime"]["framework"] == framework

    # A plain run passes against the goldens; results go to a JSON file, JUnit and the terminal.
    before = {p: golden_state(p) for p in (onnx, other)}
    checked = project.run("--mlrepro-json", "out.json", "--junitxml=j.xml")
    checked.assert_outcomes(passed=2)
    assert checked.ret == 0
    assert count_sections(checked.outlines) == 1, checked.outlines
    checked.stdout.fnmatch_lines(
        [
            "=* mlrepro =*",
            # The tiny model has 3 classes: its top-k holds 3, and the column says so.
            "manifest *device *framework *samples *top-1 *top-3 *agreement *verdict",
            "tiny_onnx *cpu *onnxruntime *24 *100.00 *100.00 *1.0000 *pass",
            f"{second} *cpu *{framework} *24 *100.00 *100.00 *1.0000 *pass",
        ]
    )
    results = json.loads((project.path / "out.json").read_text())
    assert results["format"] == 2 and results["machine"]["environment"]["python"]
    rows = {row["manifest"]: row for row in results["results"]}
    assert len(results["results"]) == 2 and set(rows) == {"tiny_onnx", second}
    for name, runs_on in (("tiny_onnx", "onnxruntime"), (second, framework)):
        row = rows[name]
        assert row["framework"] == runs_on and row["device"] == "cpu"
        assert row["nodeid"] == f"manifests/{name}.yaml::accuracy[cpu]"
        assert row["outcome"] == "passed" and row["verdict"] == "pass"
        assert row["status"] == "passed"
        assert row["samples"] == N_SAMPLES
        for key in ("top1", "top5"):
            assert isinstance(row[key], (int, float)) and 0 <= row[key] <= 100
        assert row["top1"] == 100.0 and row["top5"] == 100.0
        assert isinstance(row["agreement"], (int, float)) and row["agreement"] == 1.0
    # JUnit under pytest's default family (xunit2): no per-test properties (its schema has
    # none); each item's properties one test-suite property, JSON; test cases named with their
    # manifest (tests/compat/test_junit_xunit2.py checks the file against the schema).
    junit = ET.parse(project.path / "j.xml").getroot()
    assert not [p for case in junit.iter("testcase") for p in case.iter("property")]
    suite = {p.get("name"): p.get("value", "") for p in junit.find("testsuite/properties") or []}
    for name in ("tiny_onnx", second):
        values = json.loads(suite[f"mlrepro:manifests/{name}.yaml::accuracy[cpu]"])
        assert values["verdict"] == "pass" and values["top1"] == 100.0
    names = sorted(str(case.get("name")) for case in junit.iter("testcase"))
    assert names == sorted(f"{name}::accuracy[cpu]" for name in ("tiny_onnx", second))
    assert {p: golden_state(p) for p in (onnx, other)} == before

    if project.xdist:
        return  # the rest is the item's own decision, made alike in a worker (serial variant)
    # --mlrepro-update with nothing changed leaves the golden alone (not even rewritten).
    again = project.run("--mlrepro-update", "manifests/tiny_onnx.yaml")
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["tiny_onnx *cpu *onnxruntime *24 *1.0000 *pass"])
    assert golden_state(onnx) == before[onnx]


# --- goldens that are missing or broken ------------------------------------------------------


def test_missing_or_invalid_golden_fails_and_writes_nothing(project: Project) -> None:
    project.make(
        {
            "tiny_onnx.yaml": project.manifest("tiny_onnx"),
            "tiny_corrupt.yaml": project.manifest("tiny_corrupt"),
        }
    )
    corrupt = project.golden("tiny_corrupt")
    corrupt.write_bytes(b"{not json")

    result = project.run("--mlrepro-json", "out.json")
    result.assert_outcomes(failed=2)
    assert result.ret == 1
    rows = json.loads((project.path / "out.json").read_text())["results"]
    # Both failed; the results file says which had nothing to compare with.
    assert {row["manifest"]: (row["outcome"], row["status"]) for row in rows} == {
        "tiny_onnx": ("failed", "no golden"),
        "tiny_corrupt": ("failed", "failed"),
    }
    # The exact command that records the missing one, on a line of its own.
    assert "pytest manifests/tiny_onnx.yaml --mlrepro-update" in [
        line.strip() for line in result.outlines
    ]
    result.stdout.fnmatch_lines(
        [
            "no golden at golden/tiny_onnx.json: record one with",
            "  pytest manifests/tiny_onnx.yaml --mlrepro-update",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*golden/tiny_corrupt.json:1: not valid JSON (*)*",
            "(only --mlrepro-update replaces it: pytest manifests/tiny_corrupt.yaml"
            " --mlrepro-update)",
        ]
    )
    result.stdout.fnmatch_lines(
        ["tiny_corrupt *cpu *onnxruntime *24 *error", "tiny_onnx *cpu *onnxruntime *24 *no golden"]
    )
    assert not project.golden("tiny_onnx").exists()
    assert corrupt.read_bytes() == b"{not json"

    # --mlrepro-update records the missing one and replaces the broken one.
    update = project.run("--mlrepro-update")
    update.assert_outcomes(passed=2)
    update.stdout.fnmatch_lines(
        [
            "tiny_corrupt *cpu *onnxruntime *24 *golden recorded",
            "tiny_onnx *cpu *onnxruntime *24 *golden recorded",
        ]
    )
    for name in ("tiny_onnx", "tiny_corrupt"):
        assert json.loads(project.golden(name).read_text())["name"] == name


# --- drift ------------------------------------------------------------------------------------


def test_drift_fails_within_tolerances_passes_and_update_rerecords(project: Project) -> None:
    project.make(
        {
            "tiny_onnx.yaml": project.manifest("tiny_onnx"),
            "tiny_loose.yaml": project.manifest("tiny_loose", extra=LOOSE),
        },
        goldens=["tiny_onnx", "tiny_loose"],
    )
    strict, loose = project.golden("tiny_onnx"), project.golden("tiny_loose")
    before = {p: golden_state(p) for p in (strict, loose)}
    to_bgr(project, "tiny_onnx.yaml")
    to_bgr(project, "tiny_loose.yaml")

    drift = project.run()
    drift.assert_outcomes(passed=1, failed=1)
    assert drift.ret == 1
    drift.stdout.fnmatch_lines(
        [
            "manifests/tiny_onnx.yaml [[]cpu[]]: results drifted from the golden (*)",
            "* golden *now *change *tolerance",
            "*top-1 % *100.00 *33.33 *-66.67 *±0.5 *✗",
            "*top-1 agreement *1.0000 *0.3333 *16/24 changed *≥0.99 *✗",
            "*16 samples changed their top-1 prediction, e.g.:",
            "*img00.png: 0 (0.*) → 2 (0.*)*",
            "*golden: golden/tiny_onnx.json",
            "*pytest manifests/tiny_onnx.yaml --mlrepro-update",
            "FAILED manifests/tiny_onnx.yaml::accuracy[[]cpu[]]*",
        ]
    )
    drift.stdout.fnmatch_lines(["tiny_loose *cpu *onnxruntime *24 *33.33 *100.00 *0.3333 *pass"])
    drift.stdout.no_fnmatch_line("FAILED manifests/tiny_loose.yaml*")
    assert {p: golden_state(p) for p in (strict, loose)} == before  # nothing written

    update = project.run("--mlrepro-update")
    update.assert_outcomes(passed=2)
    update.stdout.fnmatch_lines(
        [
            "tiny_loose *33.33 *0.3333 *golden updated (manifest changed)",
            "tiny_onnx *33.33 *0.3333 *golden updated",
        ]
    )
    for path in (strict, loose):
        data = json.loads(path.read_text())
        assert data["metrics"]["top1"] == pytest.approx(100 / 3, abs=1e-3)
        assert data["manifest"]["inputs"][0]["preprocess"][0]["decode"]["order"] == "BGR"

    after = project.run()
    after.assert_outcomes(passed=2)
    after.stdout.fnmatch_lines(
        ["tiny_loose *33.33 *1.0000 *pass", "tiny_onnx *33.33 *1.0000 *pass"]
    )


# --- invalid manifests ------------------------------------------------------------------------


def test_bad_manifests_fail_with_file_line_field_and_the_good_one_still_passes(
    project: Project,
) -> None:
    good = project.manifest("tiny_onnx")
    runtime = "runtime: {batch_size: 8, devices: [cpu]}"
    misspelt = good + "tolerences: {top1: 1.0}\n"
    wrong_type = good.replace(runtime, 'runtime: {batch_size: "8", devices: [cpu]}')
    missing = project.manifest("tiny_missing", model_path="../models/nope.onnx")
    other = sha256(project.assets / "models" / "tiny.pt")  # an existing file's, not this one's
    wrong_sha = project.manifest("tiny_wrong_sha", sha=other)
    project.make(
        {
            "tiny_onnx.yaml": good,
            "bad_key.yaml": misspelt,
            "bad_type.yaml": wrong_type,
            "missing_model.yaml": missing,
            "wrong_sha.yaml": wrong_sha,
        },
        goldens=["tiny_onnx"],
    )

    result = project.run()
    result.assert_outcomes(passed=1, failed=4)
    assert result.ret == 1
    for lines in (
        [
            f"manifests/bad_key.yaml:{line_of(misspelt, 'tolerences:')}: tolerences: unknown key "
            "(did you mean 'tolerances'?)*"
        ],
        [
            f"manifests/bad_type.yaml:{line_of(wrong_type, 'batch_size')}: runtime.batch_size: "
            "expected an integer, got '8'"
        ],
        [
            f"manifests/missing_model.yaml:{line_of(missing, 'nope.onnx')}: model.file.path: "
            "file not found: *models/nope.onnx"
        ],
        [
            f"manifests/wrong_sha.yaml:{line_of(wrong_sha, 'sha256:')}: model.file.sha256: sha256 "
            f"mismatch for *tiny.onnx: the manifest expects {other}, the file has "
            f"{sha256(project.path / 'models' / 'tiny.onnx')}*"
        ],
    ):
        result.stdout.fnmatch_lines(lines)
    result.stdout.fnmatch_lines(["tiny_onnx *cpu *onnxruntime *24 *100.00 *100.00 *1.0000 *pass"])
    for failed in (
        "bad_key.yaml::manifest",
        "bad_type.yaml::manifest",
        "missing_model.yaml::accuracy[[]cpu[]]",
        "wrong_sha.yaml::accuracy[[]cpu[]]",
    ):
        result.stdout.fnmatch_lines([f"FAILED manifests/{failed}*"])
    assert not project.golden("tiny_missing").exists()
    assert not project.golden("tiny_wrong_sha").exists()


# --- what is missing here: skip, or fail with --mlrepro-strict --------------------------------


def test_missing_framework_version_or_data_skips_and_strict_fails(project: Project) -> None:
    (project.path / "empty").mkdir()
    project.make(
        {
            "old_framework.yaml": project.manifest("tiny_old", version="<0.1"),
            "tiny_onnx.yaml": project.manifest("tiny_onnx"),
        },
        ini_data="empty",
        goldens=["tiny_onnx"],
    )

    skipped = project.run("-rs")
    skipped.assert_outcomes(skipped=2)
    assert skipped.ret == 0
    skipped.stdout.fnmatch_lines(
        [
            "SKIPPED *onnxruntime * is installed; the manifest requires onnxruntime<0.1*",
        ]
    )
    skipped.stdout.fnmatch_lines(
        [
            "SKIPPED *data set 'tiny' is not available here; searched: "
            "*empty/tiny (no such folder)*"
            "Set MLREPRO_DATA (or the ini key mlrepro_data) to a folder that contains 'tiny/'*",
        ]
    )
    skipped.stdout.fnmatch_lines(
        ["tiny_old *cpu *onnxruntime *skipped", "tiny_onnx *cpu *onnxruntime *skipped"]
    )

    strict = project.run("--mlrepro-strict")
    strict.assert_outcomes(failed=2)
    assert strict.ret == 1
    strict.stdout.fnmatch_lines(
        [
            "*onnxruntime<0.1*(a failure because of --mlrepro-strict)",
        ]
    )
    strict.stdout.fnmatch_lines(
        [
            "*data set 'tiny' is not available here*MLREPRO_DATA*"
            "(a failure because of --mlrepro-strict)",
        ]
    )
    assert sorted(p.name for p in (project.path / "golden").iterdir()) == ["tiny_onnx.json"]


# --- no framework is imported before it is needed ---------------------------------------------


# The frameworks, the HTML report's libraries (imported only when a report is asked for), and
# MLflow (only when a session tracks, at its end).
FORBIDDEN = ("torch", "tensorflow", "onnxruntime", "jinja2", "matplotlib", "mlflow")


def test_importing_the_plugin_imports_no_framework(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import pytest_mlrepro.plugin"],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=True,
        cwd=tmp_path,
    )
    modules = [
        line.rsplit("|", 1)[-1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    ]
    assert "pytest_mlrepro.plugin" in modules
    assert [m for m in modules if m.split(".")[0] in FORBIDDEN] == []


def test_an_onnx_only_run_imports_no_torch_and_finds_data_through_MLREPRO_DATA(
    serial_project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Serial only: under xdist the items run in the workers, not where the conftest looks."""
    project = serial_project
    project.make(
        {"tiny_onnx.yaml": project.manifest("tiny_onnx")}, goldens=["tiny_onnx"], ini_data=None
    )
    monkeypatch.setenv("MLREPRO_DATA", str(project.path / "data"))
    (project.path / "conftest.py").write_text(
        "import json, sys\n\n\n"
        "def pytest_sessionfinish(session):\n"
        "    with open('modules.json', 'w') as fh:\n"
        "        json.dump({m: m in sys.modules for m in ('torch', 'onnxruntime')}, fh)\n"
    )
    result = project.run(subprocess=True)  # what a fresh process imports
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            f"mlrepro: goldens *, data mirrors {project.path / 'data'}, *",
            "tiny_onnx *cpu *onnxruntime *24 *100.00 *100.00 *1.0000 *pass",
        ]
    )
    # onnxruntime was imported (the item ran the model in this process), torch was not.
    seen = json.loads((project.path / "modules.json").read_text())
    assert seen == {"torch": False, "onnxruntime": True}


# --- known bugs (serial runs suffice: the verdicts are made in the item, whichever process) -----


def _strict_json(text: str) -> object:
    def refuse(constant: str) -> object:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_results_file_is_strict_json_when_no_sample_is_shared(serial_project: Project) -> None:
    project = serial_project
    project.make({"tiny_onnx.yaml": project.manifest("tiny_onnx")}, goldens=["tiny_onnx"])
    golden = project.golden("tiny_onnx")
    golden.write_text(golden.read_text().replace('["img', '["old'))  # other sample ids

    result = project.run("--mlrepro-json", "out.json")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*24 in the golden but not in this run, 24 new in this run*"])
    text = (project.path / "out.json").read_text()
    rows = _strict_json(text)["results"]  # type: ignore[index]
    assert [row["verdict"] for row in rows] == ["drift"]


def test_strict_failure_is_not_reported_as_skipped(serial_project: Project) -> None:
    project = serial_project
    (project.path / "empty").mkdir()
    project.make({"tiny_onnx.yaml": project.manifest("tiny_onnx")}, ini_data="empty")

    result = project.run("--mlrepro-strict", "--mlrepro-json", "out.json")
    result.assert_outcomes(failed=1)
    (row,) = json.loads((project.path / "out.json").read_text())["results"]
    assert row["outcome"] == "failed"
    assert row["verdict"] != "skipped"
    result.stdout.no_fnmatch_line("tiny_onnx *cpu *onnxruntime *skipped")


def test_invalid_manifest_appears_in_summary_and_results(serial_project: Project) -> None:
    project = serial_project
    good = project.manifest("tiny_onnx")
    project.make(
        {"tiny_onnx.yaml": good, "bad_key.yaml": good + "tolerences: {top1: 1}\n"},
        goldens=["tiny_onnx"],
    )

    result = project.run("--mlrepro-json", "out.json")
    result.assert_outcomes(passed=1, failed=1)
    rows = json.loads((project.path / "out.json").read_text())["results"]
    assert sorted(row["nodeid"] for row in rows) == [
        "manifests/bad_key.yaml::manifest",
        "manifests/tiny_onnx.yaml::accuracy[cpu]",
    ]
    result.stdout.fnmatch_lines(["*bad_key*"])
