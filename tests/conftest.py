"""Fixtures for the plugin's integration tests (tests/test_plugin.py): a tiny synthetic project.

Images and models are made once per session; each test gets its own copy in ``pytester.path`` and
runs pytest on it in a subprocess, once without and once with pytest-xdist (``-n 2``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import (
    LOOSE,
    QUIET,
    Project,
    make_assets,
    make_project,
    make_torchscript,
    manifest_text,
)


@pytest.fixture(scope="session")
def mlrepro_assets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Images, labels, both models, and goldens recorded by the plugin for the ONNX manifests
    ``tiny_onnx`` and ``tiny_loose`` (under ``golden/``), made once per session."""
    root = make_assets(tmp_path_factory.mktemp("mlrepro-assets"), torchscript=False)
    template = root / "template"
    template.mkdir()
    make_project(
        template,
        root,
        manifests={
            "tiny_onnx.yaml": manifest_text("tiny_onnx", assets=root),
            "tiny_loose.yaml": manifest_text("tiny_loose", assets=root, extra=LOOSE),
        },
    )
    recording = subprocess.Popen(
        [sys.executable, "-m", "pytest", *QUIET, "--mlrepro-update", "-q"],
        cwd=template,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**_clean_env(), "MLREPRO_CACHE": str(root / "cache")},
    )
    make_torchscript(root / "models" / "tiny.pt")  # imports torch meanwhile
    output, _ = recording.communicate(timeout=120)
    assert recording.returncode == 0, output
    shutil.copytree(template / "golden", root / "golden")
    return root


def _clean_env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if k not in ("MLREPRO_DATA", "MLREPRO_CACHE", "PYTEST_ADDOPTS")
    }


@pytest.fixture
def _mlrepro_env(monkeypatch: pytest.MonkeyPatch, pytester: pytest.Pytester) -> None:
    monkeypatch.delenv("MLREPRO_DATA", raising=False)
    monkeypatch.setenv("MLREPRO_CACHE", str(pytester.path / ".mlrepro-cache"))


@pytest.fixture(params=[[], ["-n", "2"]], ids=["serial", "xdist"])
def project(
    request: pytest.FixtureRequest,
    pytester: pytest.Pytester,
    mlrepro_assets: Path,
    _mlrepro_env: None,
) -> Project:
    """A tiny project whose runs use no xdist, then ``-n 2``."""
    return Project(pytester, mlrepro_assets, request.param)


@pytest.fixture
def serial_project(pytester: pytest.Pytester, mlrepro_assets: Path, _mlrepro_env: None) -> Project:
    """A tiny project whose runs never use xdist (for checks of the one process)."""
    return Project(pytester, mlrepro_assets, [])
