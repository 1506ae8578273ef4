"""The C allocator's setting for an evaluation whose memory must stay flat in the samples."""

from __future__ import annotations

import ctypes
import functools
import os

# glibc's mallopt parameter (malloc.h): allocations of at least this many bytes are mmap'ed.
_M_MMAP_THRESHOLD = -3
# Above every per-image buffer (a decoded photo, a 224×224×3 float32 tensor: under 1 MiB at
# ImageNet sizes) and below a batch (32 such tensors, 19 MiB).
_THRESHOLD = 4 * 1024 * 1024


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
    """Hand the pages of freed heap memory back to the system (glibc's ``malloc_trim``): what
    fragmentation keeps resident between the images of many sizes stops adding up over a long
    run. Called every few batches (a few milliseconds each; measured on 3,000 samples of the
    example: peak 591 → 562 MB, CPU time 68.8 → 66.0 s, docs/measurements.md "Scale")."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


@functools.cache
def steady_allocator() -> bool:
    """Fix glibc's mmap threshold at 4 MiB, once per process; True when it was set.

    Why: glibc raises its threshold to the size of each mmap'ed block freed (up to 32 MiB), after
    which the batches go to the heap among the decoded images of every size; the heap then
    fragments and the resident set grows with the samples seen (measured: 433 → 597 MB over 4,000
    samples of the example's ONNX manifest, flat at 520 MB with the threshold fixed; the figures
    and the command are in docs/measurements.md, "Scale"). A fixed threshold turns the dynamic
    one off: images stay on the heap (their sizes repeat, their freed chunks are reused), batches
    are mapped and unmapped whole. Setting the environment variable ``MALLOC_MMAP_THRESHOLD_``
    (glibc's own) leaves the process as that says; other C libraries are left alone."""
    libc = _glibc()
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or libc is None:
        return False
    mallopt = libc.mallopt
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(_M_MMAP_THRESHOLD, _THRESHOLD))
