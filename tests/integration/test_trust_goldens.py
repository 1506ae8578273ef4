"""Goldens are validated, not trusted; the golden store writes only its own files, the way an
editor would (issue 10, items 2-6 and the output side of 8).

* A golden edited by hand (class indices as strings or floats, labels as booleans, scores as
  strings or NaN, an out-of-range class, metrics that contradict the samples, another manifest's
  name) fails its item naming the file, the line and the field; only --mlrepro-update replaces it.
* A golden recorded with another number of classes is a drift that an update re-records.
* ``golden:`` may only name a file of the accuracy namespace (not a latency or pitfall golden, not
  a project file): anything else is an invalid manifest, and nothing is written there.
* A golden path that is a symlink, a FIFO or a folder is refused (never read through, never
  blocking, never a raw traceback).
* A golden records the manifest file it was recorded from; another manifest with the same name is
  refused, naming both, in a later run.
* Written files follow the umask, like any editor's.
* Unwritable outputs are usage errors before anything runs; a write that fails (file too large)
  is one clear message, and the old golden stays intact.
"""

from __future__ import annotations

import json
import os
import resource
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers import PREPROCESS_BGR, QUIET, SCALE, Project, line_of, sha256

from pytest_mlrepro.goldens import _store as golden_store

Row = list[object]


def run(project: Project, *args: str) -> pytest.RunResult:
    """pytest on the project, in this process."""
    return project.pytester.runpytest(*QUIET, *args)


def sample_line(text: str, sample: str) -> int:
    """The 1-based line of ``sample``'s row in a golden as the store writes it."""
    return line_of(text, f'["{sample}", ')


def edit_row(text: str, index: int, change: Callable[[Row], None]) -> tuple[str, int]:
    """``text`` with sample row ``index`` changed in place; returns it and the row's line."""
    data = json.loads(text)
    row = data["samples"][index]
    number = sample_line(text, row[0])
    change(row)
    lines = text.split("\n")
    comma = "," if lines[number - 1].endswith(",") else ""
    lines[number - 1] = "    " + json.dumps(row) + comma
    return "\n".join(lines), number


def set_item(i: int, j: int | None, value: object) -> Callable[[Row], None]:
    def change(row: Row) -> None:
        if j is None:
            row[i] = value
        else:
            row[i][j] = value  # type: ignore[index]

    return change


def hand_edits(text: str) -> dict[str, tuple[str, str]]:
    """name → (edited golden text, the line the failure must show)."""
    data = json.loads(text)
    rows = data["samples"]
    top1 = rows[3][2][0]
    out: dict[str, tuple[str, str]] = {}
    integer = "must be an integer, got"
    number = "expected a number, got"
    table: list[tuple[str, int, str, Callable[[Row], None], str]] = [
        ("tiny_class_str", 3, "[2][0]", set_item(2, 0, str(top1)), f'{integer} "{top1}"'),
        ("tiny_class_float", 3, "[2][0]", set_item(2, 0, float(top1)), f"{integer} {top1}.0"),
        ("tiny_class_range", 3, "[2][0]", set_item(2, 0, 7), "class index 7 is out of range"),
        ("tiny_label_bool", 1, "[1]", set_item(1, None, True), f"{integer} true (a boolean)"),
        ("tiny_score_str", 3, "[3][0]", set_item(3, 0, "0.5"), f'{number} "0.5" (a string)'),
        ("tiny_score_nan", 3, "[3][0]", set_item(3, 0, float("nan")), "a score must be finite"),
    ]
    for name, index, field, change, message in table:
        edited, line = edit_row(text, index, change)
        where = f"samples[{index}]{field}".replace("[", "[[]")  # fnmatch's literal "["
        out[name] = (edited, f"golden/{name}.json:{line}: {where}: *{message}*")
    # Stored metrics that contradict the stored samples.
    wrong = text.replace(f'    "top1": {data["metrics"]["top1"]},', '    "top1": 12.5,', 1)
    line = line_of(wrong, '"top1": 12.5')
    out["tiny_metrics"] = (
        wrong,
        f"golden/tiny_metrics.json:{line}: metrics.top1: 12.5 (a float) contradicts the stored "
        f"samples, which give {data['metrics']['top1']}*",
    )
    return out


# --- 2. goldens are validated --------------------------------------------------------------------


