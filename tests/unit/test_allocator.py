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


def test_freed_pages_are_handed_back_only_when_the_resident_set_has_grown(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_mlrepro.evaluation import _memory

    handed_back: list[int] = []
    monkeypatch.setattr(_memory, "release_freed", lambda: handed_back.append(1))
    mib = 1 << 20
    freed = _memory.FreedPages(growth=32 * mib)
    # A steady evaluation: its resident set at each check stays within the growth allowed.
    for resident in (900, 910, 905, 931):
        assert freed.check(resident * mib) is False
    assert handed_back == []
    # Fragmentation adding up: more than 32 MiB above the lowest check (900) hands back...
    assert freed.check(933 * mib) is True
    # ...and a lower check becomes the new lowest.
    assert freed.check(880 * mib) is False
    assert freed.check(913 * mib) is True
    assert handed_back == [1, 1] and freed.released == 2


def test_without_a_readable_resident_set_every_check_hands_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_mlrepro.evaluation import _memory

    handed_back: list[int] = []
    monkeypatch.setattr(_memory, "release_freed", lambda: handed_back.append(1))
    monkeypatch.setattr(_memory, "resident_bytes", lambda: None)
    freed = _memory.FreedPages()
    assert freed.check() and freed.check()
    assert handed_back == [1, 1]


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="Linux's /proc")
def test_the_resident_set_is_read_and_grows_with_touched_memory() -> None:
    from pytest_mlrepro.evaluation._memory import resident_bytes

    before = resident_bytes()
    block = bytearray(64 << 20)  # zero-filled: every page touched
    after = resident_bytes()
    assert before is not None and after is not None
    assert after - before >= 48 << 20, (before, after)
    del block
