"""Registers the builders of the built-in example models (see manifests/)."""

import pytest_mlrepro.zoo.efficientnet_lite0  # noqa: F401  (registers on import)
