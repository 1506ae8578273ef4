"""The environment a result was produced in: what can change outputs, recorded with every golden."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any


def cpu_model() -> str:
    """This machine's CPU model name (:func:`cpu_identity`'s ``cpu``)."""
    return str(cpu_identity()["cpu"])


# --- what explains a cross-machine difference: ISA, numeric packages, numeric settings ---------

# x86 flags (``/proc/cpuinfo`` "flags") that choose the kernels a framework or BLAS runs: FMA and
# the vector width change the order and rounding of sums, F16C/BF16/VNNI/AMX the precision of
# reduced-precision paths. Any flag of the AVX-512 and AMX families counts too.
_X86_FLAGS = frozenset({"sse4_1", "sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni"})
_X86_FAMILIES = ("avx512", "amx_")
# Arm "Features": NEON (asimd on 64-bit, neon on 32-bit), its half-precision, dot-product and
# int8/bf16 matrix extensions, and the SVE and SME families. (Families are matched within their
# own architecture: "smep" is an x86 flag, not SME.)
_ARM_FLAGS = frozenset(
    {"neon", "vfpv4", "asimd", "asimdhp", "asimddp", "asimdfhm", "fphp", "bf16", "i8mm"}
)
_ARM_FAMILIES = ("sve", "sme")

# "CPU implementer" of Arm /proc/cpuinfo, which has no vendor_id line.
_ARM_IMPLEMENTERS = {
    "0x41": "ARM",
    "0x42": "Broadcom",
    "0x43": "Cavium",
    "0x48": "HiSilicon",
    "0x4e": "NVIDIA",
    "0x51": "Qualcomm",
    "0x61": "Apple",
    "0xc0": "Ampere",
}


def parse_cpuinfo(text: str) -> dict[str, Any]:
    """The first processor's vendor, model and flags (every core reports the same ISA); None
    where a line lacks."""
    vendor: str | None = None
    model: str | None = None
    flags: list[str] | None = None
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "vendor_id" and vendor is None:
            vendor = value
        elif key == "CPU implementer" and vendor is None:
            vendor = _ARM_IMPLEMENTERS.get(value.lower(), f"implementer {value}")
        elif key == "model name" and model is None:
            model = value
        elif key in ("flags", "Features") and flags is None:
            exact, families = (
                (_X86_FLAGS, _X86_FAMILIES) if key == "flags" else (_ARM_FLAGS, _ARM_FAMILIES)
            )
            flags = sorted({f for f in value.split() if f in exact or f.startswith(families)})
    return {"cpu_vendor": vendor, "cpu": model, "cpu_flags": flags or []}


# Where this machine's CPU is described: Linux's /proc/cpuinfo, or the file that MLREPRO_CPUINFO
# names (a machine whose /proc/cpuinfo is hidden or not Linux's: a container, a sandbox; and the
# test suite, which runs as fixed machines of each vendor so that no test depends on its host).
CPUINFO_ENV = "MLREPRO_CPUINFO"
_PROC_CPUINFO = "/proc/cpuinfo"


def read_cpu_identity(
    cpuinfo: str | None,
    processor: Callable[[], str] = platform.processor,
    machine: Callable[[], str] = platform.machine,
) -> dict[str, Any]:
    """Without ``cpuinfo`` (macOS, Windows) what ``platform`` names, and no flags; ``processor``
    is asked only then, since it may start ``uname``."""
    parsed = parse_cpuinfo(cpuinfo) if cpuinfo is not None else {}
    vendor, model = parsed.get("cpu_vendor"), parsed.get("cpu")
    if vendor is None or model is None:
        named = processor()
        # Windows names it inside ("Intel64 Family 6 Model 85 Stepping 7, GenuineIntel").
        vendor = vendor or next(
            (v for v in ("GenuineIntel", "AuthenticAMD") if v in named), named or None
        )
        model = model or named or machine()
    return {"cpu_vendor": vendor, "cpu": model, "cpu_flags": list(parsed.get("cpu_flags", []))}


def cpu_identity() -> dict[str, Any]:
    """From /proc/cpuinfo or ``MLREPRO_CPUINFO``'s file, read once per file; a copy per caller."""
    identity = _cpu_identity_of(os.environ.get(CPUINFO_ENV) or _PROC_CPUINFO)
    return {**identity, "cpu_flags": list(identity["cpu_flags"])}


