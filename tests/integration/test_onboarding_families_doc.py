"""The three walk-throughs of docs/onboarding.md (16-bit grey, colour with alpha, 13 bands stored
bands first), run as they are written: the documented script makes the data set and the model,
the documented ``mlrepro init`` line writes the manifest, which holds the documented lines and
records a golden that passes."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest
from helpers import QUIET, REPO

from pytest_mlrepro.cli import main

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

DOC = (REPO / "docs" / "onboarding.md").read_text(encoding="utf-8")


def block_after(marker: str, language: str) -> str:
    """The fenced ``language`` block right after ``<!-- marker -->``."""
    found = re.search(rf"<!-- {marker} -->\n```{language}\n(.*?)```", DOC, re.S)
    assert found is not None, f"docs/onboarding.md has no {language} block after {marker}"
    return found.group(1)


@pytest.mark.parametrize("family", ["grey16", "rgba", "bands"])
def test_the_walkthrough_runs_as_documented(
    pytester: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    family: str,
) -> None:
    monkeypatch.delenv("MLREPRO_DATA", raising=False)
    monkeypatch.setenv("MLREPRO_CACHE", str(pytester.path / ".mlrepro-cache"))
    (pytester.path / "pytest.ini").write_text("[pytest]\nmlrepro_data = data\n")
    script = block_after("family-example-script", "python")
    # The documented script is the repository's example, word for word.
    assert script == (REPO / "examples" / "make_family_example.py").read_text(encoding="utf-8")
    (pytester.path / "make_family_example.py").write_text(script)
    make, init = block_after(f"family-walkthrough-{family}", "sh").strip().splitlines()
    subprocess.run([sys.executable, *shlex.split(make)[1:]], cwd=pytester.path, check=True,
                   timeout=120)  # fmt: skip
    words = shlex.split(init)
    assert words[:2] == ["mlrepro", "init"]
    status = main(words[1:])
    out, err = capsys.readouterr()
    assert status == 0, out + err
    assert "the data's files:" in out
    text = (pytester.path / "manifests" / f"{family}.yaml").read_text()
    for line in block_after(f"family-manifest-{family}", "yaml").splitlines():
        assert line in text, f"{line!r} is not in the manifest written:\n{text}"
    result = pytester.runpytest(*QUIET, f"manifests/{family}.yaml", "--mlrepro-update")
    result.assert_outcomes(passed=1)
    result = pytester.runpytest(*QUIET, f"manifests/{family}.yaml")
    result.assert_outcomes(passed=1)
