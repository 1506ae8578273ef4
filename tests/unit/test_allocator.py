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
