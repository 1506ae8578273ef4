"""Headless Chromium for the report tests: a page opened as the browser builds it (the DOM after
the load event, the page's own ``data-`` checks, the console), and a screenshot checked not to be
blank. Debian's ``chromium`` (``.ci/run`` installs it); a test that needs it skips without it."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import CHILD_TIMEOUT_S
from PIL import Image

# One import style: ``from browser_helpers import ...`` (see helpers.py).
if __name__.startswith("tests."):
    raise ImportError(
        f"import the test helpers as 'browser_helpers' (from browser_helpers import ...), not "
        f"as {__name__!r}"
    )

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on this machine (.ci/run installs it)"
)
BROWSER = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--disable-extensions",
]


def chromium(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CHROMIUM), *BROWSER, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        env={**os.environ, "HOME": str(cwd)},  # its profile and crash files stay in cwd
    )


@dataclass(frozen=True)
class Opened:
    dom: str  # after the load event
    attributes: dict[str, str]  # the data- attributes of <html>: the page's own checks
    console: list[str]  # the console's lines (chromium logs each message to stderr)

    def assert_healthy(self) -> None:
        """The page's script ran to its end and recorded no error, no broken image."""
        assert self.attributes.get("data-ready") == "yes", self.attributes
        assert self.attributes.get("data-errors") == "0", re.search(
            r'id="mlrepro-errors".*?</pre>', self.dom, re.S
        )
        assert self.attributes.get("data-broken-images") == "0", self.attributes


def open_page(url: str, cwd: Path) -> Opened:
    dumped = chromium(
        "--dump-dom", "--virtual-time-budget=5000", "--enable-logging=stderr", "--v=0", url,
        cwd=cwd,
    )  # fmt: skip
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    head = re.search(r"<html[^>]*>", dumped.stdout)
    assert head is not None, dumped.stdout[:500]
    attributes = dict(re.findall(r'(data-[\w-]+)="([^"]*)"', head.group(0)))
    console = [line for line in dumped.stderr.splitlines() if ":CONSOLE" in line]
    return Opened(dumped.stdout, attributes, console)


def screenshot(url: str, cwd: Path, shot: Path, width: int, height: int) -> Image.Image:
    """The page's top as the browser draws it (loaded), checked to be that size and not blank."""
    taken = chromium(
        f"--screenshot={shot}", f"--window-size={width},{height}", "--hide-scrollbars", url,
        cwd=cwd,
    )  # fmt: skip
    assert taken.returncode == 0 and shot.is_file(), taken.stderr[-2000:]
    with Image.open(shot) as picture:
        picture.load()
    assert picture.size == (width, height)
    # Not a blank page: the header band, the coloured marks and the charts are there.
    assert len(picture.convert("RGB").getcolors(1 << 20) or []) > 50
    return picture
