"""Latency results in pytest-benchmark 5.x's JSON format, so that its ``compare`` and CI
dashboards read ours."""

from __future__ import annotations

import dataclasses
import datetime
import os
import platform
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..fingerprint import cpu_model, usable_cpu_count
from ._timing import Stats

FORMAT_VERSION = "5.3.1"
"""The pytest-benchmark version whose layout this mirrors (its readers check nothing else)."""

MAX_DATA = 100_000


def stats_entry(stats: Stats, data: Sequence[float]) -> dict[str, Any]:
    """pytest-benchmark's ``stats`` mapping (seconds) from ours, with up to :data:`MAX_DATA`
    rounds as ``data``."""
    entry = {k: v for k, v in dataclasses.asdict(stats).items() if k not in ("p50", "p90", "p99")}
    entry.update(
        median=stats.p50,
        outliers=f"{stats.stddev_outliers};{stats.iqr_outliers}",
        ops=stats.rounds / stats.total if stats.total else 0.0,
        iterations=1,
    )
    if len(data) <= MAX_DATA:
        entry["data"] = [float(v) for v in data]
    return entry


def machine_info(hardware_keys: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """pytest-benchmark's ``machine_info`` (without py-cpuinfo: the CPU comes from
    ``/proc/cpuinfo``), plus ``mlrepro_hardware_keys``: the keys latency goldens are kept by."""
    uname = platform.uname()
    return {
        "node": uname.node,
        "processor": uname.processor,
        "machine": uname.machine,
        "python_compiler": platform.python_compiler(),
        "python_implementation": platform.python_implementation(),
        "python_implementation_version": platform.python_version(),
        "python_version": platform.python_version(),
        "python_build": list(platform.python_build()),
        "release": uname.release,
        "system": uname.system,
        "cpu": {
            "brand_raw": cpu_model(),
            "arch_string_raw": uname.machine,
            "count": os.cpu_count(),
            "usable": usable_cpu_count(),
        },
        "mlrepro_hardware_keys": [dict(k) for k in hardware_keys],
    }


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
            # Read-only: never take the index lock (a concurrent git command must not fail).
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def head_commit(root: Path) -> str | None:
    """The commit checked out in ``root`` (``git rev-parse HEAD``), None outside git."""
    commit = _git(root, "rev-parse", "HEAD")
    return commit if commit and re.fullmatch(r"[0-9a-f]{40,64}", commit) else None


def commit_info(root: Path) -> dict[str, Any]:
    """pytest-benchmark's ``commit_info`` from git (read-only commands), or ``unversioned``."""
    commit = _git(root, "rev-parse", "HEAD")
    info: dict[str, Any] = {"id": commit or "unversioned", "time": None, "author_time": None}
    info.update(dirty=False, project=root.name, branch="(unknown)")
    if not commit:
        return info
    times = [*(_git(root, "log", "-1", "--format=%cI%n%aI") or "").splitlines(), "", ""]
    branch = _git(root, "rev-parse", "--abbrev-ref", "HEAD") or "(unknown)"
    info.update(time=times[0] or None, author_time=times[1] or None)
    info["dirty"] = bool(_git(root, "status", "--porcelain", "--untracked-files=no"))
    info["branch"] = "(detached head)" if branch == "HEAD" else branch
    return info


def document(
    benchmarks: Sequence[Mapping[str, Any]],
    *,
    root: Path,
    hardware_keys: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    return {
        "machine_info": machine_info(hardware_keys),
        "commit_info": commit_info(root),
        "benchmarks": [dict(b) for b in benchmarks],
        "datetime": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "version": FORMAT_VERSION,
    }
