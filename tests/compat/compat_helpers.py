"""What the compat tests share (tests/compat/: one file per plugin or consumer that users run
beside pytest-mlrepro). Each test runs the tiny project (tests/helpers.py) with that plugin and
skips, saying why, when the plugin is not installed: the compat tier's plugins live in their own
virtual environment (.ci/run: pytest-randomly reseeds and reorders every run it is installed in,
so they stay out of the environment of the main suite)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest
from helpers import PREPROCESS_BGR, Project

LATENCY = textwrap.dedent("""\
    latency:
      batch_sizes: [1, 2]
      min_rounds: 3
      min_time: 0.01
      max_time: 0.5
      warmup_rounds: 1
      warmup_time: 0.0
    """)
"""A latency block that measures in a fraction of a second (the tests assert on behaviour, never
on the figures)."""


def needs(module: str, distribution: str) -> pytest.MarkDecorator:
    """Skip unless ``module`` (of the ``compat`` extra's ``distribution``) is importable."""
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None,
        reason=f"{distribution} is not installed (pip install -e '.[compat]'; .ci/run)",
    )


def pytest_junit_schema(folder: Path) -> Path:
    """pytest's own schema of its JUnit files (``testing/example_scripts/junit-10.xsd``, the one
    pytest's own tests validate against), from the source distribution of the installed pytest on
    the package index (``MLREPRO_PYTEST_JUNIT_XSD``: a copy already at hand). Skips, saying why,
    where the index cannot be reached."""
    given = os.environ.get("MLREPRO_PYTEST_JUNIT_XSD")
    if given:
        return Path(given)
    version = importlib.metadata.version("pytest")
    fetched = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps",
         f"pytest=={version}", "-d", str(folder)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    archives = sorted(folder.glob("pytest-*.tar.gz"))
    if fetched.returncode != 0 or not archives:
        pytest.skip(
            f"pytest {version}'s source distribution could not be fetched: {fetched.stderr}"
        )
    with tarfile.open(archives[0]) as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith("/junit-10.xsd"))
        data = archive.extractfile(member)
        assert data is not None
        target = folder / "junit-10.xsd"
        target.write_bytes(data.read())
    return target


XUNIT2_SCHEMA = Path(__file__).with_name("xunit2.xsd")
"""The xunit2 family's rules as a schema (tests/compat/xunit2.xsd: test-suite properties only)."""


def two_manifests(project: Project) -> Project:
    """Two manifests whose items have the same names (``accuracy[cpu]``), one passing and one
    drifting (BGR against an RGB golden), with their goldens."""
    project.make(
        {
            "tiny_onnx.yaml": project.manifest("tiny_onnx"),
            "tiny_loose.yaml": project.manifest("tiny_loose", decode=PREPROCESS_BGR),
        },
        goldens=["tiny_onnx", "tiny_loose"],
    )
    return project
