"""Every option and ini key of the plugin does what it says, through pytest.

The options no other test named (``--mlrepro-allowed-root``, ``--mlrepro-fingerprint-samples``,
``--mlrepro-latency-max-contention``; ``--mlrepro-no-download`` is in test_model_sources.py, beside
its HTTP server) and the ini key ``mlrepro_manifests`` with its patterns, each in a run that fails
when the option stops working; and a check that every option and ini key the plugin registers is
named by some test, so that a new one comes with its test.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import Project

from pytest_mlrepro.plugin._base import options
from pytest_mlrepro.plugin._options import INI_KEYS, OPTIONS

TESTS = Path(__file__).resolve().parents[1]


def test_every_option_and_ini_key_is_named_by_a_test() -> None:
    # This module's docstring lists option names; only tests count.
    texts = [path.read_text().replace(__doc__ or "", "") for path in TESTS.rglob("test_*.py")]
    names = [o.flag for o in OPTIONS] + [k.name for k in INI_KEYS]
    assert len(names) > 30  # the plugin's tables, not an empty list
    unnamed = [name for name in names if not any(name in text for text in texts)]
    assert unnamed == []


def test_allowed_root_lets_a_manifest_use_a_model_outside_the_project(
    serial_project: Project, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("models_elsewhere")
    shutil.copy(serial_project.assets / "models" / "tiny.onnx", outside / "tiny.onnx")
    model = str(outside / "tiny.onnx")
    project = serial_project.make({"far.yaml": serial_project.manifest("far", model_path=model)})

    refused = project.run("--mlrepro-update")
    refused.assert_outcomes(failed=1)
    refused.stdout.fnmatch_lines(["*model.file.path: *outside the project*mlrepro_allowed_roots*"])
    assert not project.golden("far").exists()

    # One argument (=): pytest finds the rootdir and ini file before plugins' options are known,
    # and would take a separate existing folder after the flag for a path to test.
    allowed = project.run("--mlrepro-update", f"--mlrepro-allowed-root={outside}")
    allowed.assert_outcomes(passed=1)
    allowed.stdout.fnmatch_lines(["far *cpu *onnxruntime *24 *golden recorded"])


def test_fingerprint_samples_sets_how_many_probe_samples_a_recorded_golden_keeps(
    serial_project: Project,
) -> None:
    project = serial_project.make({"tiny_onnx.yaml": serial_project.manifest("tiny_onnx")})
    kept = {}
    for count in (None, "3"):
        args = () if count is None else ("--mlrepro-fingerprint-samples", count)
        project.golden("tiny_onnx").unlink(missing_ok=True)
        project.run("--mlrepro-update", *args).assert_outcomes(passed=1)
        probes = json.loads(project.golden("tiny_onnx").read_text())["probes"]
        kept[count] = {row[0] for row in probes["fingerprints"]}
    assert len(kept[None]) == 8  # the ini key's default
    assert len(kept["3"]) == 3
    assert kept["3"] <= set(kept[None])  # the same choice of probes, fewer of them

    bad = project.run("--mlrepro-fingerprint-samples", "-1")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*mlrepro_fingerprint_samples: must not be negative, got -1*"])


def test_latency_max_contention_overrides_its_ini_key_and_is_checked(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\nmlrepro_latency_max_contention = 0.9\n")
    assert options(pytester.parseconfigure()).max_contention == 0.9
    given = pytester.parseconfigure("--mlrepro-latency-max-contention", "0.1")
    assert options(given).max_contention == 0.1

    bad = pytester.runpytest("--mlrepro-latency-max-contention", "2")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(
        ["*--mlrepro-latency-max-contention*'2': expected a number between 0 and 1*"]
    )


def test_mlrepro_manifests_patterns_name_the_files_that_are_manifests(
    serial_project: Project,
) -> None:
    project = serial_project.make({"default.yaml": serial_project.manifest("in_default")})
    path = project.path
    (path / "zoo").mkdir()
    (path / "zoo" / "a.yml").write_text(
        project.manifest("in_zoo").replace(
            "checksums: tiny.sha256", "checksums: ../manifests/tiny.sha256"
        )
    )
    nested = path / "suites" / "vision" / "checks"
    nested.mkdir(parents=True)
    (nested / "c.yaml").write_text(
        project.manifest("in_suites", model_path="../../../models/tiny.onnx").replace(
            "checksums: tiny.sha256", "checksums: ../../../manifests/tiny.sha256"
        )
    )
    # Named by a pattern, but not a manifest's shape: left alone.
    (nested / "foreign.yaml").write_text("model: {name: resnet}\ndataset: {name: imagenet}\n")

    def collected(*args: str) -> set[str]:
        result = project.run("--collect-only", "-q", *args)
        return {line.split("::")[0] for line in result.outlines if "::" in line}

    assert collected() == {"manifests/default.yaml"}
    patterns = "mlrepro_manifests =\n    zoo/*.yml\n    suites/*/checks/*.yaml\n"
    (path / "pytest.ini").write_text((path / "pytest.ini").read_text() + patterns)
    assert collected() == {"zoo/a.yml", "suites/vision/checks/c.yaml"}

    run = project.run("--mlrepro-update")
    run.assert_outcomes(passed=2)
    assert sorted(p.name for p in (path / "golden").iterdir()) == ["in_suites.json", "in_zoo.json"]
