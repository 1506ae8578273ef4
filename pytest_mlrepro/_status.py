"""A check's standing, shared by every check and the results file that states it."""

from typing import Literal

Status = Literal["passed", "failed", "skipped", "no golden", "recorded", "partial"]
"""Compared and within tolerance; failed (a drift, an error, a regression, a golden not
recorded); not compared, listed (a missing framework, a busy machine); nothing to compare with;
a golden written (nothing compared); one shard compared (the verdict is the merge's)."""
End = Literal["pass", "skip", "fail"]
"""How the item ends, which the plugin maps to pytest's outcome."""
