"""Registers the builders of the built-in example models (see manifests/)."""

from examples import efficientnet_lite0, efficientnet_lite0_tf  # noqa: F401  (registers on import)
