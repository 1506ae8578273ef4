"""``--mlrepro-changed [REF]``: on a real git history made here (git init, commits), a run selects
exactly the manifest items whose manifest, model file, checksum list, labels folder, golden,
preprocessing code or reference manifest a commit (or an uncommitted edit) touched, and deselects
the others through pytest's hook (issue 44, 1)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from helpers import CHILD_TIMEOUT_S, Project

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
pytestmark = needs_git

ALL = ("tiny_a", "tiny_b", "tiny_c", "tiny_d", "tiny_ref")

STEP = '''\
from dataclasses import dataclass

from pytest_mlrepro import Step, Tensor, register_step


@register_step
@dataclass(frozen=True)
class Same(Step):
    """A custom preprocessing step of the project's own (it changes nothing)."""

    op = "same"

    def apply(self, t: Tensor) -> Tensor:
        return t
'''


def git(project: Project, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=project.path,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=True,
    )
    return done.stdout


def commit(project: Project, message: str) -> None:
    git(project, "add", "-A")
    git(project, "commit", "-q", "--allow-empty", "-m", message)


@pytest.fixture
def history(serial_project: Project) -> Project:
    """Five manifests, each with its own model file; tiny_c with its own checksum list and
    labels folder, tiny_d with the project's custom step, tiny_ref checked against tiny_a; one
    commit of it all."""
    p = serial_project
    manifests = {name: p.manifest(name, model_path=f"../models/{name}.onnx") for name in ALL}
    manifests["tiny_c"] = manifests["tiny_c"].replace(
        "checksums: tiny.sha256", "checksums: c.sha256, labels_dir: c_labels"
    )
    manifests["tiny_d"] = manifests["tiny_d"].replace(
        "- {cast: {dtype: float32}}", "- {same: {}}\n      - {cast: {dtype: float32}}"
    )
    manifests["tiny_ref"] += "reference: tiny_a\n"
    p.make({f"{name}.yaml": text for name, text in manifests.items()})
    for name in ALL:
        shutil.copy(p.path / "models" / "tiny.onnx", p.path / "models" / f"{name}.onnx")
        p.golden(name).write_text("{}\n")  # read by no test here: selection only
    shutil.copy(p.path / "manifests" / "tiny.sha256", p.path / "manifests" / "c.sha256")
    (p.path / "manifests" / "c_labels").mkdir()
    shutil.copy(p.path / "data" / "tiny" / "labels.csv", p.path / "manifests" / "c_labels")
    (p.path / "project_steps.py").write_text(STEP)
    (p.path / "conftest.py").write_text("import project_steps  # noqa: F401\n")
    (p.path / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    git(p, "init", "-q")
    commit(p, "the project")
    return p


def selected(project: Project, *args: str) -> tuple[list[str], str]:
    """The manifests whose items a collection with ``args`` keeps, and its output (a fresh
    process: the project's custom step is registered by its conftest.py)."""
    result = project.run("--collect-only", "-q", *args, subprocess=True)
    assert result.ret in (0, 5), result.stdout.str() + result.stderr.str()
    names = sorted(
        {line.split("::")[0].removeprefix("manifests/").removesuffix(".yaml")
         for line in result.stdout.lines if line.startswith("manifests/") and "::" in line}
    )  # fmt: skip
    return names, result.stdout.str()


def edit(path: object, text: str = "\n# edited\n") -> None:
    with open(path, "a") as fh:  # type: ignore[call-overload]
        fh.write(text)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ("models/tiny_b.onnx", ["tiny_b"]),
        ("golden/tiny_b.json", ["tiny_b"]),
        ("manifests/c.sha256", ["tiny_c"]),
        ("manifests/c_labels/labels.csv", ["tiny_c"]),
        ("project_steps.py", ["tiny_d"]),
        ("manifests/tiny_d.yaml", ["tiny_d"]),
        # tiny_ref is checked against tiny_a: a change of tiny_a's model runs both.
        ("models/tiny_a.onnx", ["tiny_a", "tiny_ref"]),
        ("manifests/tiny.sha256", ["tiny_a", "tiny_b", "tiny_d", "tiny_ref"]),
        ("README.md", []),
    ],
)
def test_the_items_a_commit_touched_are_selected(
    history: Project, change: str, expected: list[str]
) -> None:
    edit(history.path / change)
    commit(history, f"change {change}")
    names, out = selected(history, "--mlrepro-changed", "HEAD~1")
    assert names == expected, out
    deselected = len(ALL) - len(expected)
    counts = f"{len(expected)}/{len(ALL)} tests collected" if expected else "no tests collected"
    assert f"{counts} ({deselected} deselected)" in out
    # The header says what changed, per manifest.
    assert f"mlrepro: changed since HEAD~1: {len(expected)} of {len(ALL)} manifests" in out
    # Without the option, every item (nothing is left out silently).
    assert selected(history)[0] == sorted(ALL)


def test_two_commits_back_and_uncommitted_and_untracked_changes(history: Project) -> None:
    edit(history.path / "models" / "tiny_a.onnx")
    commit(history, "a")
    commit(history, "nothing")
    assert selected(history, "--mlrepro-changed=HEAD~1")[0] == []
    assert selected(history, "--mlrepro-changed=HEAD~2")[0] == ["tiny_a", "tiny_ref"]
    # The flag alone: HEAD, the work tree's uncommitted (staged or not) and untracked changes.
    edit(history.path / "golden" / "tiny_b.json")
    git(history, "add", "golden/tiny_b.json")
    edit(history.path / "models" / "tiny_c.onnx")
    assert selected(history, "--mlrepro-changed")[0] == ["tiny_b", "tiny_c"]
    # A new manifest, not yet added to git, is a change of its own.
    text = history.manifest("tiny_e", model_path="../models/tiny_a.onnx")
    (history.path / "manifests" / "tiny_e.yaml").write_text(text)
    assert selected(history, "--mlrepro-changed")[0] == ["tiny_b", "tiny_c", "tiny_e"]
    # The ini key does the same.
    ini = history.path / "pytest.ini"
    ini.write_text(ini.read_text() + "mlrepro_changed = HEAD\n")
    assert selected(history)[0] == ["tiny_b", "tiny_c", "tiny_e"]


def test_a_renamed_model_file_touches_its_manifest(history: Project) -> None:
    git(history, "mv", "models/tiny_b.onnx", "models/tiny_b2.onnx")
    manifest = history.path / "manifests" / "tiny_b.yaml"
    manifest.write_text(manifest.read_text().replace("tiny_b.onnx", "tiny_b2.onnx"))
    git(history, "mv", "models/tiny_c.onnx", "models/tiny_c2.onnx")  # tiny_c: now missing
    commit(history, "renames")
    assert selected(history, "--mlrepro-changed=HEAD~1")[0] == ["tiny_b", "tiny_c"]


def test_other_tests_are_left_alone(history: Project) -> None:
    (history.path / "test_plain.py").write_text("def test_plain():\n    pass\n")
    commit(history, "a plain test")
    edit(history.path / "models" / "tiny_b.onnx")
    names, out = selected(history, "--mlrepro-changed")
    assert names == ["tiny_b"] and "test_plain.py::test_plain" in out


def test_a_changed_model_fails_the_selected_run(serial_project: Project) -> None:
    """The point of it all: a commit that changes only a passing manifest's model file gets
    that manifest run, and it fails (the model no longer matches its pin)."""
    p = serial_project
    p.make(
        {
            "tiny_onnx.yaml": p.manifest("tiny_onnx", model_path="../models/tiny_a.onnx"),
            "tiny_loose.yaml": p.manifest("tiny_loose"),
        },
        goldens=["tiny_onnx", "tiny_loose"],
    )
    shutil.copy(p.path / "models" / "tiny.onnx", p.path / "models" / "tiny_a.onnx")
    git(p, "init", "-q")
    commit(p, "passing")
    p.run("--mlrepro-no-diagnose").assert_outcomes(passed=2)
    shutil.copy(p.path / "models" / "tiny.pt", p.path / "models" / "tiny_a.onnx")
    commit(p, "only the model file changes")
    result = p.run("--mlrepro-changed=HEAD~1", "--mlrepro-no-diagnose")
    result.assert_outcomes(failed=1, deselected=1)
    result.stdout.fnmatch_lines(["*manifests/tiny_onnx.yaml: model.file*"])
    # Nothing touched since: every item deselected, and that is no failure (exit 0, not 5).
    commit(p, "nothing")
    result = p.run("--mlrepro-changed=HEAD~1", "--mlrepro-no-diagnose")
    result.assert_outcomes(deselected=2)
    assert result.ret == pytest.ExitCode.OK


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--mlrepro-changed=no-such-ref"], "--mlrepro-changed no-such-ref: git rev-parse*"),
        (["--mlrepro-changed", "manifests"], "*'manifests' is a path: give the ref as*"),
    ],
)
def test_a_ref_git_does_not_know_is_a_usage_error(
    history: Project, args: list[str], says: str
) -> None:
    result = history.run(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {says}"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_outside_a_git_work_tree_is_a_usage_error(serial_project: Project) -> None:
    serial_project.make({"tiny_onnx.yaml": serial_project.manifest("tiny_onnx")})
    result = serial_project.run("--mlrepro-changed")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --mlrepro-changed HEAD: git rev-parse*"])


def test_under_xdist_too(history: Project) -> None:
    """The workers select alike (each asks git), and nothing touched is a pass there too."""
    edit(history.path / "models" / "tiny_b.onnx")
    commit(history, "b")
    result = history.run("--collect-only", "-q", "-n", "2", "--mlrepro-changed=HEAD~1")
    assert result.ret == 0, result.stdout.str()
    commit(history, "nothing")
    result = history.run("-n", "2", "--mlrepro-changed=HEAD~1", "--mlrepro-no-diagnose")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
