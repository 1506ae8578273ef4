"""The golden store under concurrency, crashes and hand edits, through the plugin (pytester) and
through the library where a process must be killed at an exact point.

* Four xdist workers record and rewrite the goldens of eight manifests twenty times over: after
  every round each golden is whole, valid, and the one that round asked for.
* Two manifests that claim one golden file are refused, naming both, before anything runs.
* A writer killed (SIGKILL) in the middle of ``golden.write`` leaves the previous golden intact;
  its temporary file is ignored, listed, and removed by the next ``--mlrepro-update`` of it.
* A golden edited by hand into something invalid fails its item and is left alone; only
  ``--mlrepro-update`` replaces it.
* Goldens that no manifest uses are listed, once, when the run collected every manifest.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import N_SAMPLES, PREPROCESS_BGR, PREPROCESS_RGB, Project

from pytest_mlrepro import _files
from pytest_mlrepro.goldens import _store as golden_store

OLD = time.time() - 3600  # an mtime far past _files.STALE_AFTER_S


def temp_files(folder: Path) -> list[Path]:
    return sorted(folder.glob(".*.tmp"))


def assert_whole(path: Path, name: str) -> golden_store.Golden:
    """The golden at ``path`` reads, has every sample, and is byte-for-byte what the store writes
    for it (no truncation, no interleaving)."""
    text = path.read_text(encoding="utf-8")
    golden = golden_store.read(path)
    assert golden is not None and golden.name == name
    assert len(golden.results.ids) == N_SAMPLES
    assert golden_store.dumps(golden) == text
    return golden


# --- concurrency -------------------------------------------------------------------------------

WORKERS, ROUNDS, MANIFESTS = 4, 20, 8


@pytest.mark.slow  # a stress test: 80 worker processes, a minute or more
def test_four_workers_rewriting_goldens_twenty_times_lose_nothing(serial_project: Project) -> None:
    """Every round changes every manifest's description (a rewrite, "manifest changed") and flips
    the colour order of some (a rewrite with different results), then records with ``-n 4``."""
    project = serial_project
    names = [f"tiny_g{i}" for i in range(MANIFESTS)]
    project.make({f"{name}.yaml": project.manifest(name) for name in names})
    golden_dir = project.path / "golden"
    for round_ in range(ROUNDS):
        bgr = {name for i, name in enumerate(names) if (i + round_) % 3 == 0}
        for name in names:
            decode = PREPROCESS_BGR if name in bgr else PREPROCESS_RGB
            text = project.manifest(name, decode=decode) + f'description: "round {round_}"\n'
            (project.path / "manifests" / f"{name}.yaml").write_text(text)
        result = project.run("-n", str(WORKERS), "--mlrepro-update", "-q")
        result.assert_outcomes(passed=MANIFESTS)
        assert sorted(p.name for p in golden_dir.iterdir()) == sorted(f"{n}.json" for n in names)
        for name in names:
            golden = assert_whole(golden_dir / f"{name}.json", name)
            assert golden.manifest["description"] == f"round {round_}", (round_, name)
            order = golden.manifest["inputs"][0]["preprocess"][0]["decode"]["order"]
            assert order == ("BGR" if name in bgr else "RGB"), (round_, name)
            expected_top1 = 100 / 3 if name in bgr else 100.0
            assert golden.results.top1 == pytest.approx(expected_top1), (round_, name)


# --- two manifests, one golden -----------------------------------------------------------------


@pytest.mark.about_xdist  # two workers must not both write the shared golden
def test_manifests_sharing_a_golden_are_refused_before_anything_is_written(
    project: Project,
) -> None:
    project.make(
        {
            "first.yaml": project.manifest("tiny_twin"),
            "second.yaml": project.manifest("tiny_twin"),  # the same name: the same golden
            "third.yaml": project.manifest("tiny_third", extra="golden: golden/shared.json\n"),
            "fourth.yaml": project.manifest("tiny_fourth", extra="golden: golden/shared.json\n"),
            "tiny_onnx.yaml": project.manifest("tiny_onnx"),
        }
    )
    result = project.run("--mlrepro-update")
    result.assert_outcomes(passed=1, failed=4)
    for mine, other, golden in (
        ("first", "second", "tiny_twin.json"),
        ("second", "first", "tiny_twin.json"),
        ("third", "fourth", "shared.json"),
        ("fourth", "third", "shared.json"),
    ):
        result.stdout.fnmatch_lines(
            [
                f"manifests/{mine}.yaml: its golden golden/{golden} is also the golden of "
                f"manifests/{other}.yaml: two manifests cannot share one golden file*"
                "Nothing was run or written."
            ]
        )
    result.stdout.fnmatch_lines(["tiny_twin *cpu *onnxruntime *golden shared"])
    assert sorted(p.name for p in (project.path / "golden").iterdir()) == ["tiny_onnx.json"]


# --- a writer killed mid-write -----------------------------------------------------------------

# Run in a child process: rewrite the golden with patched os.fsync or os.replace (the child's only)
# that announce the write is under way and then wait to be killed.
KILLED_WRITER = textwrap.dedent("""\
    import dataclasses, os, sys, time
    from pathlib import Path
    from pytest_mlrepro.goldens import _store as golden

    path, ready, point = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    old = golden.read(path)
    new = dataclasses.replace(old, environment={**old.environment, "rewritten": True})

    def stall(*args):
        ready.write_text(point)
        time.sleep(600)

    setattr(os, point, stall)
    golden.write(path, new)
