"""The environment a result was produced in: what can change outputs, recorded with every golden."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
from dataclasses import dataclass
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


# --- hardware key: what latency goldens are kept per ------------------------------------------

# Fields of the key that name the machine; the others name the software on it. A golden recorded
# on the same machine with other software settings is still the right baseline to compare with.
HARDWARE_FIELDS = ("device", "machine", "cpu", "cpu_count", "usable_cpus", "cpu_quota", "gpu")


def usable_cpu_count() -> int:
    """CPUs this process may run on (its affinity: ``taskset``, container cpusets)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def cpu_quota() -> float | None:
    """The cgroup v2 CPU quota in cores (a container limited to 2 CPUs of a 64-core host), or
    None when there is none."""
    try:
        with open("/sys/fs/cgroup/cpu.max", encoding="ascii") as fh:
            quota, period = fh.read().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return round(int(quota) / int(period), 2)
    except (ValueError, ZeroDivisionError):
        return None


@cache
def gpu_info() -> dict[str, str] | None:
    """Name and driver of GPU 0 from ``nvidia-smi`` (no framework imported), or None."""
    import shutil
    import subprocess

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    first = out.strip().splitlines()[0] if out.strip() else ""
    name, _, driver = first.partition(",")
    if not name.strip():
        return None
    return {"gpu": name.strip(), "gpu_driver": driver.strip()}


def _slug_part(text: str, limit: int = 32) -> str:
    import re

    text = re.sub(r"\((r|tm)\)|\bcpu\b|\bprocessor\b|@.*$|\d+-core", " ", text.lower())
    return re.sub(r"[^a-z0-9.]+", "-", text).strip("-.")[:limit].rstrip("-.") or "unknown"


@dataclass(frozen=True)
class HardwareKey:
    """Where and how a latency was measured: machine, device, framework and thread settings.

    ``slug`` names the golden file: readable parts plus a hash of every field, so two keys that
    differ in anything get different files."""

    fields: dict[str, Any]

    @property
    def slug(self) -> str:
        f = self.fields
        digest = hashlib.sha256(
            json.dumps(f, sort_keys=True, separators=(",", ":")).encode()
        ).hexdigest()[:8]
        intra, inter = f.get("intra_op_threads"), f.get("inter_op_threads")
        threads = (
            "threads-default"
            if intra == inter == "default"
            else f"intra{_slug_part(str(intra))}-inter{_slug_part(str(inter))}"
        )
        parts = [str(f["device"]), _slug_part(str(f["cpu"])), f"{f['usable_cpus']}cpu"]
        if f.get("gpu"):
            parts.append(_slug_part(str(f["gpu"]), 24))
        parts += [str(f["framework"]), _slug_part(str(f["framework_version"]), 20), threads, digest]
        return "-".join(parts)

    @property
    def hardware(self) -> dict[str, Any]:
        return {k: self.fields.get(k) for k in HARDWARE_FIELDS}

    def same_hardware(self, other: dict[str, Any]) -> bool:
        """Whether ``other`` (a key's fields) names the same machine and device."""
        return all(other.get(k) == v for k, v in self.hardware.items())

    def differences(self, other: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
        """Fields that differ: ``{name: (other's value, this key's value)}``."""
        names = sorted(set(self.fields) | set(other))
        return {
            n: (other.get(n), self.fields.get(n))
            for n in names
            if other.get(n) != self.fields.get(n)
        }


def hardware_key(
    device: str,
    framework: str,
    framework_version: str,
    intra_op_threads: int | None,
    inter_op_threads: int | None,
) -> HardwareKey:
    """The key of this machine for ``device`` and the given framework and thread settings (None:
    the framework's default). The GPU model and driver are part of the key of ``cuda`` items only:
    a CPU latency does not depend on the GPU next to it."""
    fields: dict[str, Any] = {
        "device": device,
        "machine": platform.machine(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "usable_cpus": usable_cpu_count(),
        "cpu_quota": cpu_quota(),
        "gpu": None,
        "framework": framework,
        "framework_version": framework_version,
        "intra_op_threads": intra_op_threads or "default",
        "inter_op_threads": inter_op_threads or "default",
    }
    if device == "cuda":
        gpu = gpu_info() or {"gpu": "unknown", "gpu_driver": "unknown"}
        fields["gpu"] = gpu["gpu"]
        fields["gpu_driver"] = gpu["gpu_driver"]
    return HardwareKey(fields)
