"""pytest-randomly: a shuffled order and reseeded generators change no verdict, no metric and no
golden (issue 30: it works; this keeps it so)."""

from __future__ import annotations

import json

from compat_helpers import needs, two_manifests
from helpers import Project, sha256

pytestmark = needs("pytest_randomly", "pytest-randomly")


def verdicts(project: Project, seed: str) -> list[tuple[str, str, object]]:
    result = project.run(
        "-p",
        "randomly",
        "-p",
        "no:xdist",
        f"--randomly-seed={seed}",
        "--mlrepro-json",
        f"results-{seed}.json",
        "--mlrepro-no-diagnose",
    )
    assert f"--randomly-seed={seed}" in result.stdout.str()
    rows = json.loads((project.path / f"results-{seed}.json").read_text())["results"]
    return sorted((r["nodeid"], r["verdict"], r.get("top1")) for r in rows)


def test_verdicts_and_goldens_do_not_depend_on_the_seed(serial_project: Project) -> None:
    two_manifests(serial_project)
    goldens = {p.name: sha256(p) for p in (serial_project.path / "golden").iterdir()}
    first = verdicts(serial_project, "1")
    assert [v for _, v, _ in first].count("pass") == 1  # one passes, one drifts
    assert verdicts(serial_project, "2") == first == verdicts(serial_project, "3")
    assert {p.name: sha256(p) for p in (serial_project.path / "golden").iterdir()} == goldens
