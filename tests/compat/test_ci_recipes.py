"""The nightly-matrix recipes of docs/ci/ (GitHub Actions and GitLab CI; docs/plugins.md): each
file is valid YAML, passes its engine's schema (check-jsonschema's copies of SchemaStore's
github-workflows and gitlab-ci schemas, where installed), and its commands, run against the tiny
project as each matrix job and then the report job would run them, write every machine's results
file, a merged matrix that passes, the history page and the HTML page (issue 30, 7). The install
lines are not run (the test runs this checkout)."""

from __future__ import annotations

import importlib.util
import itertools
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import REPO, Project

RECIPES = REPO / "docs" / "ci"
GITHUB = RECIPES / "github-nightly.yml"
GITLAB = RECIPES / "gitlab-nightly.yml"
# The commands of the recipes, run by bash: `mlrepro` and `python` are this checkout's.
PRELUDE = f'mlrepro() {{ "{sys.executable}" -m pytest_mlrepro.cli "$@"; }}\n'
PRELUDE += f'python() {{ "{sys.executable}" "$@"; }}\nset -e\n'

needs_linter = pytest.mark.skipif(
    importlib.util.find_spec("check_jsonschema") is None,
    reason="check-jsonschema is not installed (pip install -e '.[compat]'; .ci/run)",
)


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


@needs_linter
@pytest.mark.parametrize(
    ("recipe", "schema"),
    [(GITHUB, "vendor.github-workflows"), (GITLAB, "vendor.gitlab-ci")],
    ids=["github", "gitlab"],
)
def test_the_recipe_passes_its_engines_schema(recipe: Path, schema: str) -> None:
    lint = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, str(recipe)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr


def run_commands(project: Project, commands: list[str], env: dict[str, str]) -> None:
    for command in commands:
        if "pip install" in command:
            continue
        done = subprocess.run(
            ["bash", "-c", PRELUDE + command],
            cwd=project.path,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, (command, done.stdout[-3000:], done.stderr[-3000:])


@pytest.fixture
def matrix_project(serial_project: Project) -> Project:
    serial_project.make(
        {
            "tiny_onnx.yaml": serial_project.manifest("tiny_onnx"),
            "tiny_loose.yaml": serial_project.manifest("tiny_loose"),
        },
        goldens=["tiny_onnx", "tiny_loose"],
    )
    return serial_project


def github_expressions(command: str, values: dict[str, str]) -> str:
    """``${{ matrix.x }}`` and ``${{ github.run_id }}`` replaced as Actions would."""

    def value(match: re.Match[str]) -> str:
        return values[match.group(1)]

    return re.sub(r"\$\{\{\s*([\w.]+)\s*\}\}", value, command)


def test_the_github_recipe_runs(matrix_project: Project) -> None:
    jobs = load(GITHUB)["jobs"]
    assert jobs["report"]["needs"] == "run" and jobs["pages"]["needs"] == "report"
    entries = jobs["run"]["strategy"]["matrix"]["include"]
    summary = matrix_project.path / "summary.md"
    for entry in entries:
        values = {f"matrix.{k}": str(v) for k, v in entry.items()} | {"github.run_id": "7"}
        commands = [
            github_expressions(s["run"], values) for s in jobs["run"]["steps"] if "run" in s
        ]
        run_commands(matrix_project, commands, {})
    machines = {e["machine"] for e in entries}
    assert sorted(p.name for p in (matrix_project.path / "results").glob("*.json")) == sorted(
        f"{e['machine']}-{e['shard']}.json" for e in entries
    )
    report = [s["run"] for s in jobs["report"]["steps"] if "run" in s]
    run_commands(
        matrix_project,
        [github_expressions(c, {"github.run_id": "7"}) for c in report],
        {"GITHUB_STEP_SUMMARY": str(summary)},
    )
    site = matrix_project.path / "site"
    assert (site / "index.html").is_file() and (site / "history.html").is_file()
    assert all(m in summary.read_text() for m in machines)


def gitlab_jobs(matrix: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The jobs of a ``parallel: matrix``: each entry's product of its values."""
    jobs = []
    for entry in matrix:
        keys = list(entry)
        lists = [v if isinstance(v, list) else [v] for v in entry.values()]
        jobs += [dict(zip(keys, map(str, combo))) for combo in itertools.product(*lists)]
    return jobs


def test_the_gitlab_recipe_runs(matrix_project: Project) -> None:
    recipe = load(GITLAB)
    run, report = recipe["mlrepro"], recipe["report"]
    variables = gitlab_jobs(run["parallel"]["matrix"])
    assert len(variables) == 4
    for env in variables:
        run_commands(matrix_project, run["script"], env)
    run_commands(matrix_project, report["script"], {"CI_PIPELINE_ID": "7"})
    public = matrix_project.path / "public"
    assert (public / "index.html").is_file() and (public / "history.html").is_file()
    assert "x86-cpu" in (public / "matrix.md").read_text()
    run_commands(matrix_project, recipe["pages"]["script"], {})
