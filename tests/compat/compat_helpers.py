"""What the compat tests share (tests/compat/: one file per plugin or consumer that users run
beside pytest-mlrepro). Each test runs the tiny project (tests/helpers.py) with that plugin and
skips, saying why, when the plugin is not installed: the compat tier's plugins live in their own
virtual environment (.ci/run: pytest-randomly reseeds and reorders every run it is installed in,
so they stay out of the environment of the main suite)."""

from __future__ import annotations

import importlib.util
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
