"""What a run needs and lacks: a framework that is not installed (a real environment without
torch: a virtual environment that links every package of this one but torch), a version
constraint unmet, a data set absent, a device absent. Each skips with a reason that says how to
fix it, and fails under ``--mlrepro-strict``.
"""

from __future__ import annotations

import site
import sys
import venv
from pathlib import Path

import pytest
from helpers import CHILD_TIMEOUT_S, QUIET, Project

from pytest_mlrepro.runners import cuda_present

STRICT = "(a failure because of --mlrepro-strict)"


def environment_without(folder: Path, *hidden: str) -> Path:
    """A virtual environment holding (as symlinks) every installed distribution but ``hidden``
    (import names, their metadata included); returns its python."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    target = folder / "lib" / version / "site-packages"
    for source in map(Path, site.getsitepackages()):
        for entry in source.iterdir():
            name = entry.name.split("-")[0].split(".")[0].lower()
            if name not in hidden and not (target / entry.name).exists():
                (target / entry.name).symlink_to(entry)
    return folder / "bin" / "python"


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_framework_that_is_not_installed_skips_with_how_to_install_it(
    serial_project: Project, tmp_path_factory: pytest.TempPathFactory, xdist: list[str]
) -> None:
    project = serial_project
    python = environment_without(tmp_path_factory.mktemp("venv"), "torch", "torchgen", "functorch")
    probe = project.pytester.run(str(python), "-c", "import torch")
    assert probe.ret != 0  # really not installed there
    project.make(
        {
            "tiny_onnx.yaml": project.manifest("tiny_onnx"),
            "tiny_torch.yaml": project.manifest("tiny_torch", "torch"),
        },
        goldens=["tiny_onnx"],
    )

    def run(*args: str) -> pytest.RunResult:
        return project.pytester.run(
            str(python), "-m", "pytest", *QUIET, *xdist, *args, timeout=CHILD_TIMEOUT_S
        )

    skipped = run("-rs")
    skipped.assert_outcomes(passed=1, skipped=1)
    skipped.stdout.fnmatch_lines(
        [
            "SKIPPED * *tiny_torch.yaml:*: torch is not installed. "
            "pip install 'pytest-mlrepro[[]torch[]]'"
        ]
    )
    strict = run("--mlrepro-strict")
    strict.assert_outcomes(passed=1, failed=1)
    strict.stdout.fnmatch_lines(
        [f"torch is not installed. pip install 'pytest-mlrepro[[]torch[]]' {STRICT}"]
    )


def test_version_data_and_device_absent_skip_with_how_and_fail_when_strict(
    project: Project,
) -> None:
    if cuda_present():
        pytest.skip("this machine has a GPU: the cuda items would run")
    runtime = "runtime: {batch_size: 8, devices: [cpu]}"
    both = "runtime: {batch_size: 8, devices: [cpu, cuda]}"
    project.make(
        {
            "old.yaml": project.manifest("tiny_old", version="<0.1"),
            "absent.yaml": project.manifest("tiny_absent").replace(
                "{name: tiny,", "{name: absent,"
            ),
            "gpu_onnx.yaml": project.manifest("tiny_onnx").replace(runtime, both),
            "gpu_torch.yaml": project.manifest("tiny_torch", "torch").replace(runtime, both),
        },
        goldens=["tiny_onnx"],
    )
    (project.path / "golden" / "tiny_torch.json").write_bytes(
        project.golden("tiny_onnx").read_bytes().replace(b'"tiny_onnx"', b'"tiny_torch"')
    )
    device = ["--mlrepro-device", "cpu,cuda"]
    skipped = project.run("-rs", *device)
    # old, absent: cpu skipped; gpu_*: cpu passes (tiny_torch's golden is tiny_onnx's results),
    # cuda skipped.
    skipped.assert_outcomes(passed=2, skipped=4)
    for line in (
        "SKIPPED * *old.yaml:*: onnxruntime * is installed; the manifest requires "
        "onnxruntime<0.1. install a matching version: pip install 'onnxruntime<0.1'",
        "SKIPPED * *absent.yaml:*: data set 'absent' is not available here; searched: "
        "*Set MLREPRO_DATA (or the ini key mlrepro_data) to a folder that contains 'absent/'*",
        "SKIPPED * *gpu_onnx.yaml:*: this onnxruntime build has no "
        "CUDAExecutionProvider. pip install onnxruntime-gpu (instead of onnxruntime)",
        "SKIPPED * *gpu_torch.yaml:*: this torch build has no CUDA support. install a "
        "CUDA build of torch and check nvidia-smi",
    ):
        skipped.stdout.fnmatch_lines([line])

    strict = project.run("--mlrepro-strict", *device)
    strict.assert_outcomes(passed=2, failed=4)
    for words in (
        "onnxruntime<0.1",
        "data set 'absent' is not available",
        "no CUDAExecutionProvider",
        "no CUDA support",
    ):
        strict.stdout.fnmatch_lines([f"*{words}*{STRICT}"])
