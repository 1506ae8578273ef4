"""``mlrepro merge`` on results files of simulated machines: the same tiny ONNX project run with
``--mlrepro-json`` under different ``--mlrepro-machine`` names, one machine with a deliberately
different decoder (OpenCV giving BGR, the decoder pitfall: classes 0 and 2 swap, so those
samples' top-1 disagree while class 1's agree).

The agreement is checked against what the test computes itself from the two JSON files."""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import re
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from helpers import Project
from machines import environment_of

from pytest_mlrepro import fingerprint
from pytest_mlrepro.cli import main

MANIFEST = "manifests/tiny_onnx.yaml"
OPENCV_BGR = "{decode: {backend: opencv, order: BGR}}"


def run_machine(
    project: Project, machine: str, decode: str | None = None, one_cpu: bool = False
) -> pytest.RunResult:
    """A run as machine ``machine``, in this process; its hardware key says 2 usable CPUs, or 1
    with ``one_cpu`` (another hardware key: a fixed count either way, whatever this host has)."""
    text = (
        project.manifest("tiny_onnx")
        if decode is None
        else project.manifest("tiny_onnx", decode=decode)
    )
    (project.path / MANIFEST).write_text(text)
    args = ("--mlrepro-json", f"{machine}.json", "--mlrepro-machine", machine)
    with mock.patch.object(fingerprint, "usable_cpu_count", lambda: 1 if one_cpu else 2):
        return project.run(*args)