def test_hand_edited_goldens_fail_naming_file_line_and_field_and_only_update_replaces_them(
    serial_project: Project, mlrepro_assets: Path
) -> None:
    project = serial_project
    source = (mlrepro_assets / "golden" / "tiny_onnx.json").read_text()
    edits = hand_edits(source)
    names = [*edits, "tiny_named"]
    project.make({f"{name}.yaml": project.manifest(name) for name in names})
    for name, (text, _) in edits.items():
        project.golden(name).write_text(text.replace('"tiny_onnx"', f'"{name}"'))
    # Another manifest's golden, copied under this manifest's name: it says whose it is.
    project.golden("tiny_named").write_text(source)
    before = {name: project.golden(name).read_bytes() for name in names}

    result = run(project)
    result.assert_outcomes(failed=len(names))
    for _, expected in edits.values():
        result.stdout.fnmatch_lines([expected])
    name_line = source.split("\n").index('  "name": "tiny_onnx",') + 1
    result.stdout.fnmatch_lines(
        [
            f"golden/tiny_named.json:{name_line}: name: the golden belongs to 'tiny_onnx', not "
            "to 'tiny_named' (manifests/tiny_named.yaml)*",
            "(only --mlrepro-update replaces it: pytest manifests/tiny_named.yaml *)",
        ]
    )
    assert {name: project.golden(name).read_bytes() for name in names} == before

    update = run(project, "--mlrepro-update")
    update.assert_outcomes(passed=len(names))
    for name in names:
        golden = golden_store.read(project.golden(name))
        assert golden is not None and golden.name == name
    run(project).assert_outcomes(passed=len(names))


