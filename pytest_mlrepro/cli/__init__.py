"""The ``mlrepro`` command: discover, pitfalls, diagnose (reads configuration through pytest's
own machinery)."""

from __future__ import annotations

from ._main import main

__all__ = ["main"]
