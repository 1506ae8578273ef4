"""What the ``mlrepro init`` tests share: a project folder holding the tiny data set (and the
models) for ``init`` to read, the tiny torch module their builder conftests register, and the
once-per-process import of torch's lazily imported parts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

# One import style: ``from init_helpers import ...`` (see helpers.py).
if __name__.startswith("tests."):
    raise ImportError(
        f"import the test helpers as 'init_helpers' (from init_helpers import ...), not as "
        f"{__name__!r}"
    )

MEANS_MODULE = """\
import torch

import pytest_mlrepro


class Means(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(3))

    def forward(self, x):
        return x.mean(dim=(2, 3)) * self.scale

"""
"""The head of a builder conftest: the tiny model as a module (logits: a learned scale of each
channel's mean), for the builders registered after it."""


def import_torch_parts() -> None:
    """torch's lazily imported parts, imported once by a module's assets: pytester unloads what
    a test imported, and some of torch's registrations cannot be made twice in one process."""
    from torch._inductor import test_operators  # noqa: F401


def init_project(
    pytester: pytest.Pytester,
    assets: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    models: bool = True,
    conftest: str = "",
) -> pytest.Pytester:
    """A project folder with the tiny data set under data/ (the ``mlrepro_data`` folder), the
    assets' models under models/ when ``models``, and ``conftest`` as its conftest.py; its own
    model cache, and no ``MLREPRO_DATA`` from the environment."""
    monkeypatch.delenv("MLREPRO_DATA", raising=False)
    monkeypatch.setenv("MLREPRO_CACHE", str(pytester.path / ".mlrepro-cache"))
    shutil.copytree(assets / "data", pytester.path / "data")
    if models:
        shutil.copytree(assets / "models", pytester.path / "models")
    (pytester.path / "pytest.ini").write_text("[pytest]\nmlrepro_data = data\n")
    if conftest:
        (pytester.path / "conftest.py").write_text(conftest)
    return pytester
