"""The environment a result was produced in: what can change outputs, recorded with every golden."""

from __future__ import annotations

import importlib.metadata
import os
import platform
from functools import cache
from typing import Any


@cache
def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _version(*dists: str) -> str | None:
    for dist in dists:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


@cache
def libraries() -> dict[str, Any]:
    """Versions of the image libraries, read without importing OpenCV."""
    from PIL import features

    return {
        "numpy": _version("numpy"),
        "pillow": _version("pillow", "Pillow"),
        "libjpeg": features.version("jpg"),
        "libjpeg_turbo": features.check_feature("libjpeg_turbo"),
        "opencv": _version("opencv-python", "opencv-python-headless", "opencv-contrib-python"),
    }


def environment(runner_info: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything that may change a result, as plain JSON data."""
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        **libraries(),
    }
    if runner_info:
        env["runtime"] = dict(runner_info)
    return env