def merge(project: Project, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main(["merge", *(str(project.path / a) if a.endswith(".json") else a for a in args)])
    out, err = capsys.readouterr()
    return status, out, err


def accuracy_row(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    (row,) = [r for r in data["results"] if "::accuracy[" in r["nodeid"]]
    return row


def independent_agreement(first: Path, second: Path) -> tuple[int, int, set[str]]:
    """(shared samples, samples whose top-1 agrees, ids where they differ), from the files."""
    a, b = (accuracy_row(p)["per_sample"]["now"] for p in (first, second))
    top1_a = {s: k[0] for s, k in zip(a["ids"], a["topk"])}
    top1_b = {s: k[0] for s, k in zip(b["ids"], b["topk"])}
    shared = set(top1_a) & set(top1_b)
    differ = {s for s in shared if top1_a[s] != top1_b[s]}
    return len(shared), len(shared) - len(differ), differ


@pytest.fixture
def machines(serial_project: Project) -> Project:
    project = serial_project.make(
        {"tiny_onnx.yaml": serial_project.manifest("tiny_onnx")}, goldens=["tiny_onnx"]
    )
    alpha = run_machine(project, "alpha")
    alpha.assert_outcomes(passed=1)
    gamma = run_machine(project, "gamma")
    gamma.assert_outcomes(passed=1)
    beta = run_machine(project, "beta", OPENCV_BGR, one_cpu=True)
    beta.assert_outcomes(failed=1)  # a drift from the golden on that machine
    return project


def test_two_machines_that_agree_merge_into_a_passing_matrix(
    machines: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = merge(machines, capsys, "alpha.json", "gamma.json", "--csv", "m.csv")
    assert status == 0, err
    assert "**PASSED**: 2 cells, none failed" in out
    rows = list(csv.DictReader((machines.path / "m.csv").open()))
    results = {r["machine"]: r for r in rows if r["row"] == "result"}
    assert sorted(results) == ["alpha", "gamma"]
    for name in ("alpha", "gamma"):
        row = accuracy_row(machines.path / f"{name}.json")
        assert float(results[name]["top1"]) == row["top1"]
        assert float(results[name]["top5"]) == row["top5"]
        assert float(results[name]["agreement"]) == row["agreement"] == 1.0
        assert results[name]["status"] == "pass"
        assert results[name]["manifest_digest"] == row["manifest_digest"]
    (pair,) = [r for r in rows if r["row"] == "agreement"]
    assert (pair["machine"], pair["other_machine"]) == ("alpha [cpu]", "gamma [cpu]")
    assert float(pair["agreement"]) == 1.0 and pair["flagged"] == ""
    assert pair["same_pipeline"] == "True" and float(pair["max_score_diff"]) == 0.0


def test_a_machine_with_another_decoder_is_flagged_and_fails_the_gate(
    machines: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = merge(
        machines,
        capsys,
        "alpha.json",
        "beta.json",
        "gamma.json",
        "--markdown",
        "m.md",
        "--csv",
        "m.csv",
    )
    assert status == 1, err
    assert (machines.path / "m.md").read_text() == out
    alpha, beta = machines.path / "alpha.json", machines.path / "beta.json"
    shared, agree, differ = independent_agreement(alpha, beta)
    assert shared == 24 and 0 < len(differ) < shared  # some samples disagree, not all
    rows = list(csv.DictReader(io.StringIO((machines.path / "m.csv").read_text())))
    pairs = {(r["machine"], r["other_machine"]): r for r in rows if r["row"] == "agreement"}
    ab = pairs[("alpha [cpu]", "beta [cpu]")]
    assert float(ab["agreement"]) == agree / shared
    assert int(ab["samples"]) == shared and ab["same_pipeline"] == "False"
    assert ab["flagged"] == "beta [cpu]"
    assert float(pairs[("alpha [cpu]", "gamma [cpu]")]["agreement"]) == 1.0
    # beta's cell: the drift, and another pipeline (its manifest digest is not the others').
    beta_row = accuracy_row(beta)
    alpha_digest = accuracy_row(alpha)["manifest_digest"]
    assert beta_row["manifest_digest"] != alpha_digest
    results = {r["machine"]: r for r in rows if r["row"] == "result"}
    # beta's key says one usable CPU, alpha's two: another machine.
    assert results["beta"]["hardware_slug"] != results["alpha"]["hardware_slug"]
    assert beta_row["hardware_key"]["usable_cpus"] == 1
    assert results["beta"]["status"] == "fail" and results["beta"]["verdict"] == "drift"
    assert float(results["beta"]["top1"]) == beta_row["top1"] < 100
    assert beta_row["manifest_digest"][:12] in results["beta"]["other_pipeline"]
    assert results["alpha"]["other_pipeline"] == results["gamma"]["other_pipeline"] == ""
    # The Markdown says it in words: the flagged machine with the samples, the gate's verdict.
    assert "**FAILED**: 1 of 3 cells failed" in out
    assert (
        f"- **beta [cpu]** disagrees with the per-sample majority on {len(differ)} of {shared} "
        "samples (e.g. " + ", ".join(sorted(differ)[:5]) + ")"
    ) in out
    assert (
        f"| alpha [cpu] | beta [cpu] | {shared} | {agree / shared:.2%} ({agree}/{shared}) |" in out
    )
    assert "- tiny_onnx on beta [cpu]: failed: accuracy: drift" in out


def test_an_invalid_or_unreadable_results_file_exits_2_naming_the_file_and_field(
    machines: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads((machines.path / "alpha.json").read_text())
    index = next(i for i, r in enumerate(data["results"]) if "::accuracy[" in r["nodeid"])
    data["results"][index]["per_sample"]["now"]["topk"][3] = "oops"
    (machines.path / "bad.json").write_text(json.dumps(data))
    status, out, err = merge(machines, capsys, "alpha.json", "bad.json", "--csv", "m.csv")
    assert status == 2 and out == ""
    field = f"$.results[{index}].per_sample.now.topk[3]"
    assert f"bad.json: {field}: 'oops' is not of type 'array'" in err
    assert "Traceback" not in err and not (machines.path / "m.csv").exists()
    (machines.path / "cut.json").write_text((machines.path / "alpha.json").read_text()[:200])
    status, _, err = merge(machines, capsys, "cut.json")
    assert status == 2 and "cut.json: not a results file: invalid JSON" in err
    status, _, err = merge(machines, capsys, "missing.json")
    assert status == 2 and "missing.json: cannot read the results file" in err
    # One machine name given twice for the same item: two files claim to be one machine.
    status, _, err = merge(machines, capsys, "alpha.json", "alpha.json")
    assert status == 2 and "machine 'alpha' has this result twice" in err


def test_the_shards_of_one_machine_merge_into_its_cell(
    serial_project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Machine alpha ran its data set in two shards (two files), beta whole: alpha's cell is the
    whole evaluation, and the two machines agree on every sample."""
    project = serial_project.make(
        {"tiny_onnx.yaml": serial_project.manifest("tiny_onnx")}, goldens=["tiny_onnx"]
    )
    for index in (1, 2):
        shard = project.run(
            f"--mlrepro-shard={index}/2",
            "--mlrepro-json",
            f"alpha-{index}.json",
            "--mlrepro-machine",
            "alpha",
        )
        assert shard.ret == 0, shard.stdout.str()
    run_machine(project, "beta").assert_outcomes(passed=1)
    status, out, err = merge(
        project, capsys, "alpha-1.json", "alpha-2.json", "beta.json", "--csv", "m.csv"
    )
    assert status == 0, err + out
    rows = list(csv.DictReader((project.path / "m.csv").open()))
    results = {r["machine"]: r for r in rows if r["row"] == "result"}
    whole = accuracy_row(project.path / "beta.json")
    for key in ("samples", "top1", "top5", "agreement"):
        assert float(results["alpha"][key]) == float(results["beta"][key]) == whole[key]
    assert results["alpha"]["status"] == "pass"
    (pair,) = [r for r in rows if r["row"] == "agreement"]
    assert int(pair["samples"]) == whole["samples"] and float(pair["agreement"]) == 1.0
    # One shard alone is not the whole: the cell fails, naming the missing shard.
    status, out, _ = merge(project, capsys, "alpha-1.json", "beta.json")
    assert status == 1 and "missing shard 2/2" in out


def test_the_merged_matrix_as_an_html_report(
    machines: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """``mlrepro merge --html``: the same page as a session's report, filled from the files:
    every cell, the failed one marked, the cross-machine agreement with the flagged machine."""
    pytest.importorskip("jinja2")
    pytest.importorskip("matplotlib")
    status, _, err = merge(
        machines, capsys, "alpha.json", "beta.json", "gamma.json", "--html", "m.html"
    )
    assert status == 1, err
    page = (machines.path / "m.html").read_text()
    assert not re.search(r"""(src|href)=["']https?://""", page)  # self-contained
    shared, agree, _ = independent_agreement(
        machines.path / "alpha.json", machines.path / "beta.json"
    )
    rows = re.findall(r"<tr class=\"(row-\w+)\"[^>]*>\s*<td>tiny_onnx</td>\s*<td>(\w+)</td>", page)
    assert sorted(rows) == [("row-fail", "beta"), ("row-pass", "alpha"), ("row-pass", "gamma")]
    assert "<strong>tiny_onnx</strong>: beta [cpu] disagrees with the majority" in page
    percent = f"{agree / shared * 100:.2f}%"
    assert (
        f'<td>alpha [cpu]</td><td>beta [cpu]</td><td class="num">{shared}</td>'
        f'<td class="num cell-fail">{percent}</td>'
    ) in page
    # The machine that ran another pipeline is named, with the field, at the top of the page.
    assert "<li>tiny_onnx on beta [cpu]: another pipeline: inputs[0].preprocess[0].decode" in page


def test_merge_html_without_the_report_libraries_says_which_extra(
    machines: Project, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "jinja2", None)  # an import of it fails, as uninstalled
    status, out, err = merge(machines, capsys, "alpha.json", "--html", "m.html")
    assert status == 2 and out == ""
    assert "mlrepro merge --html needs jinja2" in err and "pytest-mlrepro[report]" in err
    assert not (machines.path / "m.html").exists()


def test_the_machines_cpu_isa_flags_and_differing_packages_are_shown(
    serial_project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two machines whose results files record other ISA flags and another onnxruntime: the
    matrix's machines table names each CPU and its flags, and what differs between them. (One
    machine runs here, twice: both files are then written as fixed machines', tests/machines.py:
    an AMD EPYC with AVX2 only, and an Intel Xeon with AVX-512 and AMX.)"""
    project = serial_project.make(
        {"tiny_onnx.yaml": serial_project.manifest("tiny_onnx")}, goldens=["tiny_onnx"]
    )
    run_machine(project, "alpha").assert_outcomes(passed=1)
    run_machine(project, "intel").assert_outcomes(passed=1)
    documents = {}
    for name, machine in (("alpha", "amd-epyc-avx2"), ("intel", "intel-xeon-amx")):
        path = project.path / f"{name}.json"
        document = json.loads(path.read_text())
        environment = document["machine"]["environment"]
        document["machine"]["environment"] = environment_of(machine, environment)
        documents[name] = document
    alpha = documents["alpha"]["machine"]["environment"]
    env = documents["intel"]["machine"]["environment"]
    env["numeric_packages"] = {**alpha["numeric_packages"], "onnxruntime": "0.0.1"}
    for name, document in documents.items():
        (project.path / f"{name}.json").write_text(json.dumps(document))

    status, out, err = merge(project, capsys, "alpha.json", "intel.json")
    assert status == 0, err
    table = out[out.index("## Machines") :]
    flags = " ".join(env["cpu_flags"])
    assert f"| intel | Intel(R) Xeon(R) Platinum 8480+ (GenuineIntel) | {flags} |" in table
    assert f"| alpha | {alpha['cpu']}" in table and " ".join(alpha["cpu_flags"]) in table
    assert "| onnxruntime 0.0.1 |" in table
    assert f"| onnxruntime {alpha['numeric_packages']['onnxruntime']} |" in table
    only_intel = sorted(set(env["cpu_flags"]) - set(alpha["cpu_flags"]))
    assert "amx_tile" in only_intel and "avx512f" in only_intel
    assert not set(alpha["cpu_flags"]) - set(env["cpu_flags"])
    assert (
        "- ISA flags not on every machine: " + ", ".join(f"{f} (intel)" for f in only_intel)
        in table
    )
    assert f"numpy {alpha['numeric_packages']['numpy']}" in table  # the same on both
    if importlib.util.find_spec("jinja2") and importlib.util.find_spec("matplotlib"):
        status, _, err = merge(project, capsys, "alpha.json", "intel.json", "--html", "m.html")
        assert status == 0, err
        page = (project.path / "m.html").read_text()
        assert (
            "<dt>intel</dt><dd>Intel(R) Xeon(R) Platinum 8480+ (GenuineIntel) · ISA flags: " in page
        )
        assert "numeric packages that differ: onnxruntime 0.0.1" in page


def independent_top5_changed(path: Path) -> int:
    """The samples in both whose top-5 classes, in order, differ from the golden's: from the
    file's per-sample results."""
    per_sample = accuracy_row(path)["per_sample"]
    now, golden = per_sample["now"], per_sample["golden"]
    theirs = {s: k[:5] for s, k in zip(golden["ids"], golden["topk"])}
    return sum(1 for s, k in zip(now["ids"], now["topk"]) if s in theirs and k[:5] != theirs[s])


def test_the_top5_changed_count_reaches_the_results_file_the_csv_and_the_html_page(
    machines: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    """A field of the accuracy record (results.LISTED): written by the check, listed by the
    merge's CSV and HTML matrix with no code of their own."""
    pytest.importorskip("jinja2")
    pytest.importorskip("matplotlib")
    alpha, beta = machines.path / "alpha.json", machines.path / "beta.json"
    changed = independent_top5_changed(beta)
    assert changed > 0  # beta decodes BGR: rankings move
    assert accuracy_row(beta)["top5_changed"] == changed
    assert accuracy_row(alpha)["top5_changed"] == independent_top5_changed(alpha) == 0
    status, _, err = merge(
        machines, capsys, "alpha.json", "beta.json", "--csv", "m.csv", "--html", "m.html"
    )
    assert status == 1, err
    rows = list(csv.DictReader((machines.path / "m.csv").open()))
    results = {r["machine"]: r for r in rows if r["row"] == "result"}
    listed = (results["alpha"]["top5_changed"], results["beta"]["top5_changed"])
    assert listed == ("0", str(changed))
    page = (machines.path / "m.html").read_text()
    assert '<th scope="col">top-5 changed</th>' in page
    table = re.search(r'<table class="matrix".*?</table>', page, re.S)
    assert table is not None
    beta_row = re.search(
        r'<tr class="matrix-row row-fail"[^>]* data-machine="beta".*?</tr>', table[0], re.S
    )
    assert beta_row is not None
    cells = [c.strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", beta_row[0], re.S)]
    columns = re.findall(r'<th scope="col">(.*?)</th>', table[0])
    assert cells[columns.index("top-5 changed")] == str(changed)
