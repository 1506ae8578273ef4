"""One bounded reader for every file other people or jobs hand to the tool: goldens, results
files, manifests, labels and checksum lists. Regular files only (a FIFO never blocks, a link to
``/dev/zero`` is a device), a size limit checked before reading, and JSON nesting bounded, so
that each hostile file is its reader's documented error instead of a hang, an out-of-memory or
a ``RecursionError``.

Each hostile case runs in a child process under an address-space limit and a time limit: a
reader that blocked or read without bound fails the test instead of taking the machine down.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import CHILD_TIMEOUT_S

MEMORY_LIMIT = 2 << 30  # bytes of address space for the child: 2 GiB
TIME_LIMIT_S = CHILD_TIMEOUT_S  # a hang detector (helpers.py)
REPO = Path(__file__).resolve().parents[2]


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def in_child(code: str, *args: Path) -> str:
    """Run ``code`` (with ``sys.argv[1:]`` = ``args``) in a fresh interpreter under the memory
    and time limits; its stdout, or a description of how it ended otherwise."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
            capture_output=True,
            text=True,
            timeout=TIME_LIMIT_S,
            preexec_fn=_limit_memory,
            cwd=REPO,  # the worktree's package first on sys.path
        )
    except subprocess.TimeoutExpired:
        return f"hung for {TIME_LIMIT_S} s"
    if done.returncode != 0:
        return f"exit {done.returncode}: {done.stderr[-2000:]}"
    return done.stdout


# Each snippet reads sys.argv[1] with one of the readers and prints the error it raised.
READERS = {
    "results file": """
        import sys
        from pytest_mlrepro.results import ResultsFileError, load_results
        try:
            load_results(sys.argv[1])
            print("read")
        except ResultsFileError as exc:
            print("refused:", exc)
    """,
    "golden": """
        import sys
        from pathlib import Path
        from pytest_mlrepro.errors import GoldenError
        from pytest_mlrepro.goldens import read
        try:
            read(Path(sys.argv[1]))
            print("read")
        except GoldenError as exc:
            print("refused:", exc)
    """,
    "checksum list": """
        import sys
        from pathlib import Path
        from pytest_mlrepro.data._datasets import read_checksum_lines
        try:
            read_checksum_lines(Path(sys.argv[1]))
            print("read")
        except (OSError, ValueError) as exc:
            print("refused:", exc)
    """,
}


# Goldens and manifests refused FIFOs and devices before this reader; they share it now.
@pytest.mark.parametrize("reader", ["checksum list", "results file"])
def test_a_fifo_is_refused_without_blocking(tmp_path: Path, reader: str) -> None:
    fifo = tmp_path / "input"
    os.mkfifo(fifo)
    out = in_child(READERS[reader], fifo)
    assert out.startswith("refused:"), out
    assert "is a FIFO" in out, out


@pytest.mark.parametrize("reader", ["checksum list", "results file"])
def test_a_link_to_dev_zero_is_refused_without_reading_it(tmp_path: Path, reader: str) -> None:
    link = tmp_path / "input"
    link.symlink_to("/dev/zero")
    out = in_child(READERS[reader], link)
    assert out.startswith("refused:"), out
    assert "is a device" in out, out


@pytest.mark.parametrize(
    ("reader", "size"),
    [("results file", 2 << 30), ("golden", 1 << 30), ("checksum list", 1 << 30)],
)
def test_a_huge_file_is_refused_before_it_is_read(tmp_path: Path, reader: str, size: int) -> None:
    huge = tmp_path / "input"
    with huge.open("wb") as fh:
        fh.truncate(size)  # sparse: no disk space, but every byte reads as NUL
    out = in_child(READERS[reader], huge)
    assert out.startswith("refused:"), out
    assert f"{size} bytes, larger than the limit of" in out, out


@pytest.mark.parametrize("reader", ["results file", "golden"])
def test_json_nested_100000_deep_is_refused_naming_the_depth(tmp_path: Path, reader: str) -> None:
    deep = tmp_path / "input"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    out = in_child(READERS[reader], deep)
    assert out.startswith("refused:"), out
    assert "nested deeper than 64 levels" in out, out


def test_nesting_just_past_the_limit_is_refused_and_at_it_is_parsed() -> None:
    from pytest_mlrepro._files import TooDeep, parse_json

    assert parse_json(b"[" * 64 + b"]" * 64, 64) == _nested(64)
    with pytest.raises(TooDeep, match="nested deeper than 64 levels"):
        parse_json(b"[" * 65 + b"]" * 65, 64)
    with pytest.raises(TooDeep):  # objects count as lists do
        parse_json(b'{"a":' * 65 + b"1" + b"}" * 65, 64)


def _nested(depth: int) -> list[object]:
    value: list[object] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_a_file_one_byte_over_the_limit_is_refused_and_one_at_it_is_read(tmp_path: Path) -> None:
    from pytest_mlrepro._files import FileTooLarge, read_bounded

    path = tmp_path / "growing"
    path.write_bytes(b"x" * 10)
    assert read_bounded(path, 10) == b"x" * 10
    path.write_bytes(b"x" * 11)
    with pytest.raises(FileTooLarge, match="11 bytes, larger than the limit of 10 bytes"):
        read_bounded(path, 10)