def make_wide_onnx(path: Path, classes: int) -> None:
    """The tiny model with ``classes`` outputs: the 3 channel-mean logits, then zeros."""
    import onnx
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("ReduceMean", ["input"], ["means"], axes=[2, 3], keepdims=1),
        helper.make_node("Flatten", ["means"], ["flat"], axis=1),
        helper.make_node("Mul", ["flat", "scale"], ["logits3"]),
        helper.make_node("Pad", ["logits3", "pads"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_wide",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, "h", "w"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes])],
        initializer=[
            helper.make_tensor("scale", TensorProto.FLOAT, [], [SCALE]),
            helper.make_tensor("pads", TensorProto.INT64, [4], [0, 0, 0, classes - 3]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def test_a_golden_recorded_with_another_class_count_is_a_drift_an_update_rerecords(
    serial_project: Project,
) -> None:
    project = serial_project
    project.make({})
    make_wide_onnx(project.path / "models" / "wide.onnx", 5)
    wide = project.manifest(
        "tiny_classes",
        model_path="../models/wide.onnx",
        sha=sha256(project.path / "models" / "wide.onnx"),
    ).replace("classes: 3}", "classes: 5}")
    manifest = project.path / "manifests" / "tiny_classes.yaml"
    # A softmax spreads the scores over the two extra classes: they enter the recorded top-k.
    manifest.write_text(wide + "postprocess: {softmax: true, top_k: 5}\n")
    run(project, "--mlrepro-update").assert_outcomes(passed=1)
    recorded = golden_store.read(project.golden("tiny_classes"))
    assert recorded is not None and recorded.results.topk.max() == 4

    manifest.write_text(project.manifest("tiny_classes") + "postprocess: {softmax: true}\n")
    before = project.golden("tiny_classes").read_bytes()
    result = run(project)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "manifests/tiny_classes.yaml [[]cpu[]]: the golden golden/tiny_classes.json was "
            "recorded with 5 classes, the model now has 3: its results cannot be compared.*",
            "  pytest manifests/tiny_classes.yaml --mlrepro-update",
        ]
    )
    assert project.golden("tiny_classes").read_bytes() == before
    update = run(project, "--mlrepro-update")
    update.assert_outcomes(passed=1)
    update.stdout.fnmatch_lines(["*golden updated (number of classes changed)*"])
    run(project).assert_outcomes(passed=1)


# --- 3. the accuracy namespace -------------------------------------------------------------------


def test_golden_key_outside_the_accuracy_namespace_is_an_invalid_manifest_and_nothing_is_written(
    serial_project: Project,
) -> None:
    project = serial_project
    targets = {
        "tiny_latency": "golden/latency/tiny_onnx/x.json",
        "tiny_pitfalls": "golden/pitfalls/tiny_onnx.json",
        "tiny_project": "package.json",
        "tiny_escape": "golden/../package.json",
    }
    manifests = {
        f"{name}.yaml": project.manifest(name, extra=f"golden: {target}\n")
        for name, target in targets.items()
    }
    manifests["tiny_sub.yaml"] = project.manifest("tiny_sub", extra="golden: golden/sub/x.json\n")
    project.make(manifests)
    for target in set(targets.values()):
        path = project.path / target
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text('{"precious": true}\n')

    result = run(project, "--mlrepro-update")
    result.assert_outcomes(passed=1, failed=len(targets))
    for name, target in targets.items():
        text = manifests[f"{name}.yaml"]
        line = line_of(text, "golden: ")
        if target.startswith("golden/latency") or target.startswith("golden/pitfalls"):
            folder = target.split("/")[1]
            why = f"is in golden/{folder}/, reserved for {folder} goldens*"
        else:
            why = "is outside the golden directory (golden/)*"
        result.stdout.fnmatch_lines([f"manifests/{name}.yaml:{line}: golden: {target!r} {why}"])
    for target in targets.values():
        assert (project.path / target).read_text() == '{"precious": true}\n', target
    assert golden_store.read(project.path / "golden" / "sub" / "x.json") is not None


# --- 4. symlinks, FIFOs and folders --------------------------------------------------------------


def test_golden_paths_that_are_symlinks_fifos_or_folders_are_refused(
    serial_project: Project, mlrepro_assets: Path, tmp_path: Path
) -> None:
    project = serial_project
    names = ["tiny_link", "tiny_fifo", "tiny_folder"]
    project.make({f"{name}.yaml": project.manifest(name) for name in names})
    # A valid golden outside the project: the old code read through the link and passed.
    outside = tmp_path / "elsewhere.json"
    text = (mlrepro_assets / "golden" / "tiny_onnx.json").read_text()
    outside.write_text(text.replace('"tiny_onnx"', '"tiny_link"'))
    project.golden("tiny_link").symlink_to(outside)
    os.mkfifo(project.golden("tiny_fifo"))
    project.golden("tiny_folder").mkdir()
    kinds = {"tiny_link": "a symbolic link", "tiny_fifo": "a FIFO (named pipe)"}
    kinds["tiny_folder"] = "a folder"

    for args in ([], ["--mlrepro-update"]):
        # In a subprocess with a time limit: the old code blocked forever opening the FIFO.
        result = project.pytester.runpytest_subprocess(*QUIET, *args, timeout=120)
        result.assert_outcomes(failed=len(names))
        for name, kind in kinds.items():
            result.stdout.fnmatch_lines([f"*golden/{name}.json is {kind}*regular file*"])
        assert "Traceback" not in result.stdout.str()
    assert project.golden("tiny_link").is_symlink()
    assert outside.read_text() == text.replace('"tiny_onnx"', '"tiny_link"')
    assert stat.S_ISFIFO(os.lstat(project.golden("tiny_fifo")).st_mode)
    assert project.golden("tiny_folder").is_dir()


# --- 5. the manifest file a golden belongs to ----------------------------------------------------


def test_a_manifest_with_the_same_name_cannot_take_over_a_golden_in_a_later_run(
    serial_project: Project,
) -> None:
    project = serial_project
    project.make(
        {
            "first.yaml": project.manifest("tiny_twin"),
            "second.yaml": project.manifest("tiny_twin", decode=PREPROCESS_BGR),
        }
    )
    run(project, "manifests/first.yaml", "--mlrepro-update").assert_outcomes(passed=1)
    golden = golden_store.read(project.golden("tiny_twin"))
    assert golden is not None and golden.manifest_file == "manifests/first.yaml"
    before = project.golden("tiny_twin").read_bytes()

    for args in ([], ["--mlrepro-update"]):
        result = run(project, "manifests/second.yaml", *args)
        result.assert_outcomes(failed=1)
        result.stdout.fnmatch_lines(
            [
                "manifests/second.yaml: its golden golden/tiny_twin.json was recorded from "
                "manifests/first.yaml, which still claims it: two manifests named 'tiny_twin' "
                "cannot share one golden file*Nothing was written."
            ]
        )
        assert project.golden("tiny_twin").read_bytes() == before
    run(project, "manifests/first.yaml").assert_outcomes(passed=1)


def test_a_golden_recorded_before_the_manifest_file_was_kept_loads_and_gets_it_on_update(
    serial_project: Project,
) -> None:
    project = serial_project
    project.make({"tiny_onnx.yaml": project.manifest("tiny_onnx")}, goldens=["tiny_onnx"])
    path = project.golden("tiny_onnx")
    lines = path.read_text().split("\n")
    path.write_text("\n".join(line for line in lines if '"manifest_file"' not in line))
    legacy = golden_store.read(path)
    assert legacy is not None and legacy.manifest_file is None
    run(project).assert_outcomes(passed=1)

    update = run(project, "--mlrepro-update")
    update.assert_outcomes(passed=1)
    update.stdout.fnmatch_lines(["*golden updated (manifest file recorded)*"])
    updated = golden_store.read(path)
    assert updated is not None and updated.manifest_file == "manifests/tiny_onnx.yaml"


def test_a_moved_manifest_keeps_its_golden(serial_project: Project) -> None:
    """The recorded manifest file no longer exists: the manifest was moved, not duplicated."""
    project = serial_project
    project.make({"old.yaml": project.manifest("tiny_moved")})
    run(project, "--mlrepro-update").assert_outcomes(passed=1)
    (project.path / "manifests" / "old.yaml").rename(project.path / "manifests" / "new.yaml")
    run(project).assert_outcomes(passed=1)
    run(project, "--mlrepro-update").assert_outcomes(passed=1)
    golden = golden_store.read(project.golden("tiny_moved"))
    assert golden is not None and golden.manifest_file == "manifests/new.yaml"


# --- 6. file modes -------------------------------------------------------------------------------


@pytest.fixture
def umask() -> Iterator[Callable[[int], None]]:
    """Sets this process's umask (the in-process pytest runs use it); restored afterwards."""
    old = os.umask(0o022)

    def set_mask(mask: int) -> None:
        os.umask(mask)

    yield set_mask
    os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o002])
