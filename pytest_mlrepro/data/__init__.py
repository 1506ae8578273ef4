"""Data sets: labels files, class folders, mirrors, cache, download, checksums, shards."""

from __future__ import annotations

from ._datasets import ResolvedDataset, Sample, resolve_dataset
from ._shards import MAX_SHARDS, Shard, shard_of

__all__ = [
    "MAX_SHARDS",
    "ResolvedDataset",
    "Sample",
    "Shard",
    "resolve_dataset",
    "shard_of",
]
