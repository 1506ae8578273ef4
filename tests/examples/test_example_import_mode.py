"""The example's root conftest.py (it registers the example's builders from ``examples/``) works
under ``--import-mode=importlib``, which puts no folder on sys.path (issue 30, 6)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import REPO


@pytest.mark.skipif(sys.version_info < (3, 11), reason="python -P (no script folder on sys.path)")
def test_the_examples_conftest_loads_under_import_mode_importlib() -> None:
    # -P and no PYTHONPATH: neither the working folder nor the checkout is on sys.path, as when
    # the `pytest` script runs (the plugin itself comes from the installed package).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    collected = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "--import-mode=importlib",
            "manifests/efficientnet_lite0_torch.yaml",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert "efficientnet_lite0_torch.yaml::accuracy[cpu]" in collected.stdout
