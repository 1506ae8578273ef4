"""The hooks pytest-mlrepro adds to pytest (registered with ``pluginmanager.add_hookspecs``).

A plugin, or a ``conftest.py``, adds a kind of item to every manifest by implementing
:func:`pytest_mlrepro_make_items`; the plugin's own kinds (accuracy, latency, determinism) are made
by an implementation of it too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from ..manifest import Manifest


@pytest.hookspec
def pytest_mlrepro_make_items(
    parent: pytest.File, manifest: Manifest, devices: list[str]
) -> list[pytest.Item]:
    """Make the items of one kind for a manifest that loaded (a manifest that does not load gets
    one error item instead, and this hook is not called for it).

    Every implementation is called, for every manifest; one that has nothing for this manifest
    returns an empty list. The items of all implementations are collected together, ordered by
    kind (accuracy, latency, determinism, then any other kind), each kind's in the order its
    implementation returned them. Each item then gets the plugin's markers (``mlrepro``,
    ``mlrepro_<kind>`` from its ``kind`` attribute, framework and device).

    :param parent: the manifest file's collector; make each item with
        ``SomeItem.from_parent(parent, name=..., ...)``.
    :param manifest: the validated manifest.
    :param devices: the devices selected for this manifest (``--mlrepro-device``), in the
        manifest's order; may be empty. Accuracy goldens are recorded on the first one.
    :return: the items made (possibly none).
    """
    raise NotImplementedError
