"""What the plugin tells report consumers beside pytest's own reports: Allure's test parameters."""

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
