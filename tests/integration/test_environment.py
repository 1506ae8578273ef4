"""The environment that explains a cross-machine difference (CPU vendor and ISA flags, numeric
packages and settings) in what the plugin writes: goldens and results files; a golden recorded
before these fields existed still loads, passes and is not rewritten for them; and a drift's
diagnosis names them when they changed, and only then."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from helpers import PREPROCESS_BGR, PREPROCESS_RGB, Project
from machines import identity as machine_identity

from pytest_mlrepro import fingerprint
from pytest_mlrepro.goldens import _store as golden_store

pytest.importorskip("onnxruntime")

NEW_FIELDS = ("cpu_vendor", "cpu_flags", "numeric_packages", "numeric_settings")
REPO = Path(__file__).resolve().parents[2]


def _tiny(project: Project, golden: bool = True) -> Project:
    """The tiny ONNX project; ``golden``: with its golden recorded by this run of the plugin."""
    project.make({"tiny_onnx.yaml": project.manifest("tiny_onnx")})
    if golden:
        project.run("--mlrepro-update").assert_outcomes(passed=1)
    return project


def _rewrite_environment(path: Path, change: Any) -> None:
    """Rewrite the golden at ``path`` with ``change(environment)`` as its environment."""
    golden = golden_store.read(path)
    assert golden is not None
    env = dict(golden.environment)
    change(env)
    golden_store.write(path, dataclasses.replace(golden, environment=env))


def _drop_new_fields(env: dict[str, Any]) -> None:
    for name in NEW_FIELDS:
        env.pop(name, None)


def test_a_recorded_golden_and_the_results_file_hold_the_cpu_and_numeric_environment(
    serial_project: Project,
    monkeypatch: pytest.MonkeyPatch,
    as_machine: Callable[[str], dict[str, Any]],
) -> None:
    as_machine("intel-xeon-amx")  # a fixed machine: what is recorded is not this host's
    project = _tiny(serial_project, golden=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    result = project.run("--mlrepro-update", "--mlrepro-json", "out.json")
    result.assert_outcomes(passed=1)
    golden_env = json.loads(project.golden("tiny_onnx").read_text())["environment"]
    machine_env = json.loads((project.path / "out.json").read_text())["machine"]["environment"]
    identity = fingerprint.cpu_identity()
    for env in (golden_env, machine_env):
        assert env["cpu_vendor"] == identity["cpu_vendor"]
        assert env["cpu_flags"] == identity["cpu_flags"]
        assert env["numeric_packages"]["onnxruntime"] == importlib.metadata.version("onnxruntime")
        assert env["numeric_packages"]["numpy"] == importlib.metadata.version("numpy")
        assert env["numeric_settings"]["OMP_NUM_THREADS"] == "1"
        assert env["cpu"] == fingerprint.cpu_model()  # the keys it always had stay


def test_the_session_report_shows_the_isa_flags_and_packages_readably(
    serial_project: Project, as_machine: Callable[[str], dict[str, Any]]
) -> None:
    pytest.importorskip("jinja2")
    pytest.importorskip("matplotlib")
    as_machine("arm-neoverse-sve")  # a fixed machine (Arm's Features), not this host
    project = _tiny(serial_project)
    project.run("--mlrepro-html", "report.html").assert_outcomes(passed=1)
    page = (project.path / "report.html").read_text()
    flags = " ".join(fingerprint.cpu_identity()["cpu_flags"]) or "none"
    assert f"<dt>cpu_flags</dt><dd>{flags}</dd>" in page
    onnxruntime = importlib.metadata.version("onnxruntime")
    assert re.search(rf"<dt>numeric_packages</dt><dd>[^<]*onnxruntime {onnxruntime}", page)


def test_the_committed_goldens_without_the_new_fields_still_load(tmp_path: Path) -> None:
    # The Keras golden as it was before the new fields (its committed file has gained them by
    # --mlrepro-enrich since: issue 33).
    data = json.loads((REPO / "golden" / "efficientnet_lite0_keras.json").read_text())
    data["environment"] = {k: v for k, v in data["environment"].items() if k not in NEW_FIELDS}
    path = tmp_path / "efficientnet_lite0_keras.json"
    path.write_text(json.dumps(data, indent=2))
    golden = golden_store.read(path)
    assert golden is not None and golden.results.ids
    assert not set(NEW_FIELDS) & set(golden.environment)


def test_a_golden_without_the_new_fields_passes_and_is_not_rewritten_for_them(
    serial_project: Project,
) -> None:
    project = _tiny(serial_project)
    path = project.golden("tiny_onnx")
    _rewrite_environment(path, _drop_new_fields)
    before = path.read_bytes()
    assert "cpu_flags" not in json.loads(before)["environment"]
    project.run().assert_outcomes(passed=1)
    updated = project.run("--mlrepro-update")
    updated.assert_outcomes(passed=1)
    assert "golden updated" not in updated.stdout.str()
    assert path.read_bytes() == before


def _environment_section(result: pytest.RunResult) -> list[str]:
    out = result.stdout.str()
    assert "environment diff against the golden's:" in out, out
    tail = out.split("environment diff against the golden's:", 1)[1].splitlines()
    lines: list[str] = []
    for line in tail[1:]:
        if not line.startswith("    "):
            break
        if line.startswith("        ") and lines:  # a long line's continuation
            lines[-1] += " " + line.strip()
        else:
            lines.append(line.strip())
    return lines


def _drift(project: Project) -> pytest.RunResult:
    path = project.path / "manifests" / "tiny_onnx.yaml"
    path.write_text(path.read_text().replace(PREPROCESS_RGB, PREPROCESS_BGR))
    result = project.run()
    result.assert_outcomes(failed=1)
    return result


@pytest.mark.parametrize(
    ("here", "there"),
    [("amd-epyc-avx2", "intel-xeon-amx"), ("intel-xeon-amx", "laptop-avx2")],
    ids=["amd-here-intel-golden", "intel-here-laptop-golden"],
)
def test_a_drift_diagnosis_names_the_isa_flags_and_packages_that_changed(
    serial_project: Project,
    as_machine: Callable[[str], dict[str, Any]],
    here: str,
    there: str,
) -> None:
    """Both machines are fixed ones (tests/machines.py): the run's, and the golden's, which had
    other ISA flags, another vendor or model, and another onnxruntime."""
    this = as_machine(here)
    project = _tiny(serial_project)
    other = machine_identity(there)

    def elsewhere(env: dict[str, Any]) -> None:
        env.update(cpu=other["cpu"], cpu_vendor=other["cpu_vendor"])
        env["cpu_flags"] = other["cpu_flags"]
        env["numeric_packages"] = {**fingerprint.numeric_packages(), "onnxruntime": "0.0.1"}
        env["numeric_settings"] = fingerprint.numeric_settings()

    _rewrite_environment(project.golden("tiny_onnx"), elsewhere)
    lines = _environment_section(_drift(project))
    flags_here, flags_there = set(this["cpu_flags"]), set(cast(list[str], other["cpu_flags"]))
    gained = sorted(flags_here - flags_there)
    lost = sorted(flags_there - flags_here)
    assert gained or lost, "the two machines must differ in their flags"
    flags = " ".join([f"+{f}" for f in gained] + [f"-{f}" for f in lost])
    assert f"cpu_flags: {flags}" in lines, lines
    assert f"cpu: {other['cpu']!r} → {this['cpu']!r}" in lines, lines
    vendors = f"cpu_vendor: {other['cpu_vendor']!r} → {this['cpu_vendor']!r}"
    assert (vendors in lines) == (other["cpu_vendor"] != this["cpu_vendor"]), lines
    version = importlib.metadata.version("onnxruntime")
    assert f"numeric_packages.onnxruntime: '0.0.1' → '{version}'" in lines, lines
    assert not any(line.startswith("numeric_settings") for line in lines)


def test_a_drift_against_an_old_golden_says_once_that_it_lacks_the_new_fields(
    serial_project: Project,
) -> None:
    project = _tiny(serial_project)
    _rewrite_environment(project.golden("tiny_onnx"), _drop_new_fields)
    lines = _environment_section(_drift(project))
    text = " ".join(lines)
    assert not any(line.startswith(NEW_FIELDS) for line in lines), lines
    assert lines[0] == "none"
    assert text.count("the golden records no CPU flags, numeric packages or settings") == 1