MAX_CPUINFO_BYTES = 4 << 20  # /proc/cpuinfo of a 1,024-CPU x86 machine holds about 1.5 MB
CPUINFO_READ_S = 2.0  # checked between 64 KiB reads (a local file takes microseconds)


class CpuinfoUnreadable(UserWarning):
    """``MLREPRO_CPUINFO`` names no readable CPU description: /proc/cpuinfo is read instead."""


def read_cpuinfo(path: str) -> str:
    """A regular file only, bounded in size and time (ValueError)."""
    import stat
    import time

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a regular file (a FIFO, a device or a folder)")
        if info.st_size > MAX_CPUINFO_BYTES:  # /proc files say 0: their read is bounded below
            raise ValueError(f"{info.st_size} bytes, larger than {MAX_CPUINFO_BYTES}")
        os.set_blocking(fd, True)
        deadline = time.monotonic() + CPUINFO_READ_S
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, 1 << 16):
            size += len(chunk)
            if size > MAX_CPUINFO_BYTES:
                raise ValueError(f"larger than {MAX_CPUINFO_BYTES} bytes")
            if time.monotonic() > deadline:
                raise ValueError(f"not read within {CPUINFO_READ_S} s")
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", errors="replace")


@cache
def _cpu_identity_of(cpuinfo_path: str) -> dict[str, Any]:
    try:
        text: str | None = read_cpuinfo(cpuinfo_path)
    except (OSError, ValueError) as exc:
        if cpuinfo_path != _PROC_CPUINFO:
            import warnings

            warnings.warn(
                f"{CPUINFO_ENV}={cpuinfo_path}: cannot read it as a CPU description ({exc}); "
                f"this machine's own {_PROC_CPUINFO} is read instead",
                CpuinfoUnreadable,
                stacklevel=2,
            )
            return _cpu_identity_of(_PROC_CPUINFO)
        text = None
    return read_cpu_identity(text)


# Distributions whose version can change a model's outputs: the frameworks and runtimes, the
# model formats' parsers (onnx, protobuf, flatbuffers) and numpy.
NUMERIC_PACKAGES = (
    "numpy",
    "onnx",
    "onnxruntime",
    "onnxruntime-gpu",
    "protobuf",
    "flatbuffers",
    "torch",
    "tensorflow",
    "tensorflow-cpu",
    "ai-edge-litert",
    "tflite-runtime",
)


@cache
def numeric_packages() -> dict[str, str | None]:
    """From package metadata (no framework imported), plus ``numpy-blas``: the BLAS numpy was
    built against, where its build config says (1.26 on)."""
    import numpy as np

    found: dict[str, str | None] = {
        dist: version for dist in NUMERIC_PACKAGES if (version := installed_version(dist))
    }
    try:
        config = np.show_config(mode="dicts")
    except TypeError:  # numpy < 1.26: show_config() takes no mode
        return found
    blas = (config or {}).get("Build Dependencies", {}).get("blas", {})
    if isinstance(blas, dict) and blas.get("name"):
        found["numpy-blas"] = f"{blas['name']} {blas.get('version') or ''}".strip()
    return found


# Environment variables that change numerics: which ISA oneDNN, ATen, MKL and OpenBLAS may use, and
# whether TensorFlow uses oneDNN at all; then the thread counts, which change how sums are split.
NUMERIC_SETTINGS = (
    "TF_ENABLE_ONEDNN_OPTS",
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
    "ONEDNN_DEFAULT_FPMATH_MODE",
    "ATEN_CPU_CAPABILITY",
    "MKL_ENABLE_INSTRUCTIONS",
    "MKL_CBWR",
    "OPENBLAS_CORETYPE",
    "NPY_DISABLE_CPU_FEATURES",
    "TF_XLA_FLAGS",
    "XLA_FLAGS",
)
THREAD_SETTINGS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
)


