"""glibc's allocator set so that an evaluation's memory stays flat in the samples and its model
runs as fast as alone; the measurements: docs/measurements.md, "Scale" and "The main job"."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
from collections.abc import Iterator

# glibc's mallopt parameter (malloc.h): allocations of at least this many bytes are mmap'ed.
_M_MMAP_THRESHOLD = -3
# glibc's mallopt parameter: the free memory at the heap's top above which free() returns it.
_M_TRIM_THRESHOLD = -1
# Above every per-image buffer and below a batch, at ImageNet sizes.
_THRESHOLD = 4 * 1024 * 1024
# While the model runs: above a batch's activations of the models measured; a glibc that refuses
# this high a threshold gets the highest it takes.
_MODEL_THRESHOLDS = (512 * 1024 * 1024, 32 * 1024 * 1024)
# The heap's free top kept for the next batch, not handed back at every free().
_TRIM_THRESHOLD = 1024 * 1024 * 1024


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    """The process's own C library when it is glibc (whose tunables these are), else None."""
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return None
        return ctypes.CDLL(None)
    except (AttributeError, OSError, ValueError):  # not glibc, or no confstr name for it
        return None


def release_freed() -> None:
    """``malloc_trim``: fragmentation among images of many sizes must not add up over a run."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


def resident_bytes() -> int | None:
    """The process's resident set in bytes (``/proc/self/statm``), or None."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


GROWTH_BEFORE_RELEASE = 32 * 1024 * 1024
"""How far above its lowest the resident set may be before freed pages are handed back."""


class FreedPages:
    """Trims only once RSS grew :data:`GROWTH_BEFORE_RELEASE` above its lowest check: activations
    kept as free heap between batches would otherwise be faulted in again every batch."""

    def __init__(self, growth: int = GROWTH_BEFORE_RELEASE) -> None:
        self.growth = growth
        self.lowest: int | None = None
        self.released = 0

    def check(self, resident: int | None = None) -> bool:
        """Whether freed pages were handed back at this check (``resident``: read if None)."""
        resident = resident if resident is not None else resident_bytes()
        if resident is not None:
            self.lowest = resident if self.lowest is None else min(self.lowest, resident)
            if resident - self.lowest <= self.growth:
                return False
        release_freed()
        self.released += 1
        return True


@functools.cache
def steady_allocator() -> bool:
    """Fix glibc's mmap threshold at 4 MiB (trim at 1 GiB) once per process, True when set: the
    dynamic threshold fragments the heap; a user's ``MALLOC_MMAP_THRESHOLD_`` is left alone."""
    libc = _glibc()
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or libc is None:
        return False
    mallopt = libc.mallopt
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    if "MALLOC_TRIM_THRESHOLD_" not in os.environ:
        mallopt(_M_TRIM_THRESHOLD, _TRIM_THRESHOLD)
    return bool(mallopt(_M_MMAP_THRESHOLD, _THRESHOLD))


@contextlib.contextmanager
def model_allocation() -> Iterator[None]:
    """CPU model runs: blocks up to 512 MiB from the heap (torch/TF malloc activations the 4 MiB
    threshold would fault in every batch); a no-op where :func:`steady_allocator` set nothing."""
    libc = _glibc()
    if libc is None or not steady_allocator():
        yield
        return
    for threshold in _MODEL_THRESHOLDS:
        if libc.mallopt(_M_MMAP_THRESHOLD, threshold):
            break
    try:
        yield
    finally:
        libc.mallopt(_M_MMAP_THRESHOLD, _THRESHOLD)
