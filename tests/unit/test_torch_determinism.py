"""A manifest's deterministic_ops reaches torch's kernels without importing torch's compiler
(``torch.use_deterministic_algorithms`` imports TorchInductor and Dynamo: 1.2 s of CPU at a
session's first torch model load)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

PROBE = textwrap.dedent(
    """
    import json, sys
    import torch
    from pytest_mlrepro.runners.torch import _set_determinism

    states = []
    if sys.argv[1] == "compiler-imported":
        import torch._inductor.config as inductor_config
    for mode in (True, False, True):
        _set_determinism(None, mode)
        inductor = sys.modules.get("torch._inductor.config")
        states.append(
            [
                torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled(),
                None if inductor is None else inductor.deterministic,
            ]
        )
    compiler = sorted(m for m in sys.modules if m in ("torch._dynamo", "torch._inductor"))
    print(json.dumps({"states": states, "compiler": compiler}))
    """
)


def _probe(case: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, case], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def test_deterministic_ops_set_and_cleared_without_importing_the_compiler() -> None:
    found = _probe("alone")
    assert found["states"] == [[True, False, None], [False, False, None], [True, False, None]]
    assert found["compiler"] == []


def test_the_compilers_option_follows_when_the_compiler_is_already_imported() -> None:
    found = _probe("compiler-imported")
    assert found["states"] == [[True, False, True], [False, False, False], [True, False, True]]
