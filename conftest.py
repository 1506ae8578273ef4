"""Registers the builders of the built-in example models (see manifests/)."""

import sys
from pathlib import Path

# The examples package sits beside this file. pytest's default import mode (prepend) puts this
# folder on sys.path before importing this file; --import-mode=importlib puts nothing there, and
# `from examples import ...` would fail (No module named 'examples'): the folder is added then.
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

# Registers on import: the examples' builders.
from examples import digits_cnn, efficientnet_lite0, efficientnet_lite0_tf  # noqa: E402, F401
