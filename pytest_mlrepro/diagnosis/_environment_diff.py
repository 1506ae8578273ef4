"""The environment diff: which fields of the golden's recorded environment (framework and library
versions, libjpeg, threads, device, the CPU and its ISA flags, numeric packages and settings)
differ from this run's, how each reads, and which of them can act on a step or on the model
run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from . import _step_fingerprints as probe_store
from ._wording import _show

_ENV_FOR_STEP = {
    "decode": ("pillow", "libjpeg", "libjpeg_turbo", "opencv", "tensorflow"),
    "resize": ("pillow", "opencv", "tensorflow", "numpy"),
    "crop": ("numpy",),
}


# Environment fields that goldens recorded before fingerprint.py kept them lack: such a golden
# says nothing about them, which is not a change.
_LATER_ENV_FIELDS = ("cpu_vendor", "cpu_flags", "numeric_packages", "numeric_settings")


def _env_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    def flat(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in d.items():
            key = f"{prefix}{k}"
            if isinstance(v, Mapping):
                out.update(flat(v, key + "."))
            else:
                out[key] = v
        return out

    unrecorded = [f for f in _LATER_ENV_FIELDS if f not in old]
    a, b = flat(old), flat({k: v for k, v in new.items() if k not in unrecorded})
    changes = [(k, a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    # numeric_packages.numpy repeats the top-level numpy: one line is enough.
    said = [(k, x, y) for k, x, y in changes if "." not in k]  # values may be lists: no set
    return [
        (k, x, y)
        for k, x, y in changes
        if not (k.startswith("numeric_packages.") and (k.split(".", 1)[1], x, y) in said)
    ]


def _env_change(key: str, old: Any, new: Any) -> str:
    """How one environment field changed, readably: ISA flags as ``+avx512f -amx_tile``, a
    package or setting that one side lacks as not installed or unset, else ``old → new``."""
    if key == "cpu_flags" and isinstance(old, list) and isinstance(new, list):
        added = [f"+{f}" for f in new if f not in old]
        removed = [f"-{f}" for f in old if f not in new]
        return " ".join(added + removed)
    absent = {"numeric_packages": "(not installed)", "numeric_settings": "(unset)"}.get(
        key.split(".", 1)[0]
    )
    if absent is not None:
        return f"{absent if old is None else _show(old)} → {absent if new is None else _show(new)}"
    return f"{_show(old)} → {_show(new)}"


def _env_text(items: Sequence[tuple[str, Any, Any]]) -> str:
    return "; ".join(f"{k} {_env_change(k, a, b)}" for k, a, b in items)


def _model_run_env(env_changes: list[tuple[str, Any, Any]]) -> list[tuple[str, Any, Any]]:
    """The environment changes that act on the model run: the runtime's, then the CPU's ISA, the
    numeric packages and settings."""
    runtime = [e for e in env_changes if e[0].startswith("runtime.")]
    numeric = [
        e
        for e in env_changes
        if e[0] in ("cpu_vendor", "cpu_flags")
        or e[0].startswith(("numeric_packages.", "numeric_settings."))
    ]
    return runtime + numeric


def _relevant_env(
    env_changes: list[tuple[str, Any, Any]], report: probe_store.StepReport
) -> list[tuple[str, Any, Any]]:
    step = report.environment_step or report.first
    keys = _ENV_FOR_STEP.get(step.op, ()) if step is not None else ()
    return [e for e in env_changes if e[0] in keys]
