"""Where coverage's tracer costs an item: the Python line events of each item's call, by module.

coverage.py (pytest-cov's ``--cov``) traces every line executed in a file it measures; its cost on
an item is about proportional to those line events (a C function call each, plus the arc or line
recorded), not to the item's wall time, which is mostly native code (decoding, the model) that the
tracer never sees. This counts them, with the same kind of hook (``sys.settrace``, set for the
item's call only, in every thread the evaluation starts), so the figure is the same on any machine
and under any load: no clock is read.

    python benchmarks/coverage_events.py [MANIFEST ...]   # default: the digits example

prints, per item, the line events and the modules that take the most of them, then what
``--cov=<your package>`` would leave of them (coverage measures only the ``source`` it is given:
the plugin's lines, and numpy's or Pillow's Python, are then not traced). Needs the example's data
(MLREPRO_DATA).
"""

from __future__ import annotations

import collections
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[1]


class LineCounter:
    """Line events by file, while switched on."""

    def __init__(self) -> None:
        self.by_file: collections.Counter[str] = collections.Counter()

    def tracer(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            self.by_file[frame.f_code.co_filename] += 1
        return self.tracer

    @contextmanager
    def on(self) -> Iterator[None]:
        threading.settrace(self.tracer)
        sys.settrace(self.tracer)
        try:
            yield
        finally:
            sys.settrace(None)
            threading.settrace(None)  # type: ignore[arg-type]


def area(file: str) -> str:
    """A file's module area: ``pytest_mlrepro/<package>``, a third-party package, the stdlib."""
    path = Path(file)
    parts = path.parts
    if "pytest_mlrepro" in parts:
        i = parts.index("pytest_mlrepro")
        return "/".join(parts[i : i + 2]).removesuffix(".py")
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1]
    return "python stdlib" if "lib" in parts else str(path)


class CountPerItem:
    """A pytest plugin: each item's call, counted."""

    def __init__(self) -> None:
        self.items: dict[str, collections.Counter[str]] = {}

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        counter = LineCounter()
        with counter.on():
            try:
                return (yield)
            finally:
                self.items[item.nodeid] = counter.by_file


def main(argv: list[str]) -> int:
    manifests = argv or [str(REPO / "manifests" / "digits_onnx.yaml")]
    counting = CountPerItem()
    pytest.main([*manifests, "-q", "-p", "no:randomly", "-p", "no:cacheprovider"], [counting])
    for nodeid, by_file in counting.items.items():
        total = sum(by_file.values())
        by_area: collections.Counter[str] = collections.Counter()
        for file, count in by_file.items():
            by_area[area(file)] += count
        ours = sum(c for a, c in by_area.items() if a.startswith("pytest_mlrepro"))
        print(f"\n{nodeid}: {total:,} Python line events in its call")
        for name, count in by_area.most_common(8):
            print(f"  {count:>12,}  {100 * count / total:5.1f}%  {name}")
        print(f"  of which pytest-mlrepro's own: {ours:,} ({100 * ours / max(total, 1):.1f}%)")
        hot = collections.Counter(
            {f: c for f, c in by_file.items() if "pytest_mlrepro" in Path(f).parts}
        )
        for file, count in hot.most_common(3):
            shown = Path(file).relative_to(REPO) if REPO in Path(file).parents else file
            print(f"    {count:>10,}  {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
