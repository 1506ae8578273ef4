"""Shards of a data set, chosen by a hash of each sample id alone: the same on every machine,
disjoint, and a golden partitioned alike, so that the merge of N shards is the unsharded result."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

MAX_SHARDS = 10_000
"""The most shards: a count like 10**9 is a typo or an attack, refused before anything is built
per shard."""


def shard_of(sample_id: str, count: int) -> int:
    """The shard (1-based) of ``sample_id`` among ``count`` shards."""
    digest = hashlib.sha256(sample_id.encode()).hexdigest()[:16]
    return int(digest, 16) % count + 1


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 1 <= self.index <= self.count:
            raise ValueError(
                f"shard {self.index}/{self.count}: expected I/N with N >= 1 and 1 <= I <= N"
            )
        if self.count > MAX_SHARDS:
            raise ValueError(
                f"shard {self.index}/{self.count}: at most {MAX_SHARDS} shards (N <= {MAX_SHARDS})"
            )

    @classmethod
    def parse(cls, text: str) -> Shard:
        """``"I/N"`` (e.g. ``"1/4"``); ValueError with a message that says what is expected."""
        match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
        if match is None:
            raise ValueError(f"expected I/N (e.g. 1/4), got {text!r}")
        return cls(int(match.group(1)), int(match.group(2)))

    def holds(self, sample_id: str) -> bool:
        return shard_of(sample_id, self.count) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"
