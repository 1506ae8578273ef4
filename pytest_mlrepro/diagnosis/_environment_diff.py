"""The environment diff: which fields of the golden's recorded environment differ from this
run's, and which of them can act on a step or on the model run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import _step_fingerprints as probe_store

EnvChange = tuple[str, Any, Any]  # (field, the golden's value, this run's)

_ENV_FOR_STEP = {
    "decode": ("pillow", "libjpeg", "libjpeg_turbo", "opencv", "tensorflow"),
    "resize": ("pillow", "opencv", "tensorflow", "numpy"),
    "crop": ("numpy",),
}


# Environment fields that goldens recorded before fingerprint.py kept them lack: such a golden
# says nothing about them, which is not a change.
_LATER_ENV_FIELDS = ("cpu_vendor", "cpu_flags", "numeric_packages", "numeric_settings")


def env_diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[EnvChange]:
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


def model_run_env(env_changes: Sequence[EnvChange]) -> list[EnvChange]:
    """Changes acting on the model run: the runtime's, the CPU's ISA, numeric packages, settings."""
    runtime = [e for e in env_changes if e[0].startswith("runtime.")]
    numeric = [
        e
        for e in env_changes
        if e[0] in ("cpu_vendor", "cpu_flags")
        or e[0].startswith(("numeric_packages.", "numeric_settings."))
    ]
    return runtime + numeric


def relevant_env(
    env_changes: Sequence[EnvChange], report: probe_store.StepReport
) -> list[EnvChange]:
    step = report.environment_step or report.first
    keys = _ENV_FOR_STEP.get(step.op, ()) if step is not None else ()
    return [e for e in env_changes if e[0] in keys]


def step_library(
    op: str, params: Mapping[str, Any] | None, env: Mapping[str, Any]
) -> tuple[str, tuple[str, ...]]:
    """The library a step runs on here, with its version, and its version's environment fields."""
    backend = str((params or {}).get("backend", "")) if op in ("decode", "resize") else ""
    packages = env.get("numeric_packages")
    packages = packages if isinstance(packages, Mapping) else {}
    if backend == "pil":
        jpeg = env.get("libjpeg")
        turbo = "libjpeg-turbo" if env.get("libjpeg_turbo") else "libjpeg"
        extra = f" ({turbo} {jpeg})" if jpeg and op == "decode" else ""
        return f"Pillow {env.get('pillow') or '?'}{extra}", ("pillow", "libjpeg", "libjpeg_turbo")
    if backend == "opencv":
        return f"OpenCV {env.get('opencv') or '?'}", ("opencv",)
    if backend == "tf":
        keys = ("numeric_packages.tensorflow-cpu", "numeric_packages.tensorflow")
        version = packages.get("tensorflow-cpu") or packages.get("tensorflow") or "?"
        return f"TensorFlow {version}", keys
    return f"numpy {env.get('numpy') or '?'}", ("numpy",)


@dataclass(frozen=True)
class EnvironmentStep:
    """With the golden's own pipeline run here, the step that differs, the library it runs on, and
    the environment changes: that library's, the CPU's, other packages'."""

    step: probe_store.StepDiff
    library: str
    changed: tuple[EnvChange, ...]
    cpu: tuple[EnvChange, ...]
    others: tuple[EnvChange, ...]


def environment_step(
    report: probe_store.StepReport,
    steps: Sequence[Any],
    env_now: Mapping[str, Any],
    env_changes: Sequence[EnvChange],
) -> EnvironmentStep | None:
    """None when no step differs for the environment. ``steps``: the manifest's (backends)."""
    step = report.environment_step
    if step is None:
        return None
    index = step.golden_index
    params = None
    if index is not None and index < len(steps) and getattr(steps[index], "op", "") == step.op:
        params = steps[index].params()
    library, keys = step_library(step.op, params, env_now)
    changed = tuple(e for e in env_changes if e[0] in keys)
    cpu = tuple(e for e in env_changes if e[0] in ("cpu", "cpu_vendor", "cpu_flags"))
    others = [e for e in env_changes if e not in changed and e not in cpu and "." in e[0]]
    return EnvironmentStep(step, library, changed, cpu[:2], tuple(others[:3]))
