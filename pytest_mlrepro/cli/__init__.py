"""The ``mlrepro`` command: init, pitfalls, diagnose, merge, history; argument handling only."""

from __future__ import annotations

from ._main import main

__all__ = ["main"]
