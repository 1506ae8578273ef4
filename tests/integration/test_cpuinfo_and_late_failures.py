"""``MLREPRO_CPUINFO`` bounded, and no lost results on a late failure (issue 45, points 2 and 5).

The file ``MLREPRO_CPUINFO`` names is read as a regular file only (a FIFO is never waited on,
``/dev/zero`` never read), at most 4 MiB and within 2 s; otherwise this machine's own
/proc/cpuinfo is read, with one warning. Whatever fails at the session's end (here: reading the
environment, with that warning made an error), the results file is written first and the
failure is one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from helpers import QUIET, BareProject, dev_zero_link, fifo_file
from machines import identity, write_cpuinfo

from pytest_mlrepro import fingerprint
from pytest_mlrepro.fingerprint import CPUINFO_ENV, MAX_CPUINFO_BYTES, CpuinfoUnreadable

pytest.importorskip("onnxruntime")


def one_gib_file(tmp_path: Path) -> Path:
    """A 1 GiB file that takes no disk (sparse)."""
    path = tmp_path / "cpuinfo-1gib"
    with path.open("wb") as fh:
        fh.truncate(1 << 30)
    return path


HOSTILE = {
    "/dev/zero": lambda tmp: Path("/dev/zero"),
    "a link to /dev/zero": dev_zero_link,
    "a FIFO": fifo_file,
    "a 1 GiB file": one_gib_file,
    "a folder": lambda tmp: tmp,
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_cpu_description_that_is_no_regular_small_file_is_refused_unread(
    tmp_path: Path, case: str
) -> None:
    path = HOSTILE[case](tmp_path)
    with pytest.raises((ValueError, OSError)) as refused:
        fingerprint.read_cpuinfo(str(path))
    assert (
        "not a regular file" in str(refused.value)
        or "larger than" in str(refused.value)
        or ("Is a directory" in str(refused.value))
    )


def test_a_file_that_grows_past_the_limit_while_read_is_cut_there(tmp_path: Path) -> None:
    """A /proc-like file reports its size as 0: the read itself stops past the limit."""
    path = tmp_path / "big"
    path.write_bytes(b"x" * (MAX_CPUINFO_BYTES + 1))
    with pytest.raises(ValueError, match="larger than"):
        fingerprint.read_cpuinfo(str(path))
    path.write_bytes(b"x" * MAX_CPUINFO_BYTES)
    assert len(fingerprint.read_cpuinfo(str(path))) == MAX_CPUINFO_BYTES


def test_a_refused_description_falls_back_to_this_machine_once_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    own = fingerprint.read_cpu_identity(fingerprint.read_cpuinfo("/proc/cpuinfo"))
    monkeypatch.setenv(CPUINFO_ENV, str(fifo_file(tmp_path)))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first, second = fingerprint.cpu_identity(), fingerprint.cpu_identity()
    assert first == second == own
    said = [w for w in caught if issubclass(w.category, CpuinfoUnreadable)]
    assert len(said) == 1, said
    assert f"{CPUINFO_ENV}={tmp_path / 'r.json'}: cannot read it as a CPU description" in str(
        said[0].message
    )
    assert "/proc/cpuinfo is read instead" in str(said[0].message)
    # A good description is still read as it is.
    monkeypatch.setenv(CPUINFO_ENV, str(write_cpuinfo("amd-epyc-avx2", tmp_path)))
    assert fingerprint.cpu_identity()["cpu"] == identity("amd-epyc-avx2")["cpu"]


@pytest.mark.parametrize("case", ["/dev/zero", "a FIFO", "a 1 GiB file"])
def test_a_run_with_a_hostile_cpuinfo_keeps_its_results_and_warns(
    bare: BareProject, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    bare.manifest("tiny_onnx")
    monkeypatch.setenv(CPUINFO_ENV, str(HOSTILE[case](bare.path.parent)))
    result = bare.run("--mlrepro-update", "--mlrepro-json", "run.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*CpuinfoUnreadable: MLREPRO_CPUINFO=*cannot read it as a CPU*"])
    document = json.loads((bare.path / "run.json").read_text())
    assert document["results"][0]["verdict"] == "golden recorded"
    assert document["machine"]["environment"]["cpu"]


def test_the_results_file_is_written_first_whatever_fails_at_the_end(bare: BareProject) -> None:
    """The environment read fails at the session's end (its warning made an error for the
    whole process): the results file is still written, the failure said in one line, the exit
    status non-zero."""
    bare.manifest("tiny_onnx")
    bare.run("--mlrepro-update").assert_outcomes(passed=1)
    env = {
        **os.environ,
        CPUINFO_ENV: "/dev/zero",
        "PYTHONWARNINGS": "error::pytest_mlrepro.fingerprint.CpuinfoUnreadable",
    }
    child = subprocess.run(
        [sys.executable, "-m", "pytest", *QUIET, "-p", "no:randomly", "--mlrepro-json", "r.json"],
        cwd=bare.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = child.stdout + child.stderr
    assert child.returncode != 0, out
    assert "Traceback" not in out, out
    document = json.loads((bare.path / "r.json").read_text())
    assert [row["nodeid"] for row in document["results"]] == [
        "manifests/tiny_onnx.yaml::accuracy[cpu]"
    ]
    lines = [line for line in out.splitlines() if "the environment could not be read" in line]
    assert len(lines) == 1, out
    assert lines[0].startswith("mlrepro: the environment could not be read for the results file")
    assert "CpuinfoUnreadable" in lines[0] and "the file was written without it" in lines[0]