def test_written_files_follow_the_umask(
    serial_project: Project, umask: Callable[[int], None], mask: int
) -> None:
    project = serial_project
    project.make({"tiny_onnx.yaml": project.manifest("tiny_onnx")})
    umask(mask)
    run(project, "--mlrepro-update", "--mlrepro-json", "results.json").assert_outcomes(passed=1)
    for path in (project.golden("tiny_onnx"), project.path / "results.json"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask, path


# --- 8. unwritable outputs -----------------------------------------------------------------------


def test_results_file_in_an_unwritable_folder_is_a_usage_error_before_anything_runs(
    serial_project: Project,
) -> None:
    project = serial_project
    project.make({"tiny_onnx.yaml": project.manifest("tiny_onnx")})
    # A path whose parent is a regular file: unwritable even for root (tests run as root here).
    (project.path / "blocker").write_text("a file, not a folder\n")
    result = run(project, "--mlrepro-update", "--mlrepro-json", "blocker/out/results.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: {project.path}/blocker/out: cannot write the results file (--mlrepro-json): "
            "a part of the path is a file, not a folder*Nothing was run."
        ]
    )
    assert not project.golden("tiny_onnx").exists()


def test_update_into_an_unwritable_golden_directory_is_a_usage_error_before_anything_runs(
    serial_project: Project,
) -> None:
    project = serial_project
    project.make({"tiny_onnx.yaml": project.manifest("tiny_onnx")})
    (project.path / "blocker").write_text("a file, not a folder\n")
    with (project.path / "pytest.ini").open("a") as ini:
        ini.write("mlrepro_golden_dir = blocker/golden\n")
    result = run(project, "--mlrepro-update")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"ERROR: {project.path}/blocker/golden: cannot write the goldens (--mlrepro-update): "
            "a part of the path is a file, not a folder*Nothing was run."
        ]
    )
    run(project).assert_outcomes(failed=1)  # a plain run writes nothing: no golden is all


def _limit_file_size(limit: int) -> Callable[[], None]:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def test_a_golden_too_large_to_write_is_one_clear_failure_and_the_old_golden_stays(
    serial_project: Project,
) -> None:
    project = serial_project
    project.make({"tiny_onnx.yaml": project.manifest("tiny_onnx")}, goldens=["tiny_onnx"])
    path = project.golden("tiny_onnx")
    before = path.read_bytes()
    # The results change (BGR swaps classes 0 and 2): the update must rewrite the golden.
    (project.path / "manifests" / "tiny_onnx.yaml").write_text(
        project.manifest("tiny_onnx", decode=PREPROCESS_BGR)
    )
    # RLIMIT_FSIZE makes write() fail with EFBIG past the limit (Python ignores SIGXFSZ): a
    # real "file too large", no root needed. Output goes to a pipe, which the limit spares.
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *QUIET, "--mlrepro-update"],
        cwd=project.path,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_limit_file_size(len(before) // 2),
    )
    output = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, output
    assert (
        "golden/tiny_onnx.json: cannot write the golden: the file is larger than this process "
        "may write (the file size limit, `ulimit -f`, or the file system's largest file): "
        "raise the limit and run again; nothing was changed there"
    ) in output, output
    assert "Traceback" not in output, output
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["tiny_onnx.json"]  # no temp file


def test_a_results_file_that_cannot_be_written_at_the_end_is_said_and_fails_the_run(
    serial_project: Project,
) -> None:
    """The folder was writable at the start; the write itself fails (file too large): one clear
    line, and the exit status says the run did not succeed although every item passed."""
    project = serial_project
    project.make({"tiny_onnx.yaml": project.manifest("tiny_onnx")}, goldens=["tiny_onnx"])
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *QUIET, "--mlrepro-json", "results.json"],
        cwd=project.path,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_limit_file_size(256),  # far below any results file
    )
    output = done.stdout + done.stderr
    assert done.returncode == pytest.ExitCode.TESTS_FAILED, output
    assert "1 passed" in output, output
    assert (
        f"mlrepro: {project.path}/results.json: cannot write the results file (--mlrepro-json): "
        "the file is larger than this process may write"
    ) in output, output
    assert "Traceback" not in output, output
    assert not (project.path / "results.json").exists()
