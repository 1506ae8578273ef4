"""The hooks pytest-mlrepro adds to pytest: a plugin or ``conftest.py`` adds a kind of item to every
manifest by implementing :func:`pytest_mlrepro_make_items`, as the plugin's own kinds do."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..manifest import Manifest


@pytest.hookspec
def pytest_mlrepro_make_items(
    parent: pytest.File, manifest: Manifest, devices: list[str]
) -> list[pytest.Item]:
    """Make the items of one kind for a manifest that loaded (not called for one that did not).

    Every implementation is called for every manifest; the items are ordered by kind (accuracy,
    latency, determinism, others), then as returned, and get the plugin's markers.

    :param parent: the manifest file's collector (``SomeItem.from_parent(parent, ...)``).
    :param manifest: the validated manifest.
    :param devices: the selected devices in manifest order, maybe none (goldens: the first's).
    :return: the items made (possibly none).
    """
    raise NotImplementedError