""")


def _start_writer(golden: Path, ready: Path, point: str) -> subprocess.Popen[bytes]:
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(golden), str(ready), point],
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 300  # a hang detector: room for a loaded machine
    while not ready.exists():
        if child.poll() is not None:
            raise AssertionError(child.stderr.read().decode() if child.stderr else "exited")
        assert time.monotonic() < deadline, "the writer never reached the stall"
        time.sleep(0.05)
    return child


@pytest.mark.parametrize("point", ["fsync", "replace"])
def test_a_writer_killed_mid_write_leaves_the_previous_golden(
    tmp_path: Path, mlrepro_assets: Path, point: str
) -> None:
    golden = tmp_path / "golden" / "tiny_onnx.json"
    golden.parent.mkdir()
    golden.write_bytes((mlrepro_assets / "golden" / "tiny_onnx.json").read_bytes())
    before = golden.read_bytes()

    child = _start_writer(golden, tmp_path / "ready", point)
    # The new content is in a temporary file beside the golden, locked by its live writer.
    (temp,) = temp_files(golden.parent)
    assert temp.name.startswith(".tiny_onnx.json.")
    os.utime(temp, (OLD, OLD))
    assert _files.stale_temp_files(golden) == []  # old, but its writer is alive
    child.send_signal(signal.SIGKILL)
    assert child.wait(timeout=30) == -signal.SIGKILL

    assert golden.read_bytes() == before
    assert_whole(golden, "tiny_onnx")
    assert temp_files(golden.parent) == [temp]  # left behind by the dead writer
    assert _files.stale_temp_files(golden) == [temp]  # now unlocked: stale
    os.utime(temp)  # a fresh temporary file may belong to a writer that has not locked it yet
    assert _files.stale_temp_files(golden) == []

    # The next write of that golden removes the leftover and writes the new golden whole.
    os.utime(temp, (OLD, OLD))
    rewritten = golden_store.read(golden)
    assert rewritten is not None
    golden_store.write(golden, rewritten)
    assert temp_files(golden.parent) == []
    assert golden.read_bytes() == before


def test_a_killed_writers_leftover_is_ignored_listed_and_removed_by_update(
    serial_project: Project,
) -> None:
    project = serial_project
    project.make({"tiny_onnx.yaml": project.manifest("tiny_onnx")}, goldens=["tiny_onnx"])
    golden = project.golden("tiny_onnx")
    before = golden.read_bytes()
    leftover = golden.parent / ".tiny_onnx.json.k1ll3d00.tmp"
    leftover.write_bytes(before[: len(before) // 2])  # what a killed writer leaves
    os.utime(leftover, (OLD, OLD))

    plain = project.run()
    plain.assert_outcomes(passed=1)
    plain.stdout.fnmatch_lines(
        [
            "*1 temporary file(s) left by interrupted golden writes (ignored; the next "
            "--mlrepro-update of that golden removes them):",
            "  golden/.tiny_onnx.json.k1ll3d00.tmp",
        ]
    )
    assert golden.read_bytes() == before and leftover.exists()

    manifest = project.path / "manifests" / "tiny_onnx.yaml"
    manifest.write_text(manifest.read_text() + "description: changed\n")
    update = project.run("--mlrepro-update")
    update.assert_outcomes(passed=1)
    update.stdout.fnmatch_lines(["tiny_onnx *golden updated (manifest changed)"])
    assert not leftover.exists() and temp_files(golden.parent) == []
    assert assert_whole(golden, "tiny_onnx").manifest["description"] == "changed"


# --- goldens edited by hand --------------------------------------------------------------------


def _breakages(text: str) -> dict[str, tuple[str, str]]:
    """name → (broken golden text, what the failure says)."""
    data = json.loads(text)

    def edited(change: object) -> str:
        copy = json.loads(text)
        change(copy)  # type: ignore[operator]
        return json.dumps(copy, indent=2)

    row = data["samples"][0]
    return {
        "tiny_truncated": (text[: len(text) // 2], "not valid JSON"),
        "tiny_format": (edited(lambda d: d.update(format=99)), "format: expected 1, got 99"),
        "tiny_nosamples": (
            edited(lambda d: d.update(samples=[])),
            "samples: expected a non-empty list",
        ),
        "tiny_score": (
            edited(lambda d: d["samples"][0].__setitem__(3, ["high"] * len(row[3]))),
            'samples[[]0[]][[]3[]][[]0[]]: expected a score (a number), got "high" (a string)',
        ),
        "tiny_row": (
            edited(lambda d: d["samples"][0].pop()),
            "samples[[]0[]]: expected [[]id, label, [[]classes[]], [[]scores[]][]]",
        ),
        "tiny_nomanifest": (edited(lambda d: d.pop("manifest")), "manifest: expected a mapping"),
        "tiny_notutf8": ("\udcff", "cannot read the golden"),
    }


def test_goldens_broken_by_hand_are_reported_and_only_update_replaces_them(
    project: Project, mlrepro_assets: Path
) -> None:
    source = (mlrepro_assets / "golden" / "tiny_onnx.json").read_text()
    broken = _breakages(source)
    project.make({f"{name}.yaml": project.manifest(name) for name in broken})
    for name, (text, _) in broken.items():
        fixed_name = text.replace('"name": "tiny_onnx"', f'"name": "{name}"')
        project.golden(name).write_bytes(fixed_name.encode("utf-8", "surrogateescape"))
    before = {name: project.golden(name).read_bytes() for name in broken}

    result = project.run()
    result.assert_outcomes(failed=len(broken))
    for name, (_, words) in broken.items():
        result.stdout.fnmatch_lines(
            [f"*golden/{name}.json*{words}*", "(only --mlrepro-update replaces it: *)"]
        )
        result.stdout.fnmatch_lines([f"{name} *cpu *onnxruntime *error"])
    assert {name: project.golden(name).read_bytes() for name in broken} == before

    update = project.run("--mlrepro-update")
    update.assert_outcomes(passed=len(broken))
    for name in broken:
        assert_whole(project.golden(name), name)


# --- goldens no manifest uses ------------------------------------------------------------------

UNUSED_HEADER = "1 golden(s) that no manifest uses (delete them if that is intended):"


@pytest.mark.about_xdist  # listed once, by the controller, not by each worker
def test_unused_goldens_are_listed_once_and_only_when_every_manifest_ran(
    project: Project,
) -> None:
    project.make(
        {
            "tiny_onnx.yaml": project.manifest("tiny_onnx"),
            "tiny_loose.yaml": project.manifest("tiny_loose"),
        },
        goldens=["tiny_onnx", "tiny_loose"],
    )
    retired = project.path / "golden" / "tiny_retired.json"
    retired.write_bytes(project.golden("tiny_onnx").read_bytes())
    (project.path / "golden" / "notes.txt").write_text("not a golden")

    full = project.run()
    full.assert_outcomes(passed=2)
    full.stdout.fnmatch_lines(
        ["=* mlrepro goldens =*", UNUSED_HEADER, "  golden/tiny_retired.json"]
    )
    assert full.outlines.count(UNUSED_HEADER) == 1  # on the controller only, under xdist
    assert "  golden/tiny_onnx.json" not in full.outlines

    subsets = [
        ["-k", "tiny_onnx"],
        ["manifests/tiny_onnx.yaml"],
        ["manifests/tiny_onnx.yaml::accuracy[cpu]", "manifests/tiny_loose.yaml::accuracy[cpu]"],
        ["-m", "not slow"],  # selects everything: still complete, still listed
    ]
    # Under xdist each worker judges its selection complete or not as a serial run does (the
    # serial variant goes through every way of selecting); the controller lists only when all
    # say complete: one partial selection shows that.
    for subset in subsets[:1] if project.xdist else subsets:
        partial = project.run(*subset)
        assert partial.ret == 0, partial.outlines
        listed = UNUSED_HEADER in partial.outlines
        assert listed == (subset == ["-m", "not slow"]), (subset, partial.outlines)
    assert retired.exists()  # listed, never deleted

    # A manifest that fails to load may be the one that uses the "unused" golden: said so.
    (project.path / "manifests" / "broken.yaml").write_text("framework: onnxruntime\nmodel: [\n")
    broken = project.run()
    broken.assert_outcomes(passed=2, failed=1)
    broken.stdout.fnmatch_lines(
        [
            "1 golden(s) look unused, but 1 manifest(s) failed to load and may use them: "
            "manifests/broken.yaml",
            "  golden/tiny_retired.json",
        ]
    )
