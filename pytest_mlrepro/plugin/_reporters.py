"""What the plugin tells report consumers beside pytest's own reports: Allure's test parameters.

Allure (allure-pytest) identifies a test across runs by its ``historyId``: the test's full name
without the part in brackets, and the test's parameters, which it reads from a test function's
``callspec`` only. Manifest items are no functions: ``latency[cpu-b1]`` and ``latency[cpu-b2]``,
``accuracy[cpu]`` and ``accuracy[cuda]``, or one item on two CI shards would get one historyId,
and Allure would fold them into one test with retries. Their parameters are given to Allure
through its public API (``allure.dynamic.parameter``) while the item's setup runs.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

ALLURE_LISTENER = "allure_listener"
"""The name allure-pytest registers its listener under (only when ``--alluredir`` is given)."""


def tell_allure(config: pytest.Config, parameters: dict[str, str]) -> None:
    """Give Allure the item's parameters, when it reports this run (allure is not imported
    otherwise)."""
    if not parameters or config.pluginmanager.get_plugin(ALLURE_LISTENER) is None:
        return
    allure: Any = importlib.import_module("allure")
    for name, value in parameters.items():
        allure.dynamic.parameter(name, value)
