"""Why a build did not reproduce its pin, in words: this machine and build against the golden's."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import BuildMismatch
from ..fingerprint import describe_cpu


def explain_build_mismatch(
    error: BuildMismatch, golden_env: Mapping[str, Any] | None, golden_shown: str
) -> str:
    """``error``'s message and, given a golden, what differs (and what does not) from its machine
    and packages."""
    if golden_env is None:
        return f"{error.message}\n  (no golden records a machine to compare with)"
    lines = [
        error.message,
        f"  the golden ({golden_shown}) was recorded on: {describe_cpu(golden_env)}",
    ]
    same_cpu = all(
        golden_env.get(key) == error.machine.get(key) for key in ("cpu", "cpu_vendor", "cpu_flags")
    )
    recorded = golden_env.get("numeric_packages")
    if not isinstance(recorded, Mapping):
        packages = "its package versions were not recorded (a golden from an older version)"
        differ: list[str] = []
    else:
        differ = [
            f"{name} {recorded.get(name, 'not installed')} → {version}"
            for name, version in sorted(error.packages.items())
            if recorded.get(name, "not installed") != version
        ]
        packages = (
            "packages differ: " + ", ".join(differ) if differ else "the same package versions"
        )
    cpu = "the same CPU" if same_cpu else "another CPU"
    lines.append(f"  against this build: {cpu}, {packages}")
    if not same_cpu and isinstance(recorded, Mapping) and not differ:
        lines.append(
            "  The packages are the same, the CPU is not: the builder's output depends on the "
            "CPU here, so fetch the fixed bytes rather than rebuild them on every machine."
        )
    return "\n".join(lines)
