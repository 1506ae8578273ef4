"""Data sets: labels files, class folders, mirrors, cache, download, checksums, shards."""

from __future__ import annotations

from ._datasets import ResolvedDataset, Sample, resolve_dataset

__all__ = [
    "ResolvedDataset",
    "Sample",
    "resolve_dataset",
]
