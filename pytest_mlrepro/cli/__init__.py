"""The ``mlrepro`` command: init, pitfalls, diagnose, merge, history. This package is argument
handling; each command's logic lives in its layer (``onboarding``, ``diagnosis``, ``matrix``)."""

from __future__ import annotations

from ._main import main

__all__ = ["main"]
