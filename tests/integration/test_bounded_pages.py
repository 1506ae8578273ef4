"""Bounded pages (issue 31, point 5): a name longer than a page can sanely show (a 200 kB machine
or manifest name in a results file) is cut where it is shown, with a digest of the whole so that
two such names stay two, and ``mlrepro merge --html`` and ``mlrepro history --html`` stay within
twice a normal page's size and memory. (Memory is the child's own peak resident set, from
``wait4``; no time is measured.)"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_history_command import night
from test_merge_hostile_inputs import document, write

from pytest_mlrepro._visible import DISPLAY_LIMIT, shortened

REPO = Path(__file__).resolve().parents[2]
HUGE = "m" * 200_000


_LAUNCHER = """\
import os, subprocess, sys
child = subprocess.Popen(sys.argv[1:])
_, status, usage = os.wait4(child.pid, 0)
print(f"\\n@maxrss {usage.ru_maxrss}", flush=True)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run(*args: str | Path) -> tuple[int, str, int]:
    """``mlrepro ARGS`` in a child process: its exit status, its output and its peak resident
    set in KiB (``ru_maxrss`` of that child alone). Started by a small launcher: a child forked
    straight from this process (an xdist worker holding a framework: a gigabyte) would count the
    pages it shares with it until its exec."""
    done = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, sys.executable, "-m", "pytest_mlrepro.cli",
         *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=REPO,
        check=False,
    )  # fmt: skip
    out, _, peak = done.stdout.decode().rpartition("\n@maxrss ")
    return done.returncode, out, int(peak)


def merged(tmp_path: Path, machine: str, manifest: str) -> dict[str, Any]:
    doc = document(machine=machine)
    doc["results"][0]["manifest"] = manifest
    return doc


@pytest.mark.parametrize("command", ["merge", "history"])
def test_a_200_kb_name_costs_a_page_at_most_twice_a_normal_one(
    tmp_path: Path, command: str
) -> None:
    def files(folder: Path, machine: str, manifest: str) -> list[Path]:
        folder.mkdir()
        if command == "merge":
            return [
                write(folder / "a.json", merged(tmp_path, machine, manifest)),
                write(folder / "b.json", merged(tmp_path, "plain", manifest)),
            ]
        nights = []
        for day in (1, 2):
            doc = copy.deepcopy(night(day, drifted=day == 2))
            doc["machine"]["name"] = machine
            doc["results"][0]["manifest"] = manifest
            nights.append(write(folder / f"n{day}.json", doc))
        return nights

    normal = files(tmp_path / "normal", "ci-1", "tiny")
    huge = files(tmp_path / "huge", HUGE, "t" + HUGE)
    status, out, normal_rss = run(command, *normal, "--html", tmp_path / "normal.html")
    assert status in (0, 1), out
    status, out, huge_rss = run(command, *huge, "--html", tmp_path / "huge.html")
    assert status in (0, 1), out
    normal_page = (tmp_path / "normal.html").stat().st_size
    huge_page = (tmp_path / "huge.html").stat().st_size
    assert huge_page <= 2 * normal_page, (huge_page, normal_page)
    assert huge_rss <= 2 * normal_rss, (huge_rss, normal_rss)
    assert len(out) <= 4 * DISPLAY_LIMIT + 10_000, "the terminal text is bounded too"
    page = (tmp_path / "huge.html").read_text()
    assert shortened(HUGE) in page, "the name is shown, cut, with the digest of the whole"
    assert HUGE[: DISPLAY_LIMIT + 1] not in page


def test_two_long_names_that_share_their_start_stay_two() -> None:
    a, b = "x" * 500 + "a", "x" * 500 + "b"
    assert shortened(a) != shortened(b)
    assert len(shortened(a)) == DISPLAY_LIMIT and shortened("short") == "short"


@pytest.mark.parametrize("where", ["latency reason", "environment"])
def test_any_200_kb_text_of_a_results_file_costs_a_page_at_most_twice_a_normal_one(
    tmp_path: Path, where: str
) -> None:
    from test_merge_hostile_inputs import accuracy_row, latency_row

    def doc(machine: str, huge: bool) -> dict[str, Any]:
        d = document(machine=machine, rows=[accuracy_row(), latency_row()])
        if huge and where == "latency reason":
            d["results"][1]["decided_by"] = HUGE
        elif huge:
            d["machine"]["environment"] = {"cpu": HUGE, "numeric_packages": {"numpy": HUGE}}
        return d

    pages = {}
    for name, huge in (("normal", False), ("huge", True)):
        folder = tmp_path / name
        folder.mkdir()
        files = [
            write(folder / "a.json", doc("a", huge)),
            write(folder / "b.json", doc("b", False)),
        ]
        status, out, rss = run("merge", *files, "--html", folder / "m.html")
        assert status in (0, 1), out
        pages[name] = ((folder / "m.html").stat().st_size, rss, len(out))
    assert pages["huge"][0] <= 2 * pages["normal"][0], pages
    assert pages["huge"][1] <= 2 * pages["normal"][1], pages
    assert pages["huge"][2] <= 2 * pages["normal"][2] + 10_000, pages
