"""The hooks pytest-mlrepro adds to pytest (registered with ``pluginmanager.add_hookspecs``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..manifest import Manifest


@pytest.hookspec
def pytest_mlrepro_make_items(
    parent: pytest.File, manifest: Manifest, devices: list[str]
) -> list[pytest.Item]:
    """Make the items of one kind for a manifest that loaded (a manifest that does not load gets one
    error item instead, and this hook is not called for it)."""
    raise NotImplementedError
