"""The C allocator's settings for flat memory: glibc's mmap threshold fixed once per process,
unless the user's own ``MALLOC_MMAP_THRESHOLD_`` says otherwise; freed pages handed back."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

GLIBC = bool(getattr(os, "confstr_names", {}).get("CS_GNU_LIBC_VERSION")) and bool(
    os.confstr("CS_GNU_LIBC_VERSION")
)
PROBE = (
    "from pytest_mlrepro.evaluation._memory import release_freed, steady_allocator\n"
    "release_freed()\n"
    "print(steady_allocator(), steady_allocator())\n"
)


def probe(**env: str) -> str:
    environment = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env={**environment, **env}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.skipif(not GLIBC, reason="glibc's own tunables")
def test_the_threshold_is_fixed_once_on_glibc() -> None:
    assert probe() == "True True"  # set, and the second call is the first one's answer


@pytest.mark.skipif(not GLIBC, reason="glibc's own tunables")
def test_the_users_own_threshold_is_left_as_it_is() -> None:
    assert probe(MALLOC_MMAP_THRESHOLD_="131072") == "False False"


BLOCKS = (
    "import ctypes\n"
    "from pytest_mlrepro.evaluation._memory import model_allocation, steady_allocator\n"
    "class Info(ctypes.Structure):\n"
    "    _fields_ = [(n, ctypes.c_size_t) for n in ('arena', 'ordblks', 'smblks', 'hblks',\n"
    "        'hblkhd', 'usmblks', 'fsmblks', 'uordblks', 'fordblks', 'keepcost')]\n"
    "libc = ctypes.CDLL(None)\n"
    "libc.mallinfo2.restype = Info\n"
    "def mapped():\n"
    "    before = libc.mallinfo2().hblks\n"
    "    block = bytearray(16 << 20)\n"
    "    return libc.mallinfo2().hblks - before\n"
    "steady_allocator()\n"
    "first = mapped()\n"
    "with model_allocation():\n"
    "    during = mapped()\n"
    "libc.malloc_trim(0)  # the freed block no longer on the heap to be reused\n"
    "print(first, during, mapped())\n"
)


@pytest.mark.skipif(not GLIBC, reason="glibc's own tunables")
def test_a_models_blocks_come_from_the_heap_only_while_it_runs() -> None:
    """A 16 MiB block (a layer's activations) is mapped under the 4 MiB threshold, taken from the
    heap while the model runs (``model_allocation``), and mapped again after it (once the heap
    has handed its free memory back: until then glibc reuses the freed block)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    done = subprocess.run(
        [sys.executable, "-c", BLOCKS], env=environment, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "0", "1"]
