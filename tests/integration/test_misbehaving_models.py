"""Models that hang or crash, through the plugin.

* A model that hangs (a builder or a forward that sleeps, a busy loop) is stopped by the per-item
  time limit (``runtime.timeout_s``, else the ini key ``mlrepro_timeout``) and fails that item;
  the others pass. One that will not stop (it swallows the interruption) is killed with its
  xdist worker after the grace period, and still only its item fails.
* A model that raises fails its item; one that ends its process (``os._exit``) or segfaults
  takes down only its xdist worker, and only its item fails.
"""

from __future__ import annotations

import pytest
from helpers import (
    BUILDERS_CONFTEST,
    Project,
    make_empty_weights,
    run_patiently,
    state_dict_manifest,
)

from pytest_mlrepro.plugin._limits import HARD_KILL_GRACE_S

# Appended to the builders' conftest: torch imported and one model loaded and run before any
# item, so that the time limits measure the models, not torch's first (lazy) imports.
WARM_UP = """

def _warm_up():
    import io

    import torch

    buffer = io.BytesIO()
    torch.save({}, buffer)
    buffer.seek(0)
    model = _module(_nothing)
    model.load_state_dict(torch.load(buffer, weights_only=True))
    torch.use_deterministic_algorithms(False)
    with torch.inference_mode():
        model(torch.zeros(1, 3, 4, 4))


_warm_up()
"""


def _builder_project(
    project: Project, behaviours: dict[str, str], extra: str = "", conftest_prefix: str = ""
) -> None:
    models = project.path / "models"
    models.mkdir()
    sha = make_empty_weights(models / "empty.pt")
    manifests = {
        f"{name}.yaml": state_dict_manifest(
            name, builder, "../models/empty.pt", sha, assets=project.assets, extra=extra
        )
        for name, builder in behaviours.items()
    }
    project.make(
        {**manifests, "tiny_onnx.yaml": project.manifest("tiny_onnx")}, goldens=["tiny_onnx"]
    )
    # torch is imported before any item runs, so the time limits measure the models alone.
    (project.path / "conftest.py").write_text(conftest_prefix + BUILDERS_CONFTEST + WARM_UP)


def test_a_hanging_model_is_stopped_by_the_time_limit_and_fails_only_its_item(
    project: Project,
) -> None:
    _builder_project(
        project,
        {"hang_forward": "sleeps", "hang_loop": "spins", "hang_builder": "builder_sleeps"},
    )
    runtime = "runtime: {batch_size: 8, devices: [cpu]}"
    for name in ("hang_forward", "hang_loop", "hang_builder"):
        path = project.path / "manifests" / f"{name}.yaml"
        path.write_text(path.read_text().replace(runtime, runtime[:-1] + ", timeout_s: 0.5}"))
    # A manifest without runtime.timeout_s gets the ini default.
    (project.path / "manifests" / "ini_limit.yaml").write_text(
        (project.path / "manifests" / "hang_forward.yaml")
        .read_text()
        .replace("name: hang_forward", "name: ini_limit")
        .replace(", timeout_s: 0.5}", "}")
    )
    ini = project.path / "pytest.ini"
    ini.write_text(ini.read_text() + "mlrepro_timeout = 1\n")
    good = project.path / "manifests" / "tiny_onnx.yaml"  # a manifest's own limit wins
    good.write_text(good.read_text().replace(runtime, runtime[:-1] + ", timeout_s: 600}"))

    result = run_patiently(project, "--mlrepro-update")
    result.assert_outcomes(passed=1, failed=4)
    for name, seconds, source in (
        ("hang_forward", 0.5, "runtime.timeout_s"),
        ("hang_loop", 0.5, "runtime.timeout_s"),
        ("hang_builder", 0.5, "runtime.timeout_s"),
        ("ini_limit", 1, "ini mlrepro_timeout"),
    ):
        result.stdout.fnmatch_lines(
            [
                f"manifests/{name}.yaml::accuracy[[]cpu[]] did not finish within its time limit "
                f"of {seconds} s: stopped (the limit comes from {source})"
            ]
        )
    result.stdout.fnmatch_lines(["tiny_onnx *cpu *onnxruntime *24 *pass"])


@pytest.mark.about_xdist
@pytest.mark.slow  # waits out a hard time limit and a worker's restart
def test_a_model_that_will_not_stop_is_killed_with_its_worker_only(project: Project) -> None:
    if not project.xdist:
        pytest.skip("without xdist, the hard limit ends the whole session (see the README)")
    # SIGALRM blocked: the soft limit never gets through, as in C code that never returns to
    # the interpreter; only the watchdog can end it.
    blocked = "import signal\n\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})\n"
    _builder_project(project, {"stubborn": "sleeps"}, conftest_prefix=blocked)
    path = project.path / "manifests" / "stubborn.yaml"
    runtime = "runtime: {batch_size: 8, devices: [cpu]}"
    path.write_text(path.read_text().replace(runtime, runtime[:-1] + ", timeout_s: 1}"))
    result = run_patiently(project, "--mlrepro-update")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*worker 'gw*' crashed while running 'manifests/stubborn.yaml*"])
    text = "\n".join(result.outlines + result.errlines)
    assert f"still running {HARD_KILL_GRACE_S:g} s after its time limit" in text


def test_a_model_that_raises_fails_only_its_item(project: Project) -> None:
    _builder_project(project, {"broken": "raises", "fine": "means"})
    result = project.run("--mlrepro-update")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*ValueError: the model broke on this batch"])
    result.stdout.fnmatch_lines(["FAILED manifests/broken.yaml::accuracy[[]cpu[]]*"])
    result.stdout.fnmatch_lines(["fine *cpu *torch *24 *golden recorded"])


@pytest.mark.slow  # each variant waits for a worker to die and be replaced
@pytest.mark.parametrize("behaviour", ["exits", "segfaults"])
def test_a_model_that_kills_its_process_fails_only_its_item_under_xdist(
    serial_project: Project, behaviour: str
) -> None:
    project = serial_project
    _builder_project(project, {"crash": behaviour, "fine": "means"})
    result = run_patiently(project, "-n", "2", "--mlrepro-update")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*worker 'gw*' crashed while running 'manifests/crash.yaml*"])
    assert (project.path / "golden" / "fine.json").exists()
    assert not (project.path / "golden" / "crash.json").exists()