def numeric_settings() -> dict[str, str]:
    """Read each time: a test may set them."""
    return {
        name: os.environ[name]
        for name in (*NUMERIC_SETTINGS, *THREAD_SETTINGS)
        if name in os.environ
    }


def installed_version(*dists: str) -> str | None:
    for dist in dists:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def describe_cpu(env: Mapping[str, Any]) -> str:
    """``AMD EPYC (AuthenticAMD; avx avx2 f16c fma)``: a CPU and the flags recorded for it (an
    environment or a :func:`cpu_identity`), saying what is not recorded."""
    flags = env.get("cpu_flags")
    vendor = env.get("cpu_vendor") or "vendor not recorded"
    shown = " ".join(map(str, flags)) if isinstance(flags, list) else "flags not recorded"
    return f"{env.get('cpu') or 'unknown CPU'} ({vendor}; {shown})"


@cache
def libraries() -> dict[str, Any]:
    """Versions of the image libraries, read without importing OpenCV."""
    from PIL import features

    return {
        "numpy": installed_version("numpy"),
        "pillow": installed_version("pillow", "Pillow"),
        "libjpeg": features.version("jpg"),
        "libjpeg_turbo": features.check_feature("libjpeg_turbo"),
        "opencv": installed_version(
            "opencv-python", "opencv-python-headless", "opencv-contrib-python"
        ),
    }


def environment(runner_info: dict[str, Any] | None = None) -> dict[str, Any]:
    """Everything that may change a result, as plain JSON data."""
    identity = cpu_identity()  # a copy: its flags are this environment's own
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "cpu": str(identity["cpu"]),
        "cpu_count": os.cpu_count(),
        **libraries(),
        "cpu_vendor": identity["cpu_vendor"],
        "cpu_flags": identity["cpu_flags"],
        "numeric_packages": dict(numeric_packages()),
        "numeric_settings": numeric_settings(),
    }
    if runner_info:
        env["runtime"] = dict(runner_info)
    return env


# --- hardware key: what latency goldens are kept per ------------------------------------------

# Fields of the key that name the machine; the others name the software on it. A golden recorded
# on the same machine with other software settings is still the right baseline to compare with.
HARDWARE_FIELDS = ("device", "machine", "cpu", "cpu_count", "usable_cpus", "cpu_quota", "gpu")


def usable_cpus() -> tuple[int, ...]:
    """This process's affinity (``taskset``, cpusets), or all CPUs where that is unknown."""
    if hasattr(os, "sched_getaffinity"):
        return tuple(sorted(os.sched_getaffinity(0)))
    return tuple(range(os.cpu_count() or 1))


def usable_cpu_count() -> int:
    return len(usable_cpus())


def cpu_quota() -> float | None:
    """The cgroup v2 CPU quota in cores, or None when there is none."""
    try:
        with open("/sys/fs/cgroup/cpu.max", encoding="ascii") as fh:
            quota, period = fh.read().split()[:2]
        return None if quota == "max" else round(int(quota) / int(period), 2)
    except (OSError, ValueError, ZeroDivisionError):
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
    """Where and how a latency was measured: machine, device, framework and thread settings;
    ``slug`` (readable parts plus a hash of every field) names its golden file."""

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

    def same_hardware(self, other: dict[str, Any]) -> bool:
        """Whether ``other`` (a key's fields) names the same machine and device."""
        return all(other.get(k) == self.fields.get(k) for k in HARDWARE_FIELDS)

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
    """Thread settings None: the default; the GPU is part of ``cuda`` items' keys only."""
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
        fields.update(gpu_info() or {"gpu": "unknown", "gpu_driver": "unknown"})
    return HardwareKey(fields)
