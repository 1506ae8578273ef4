"""The C allocator's settings for an evaluation whose memory must stay flat in the samples, and
whose model runs as fast as it does alone."""

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
# Above every per-image buffer (a decoded photo, a 224×224×3 float32 tensor: under 1 MiB at
# ImageNet sizes) and below a batch (32 such tensors, 19 MiB).
_THRESHOLD = 4 * 1024 * 1024
# While the model runs: above the activations of a batch of the models measured (EfficientNet-
# Lite0 at batch 32 in torch and Keras: blocks of 4-154 MiB, allocated and freed in the same
# sizes every batch). A glibc that refuses a threshold this high (some cap it at 32 MiB) gets
# the highest it takes.
_MODEL_THRESHOLDS = (512 * 1024 * 1024, 32 * 1024 * 1024)
# The heap's free top kept between batches instead of handed back at every free(): the next
# batch reuses it. ``FreedPages`` hands it back when fragmentation adds up.
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
    """Hand the pages of freed heap memory back to the system (glibc's ``malloc_trim``): what
    fragmentation keeps resident between the images of many sizes stops adding up over a long
    run. Called by :class:`FreedPages` when the resident set has grown (measured on 3,000
    samples of the example, at every check: peak 591 → 562 MB, CPU time 68.8 → 66.0 s,
    docs/measurements.md "Scale")."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


def resident_bytes() -> int | None:
    """The process's resident set in bytes (Linux's ``/proc/self/statm``); None where there is
    no such file."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


GROWTH_BEFORE_RELEASE = 32 * 1024 * 1024
"""How far above its lowest the resident set may be, at a check, before freed pages are handed
back (:class:`FreedPages`)."""


class FreedPages:
    """Hands freed heap pages back (:func:`release_freed`) at a check where the resident set has
    grown :data:`GROWTH_BEFORE_RELEASE` above the lowest it was at an earlier check of the same
    evaluation: only when fragmentation is adding up.

    Why not at every check: a model that allocates its activations with malloc (torch, Keras,
    SavedModels, :func:`model_allocation`) keeps them as free heap between batches, and handing
    them back makes the next batch fault every page in again: measured on the example's
    EfficientNet-Lite0 at batch 32, 0.65 s of CPU per hand-back for torch, 0.13 s for Keras
    (docs/measurements.md, "The main job at its bound"). Checked at the same point of every
    cycle (after a batch's outputs are kept), the resident set of a steady evaluation stays
    where it was; one whose heap fragments grows, and gets its pages handed back. Where the
    resident set cannot be read, every check hands them back."""

    def __init__(self, growth: int = GROWTH_BEFORE_RELEASE) -> None:
        self.growth = growth
        self.lowest: int | None = None
        self.released = 0

    def check(self, resident: int | None = None) -> bool:
        """At a check (``resident``: the resident set now, read when not given): whether freed
        pages were handed back."""
        resident = resident if resident is not None else resident_bytes()
        if resident is not None:
            if self.lowest is None or resident < self.lowest:
                self.lowest = resident
            if resident - self.lowest <= self.growth:
                return False
        release_freed()
        self.released += 1
        return True


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
    (glibc's own) leaves the process as that says; other C libraries are left alone.

    The trim threshold is raised to 1 GiB with it (unless ``MALLOC_TRIM_THRESHOLD_`` is set):
    the heap's free top stays for the next batch's model (:func:`model_allocation`) instead of
    being handed back and faulted in again at every batch; :class:`FreedPages` hands it back
    when fragmentation adds up."""
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
    """While a model runs on the CPU (the preprocessing threads idle, see
    ``evaluate.preprocessed``): blocks up to 512 MiB come from the heap, then the 4 MiB threshold
    of :func:`steady_allocator` again for the preprocessing.

    Why: torch and TensorFlow allocate each layer's activations with malloc; at the 4 MiB
    threshold every one of them (4-51 MiB at batch 32) was mapped and unmapped per batch, and
    every page of it faulted in again: measured on the example (docs/measurements.md, "The main
    job at its bound"), the Keras model used 0.8 M page faults and 4.9 s of CPU per 4 batches,
    against 0.3 M and 3.7 s with blocks up to 64 MiB on the heap; torch 2.6 M faults and
    17.5 s of CPU per 4 batches, 0.6 M and 12.1 s up to 64 MiB, and per 3 batches 0.5 M and
    9.4 s up to 64 MiB, 0.09 M and 8.2 s up to 512 MiB (its largest activations are 154 MiB).
    ONNX Runtime and TFLite allocate from their own arenas and see no difference. The batches
    themselves are made during the preprocessing, under the 4 MiB threshold: mapped, as the flat
    memory needs. Nothing changes where :func:`steady_allocator` did not set the threshold (a
    user's ``MALLOC_MMAP_THRESHOLD_``, another C library)."""
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
