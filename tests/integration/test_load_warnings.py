"""A framework's warning while a model loads (torch 2.13's DeprecationWarning from
``torch.jit.load``) is the warning it is, never "not a TorchScript archive": shown in pytest's
warnings summary, and under ``-W error`` raised as that warning (issue 30, 4).

The tiny TorchScript model's ``torch.jit.load`` warns in torch 2.13; a conftest in the project
makes every torch warn the same way, so the test does not depend on the installed torch's version.
"""

from __future__ import annotations

import textwrap

import pytest
from helpers import Project

pytest.importorskip("torch")

# torch.jit.load wrapped to warn as torch 2.13's does (whatever the installed torch says).
WARNING_CONFTEST = textwrap.dedent("""\
    import warnings

    import torch

    _load = torch.jit.load


    def _warning_load(*args, **kwargs):
        warnings.warn("mlrepro-test: torch.jit.load is deprecated", DeprecationWarning)
        return _load(*args, **kwargs)


    torch.jit.load = _warning_load


    def pytest_unconfigure():
        torch.jit.load = _load
    """)


@pytest.fixture
def torch_project(serial_project: Project) -> Project:
    serial_project.make({"tiny_torch.yaml": serial_project.manifest("tiny_torch", "torch")})
    (serial_project.path / "conftest.py").write_text(WARNING_CONFTEST)
    return serial_project


def test_a_load_warning_is_shown_as_a_warning(torch_project: Project) -> None:
    result = torch_project.run("--mlrepro-update", "-W", "default::DeprecationWarning")
    assert result.ret == 0 and result.parseoutcomes()["passed"] == 1, result.stdout.str()
    out = result.stdout.str()
    assert "warnings summary" in out
    assert "mlrepro-test: torch.jit.load is deprecated" in out


def test_a_load_warning_under_w_error_is_not_a_bad_model_file(torch_project: Project) -> None:
    result = torch_project.run("--mlrepro-update", "-W", "error::DeprecationWarning")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "not a TorchScript archive" not in out
    assert "DeprecationWarning: mlrepro-test: torch.jit.load is deprecated" in out
