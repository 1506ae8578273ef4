"""The nightly-matrix recipes of docs/ci/ (GitHub Actions and GitLab CI; docs/plugins.md), issue 44:

* each file passes its engine's schema (check-jsonschema's copies of SchemaStore's
  github-workflows and gitlab-ci schemas, where installed) and, for GitHub, zizmor (where
  installed); every action is pinned to a commit with its version in a comment, and no checkout
  keeps credentials;
* each recipe is played, its steps or script lines in order, as the engine runs them on fresh
  runners: a step after a failing one runs only under ``always()`` (GitLab: a later job only with
  ``when: always``), a cache is restored and saved as the engine does (``actions/cache`` saves only
  when its job succeeded; ``cache: when: always`` whatever the outcome), artifacts go from one job
  to the next. Three nights: one that passes, one that drifts (its jobs and its gate fail), one
  that passes; the data mirror comes from "the team's store" (a .tar.gz here, fetched with curl
  through a file:// URL), the project's runners have no data of their own. The third night's
  history lists all three, the drifting one included.

The install lines are not run (the test runs this checkout). The nights are days apart: a night's
results files say when they were made (``created``), and ``mlrepro history`` takes one UTC day as
one night, so each night's files are dated to its own day, as a run a day later would date them.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import CHILD_TIMEOUT_S, PREPROCESS_BGR, PREPROCESS_RGB, REPO, Project

RECIPES = REPO / "docs" / "ci"
GITHUB = RECIPES / "github-nightly.yml"
GITLAB = RECIPES / "gitlab-nightly.yml"
# The commands of the recipes, run by bash as the engines run them: `mlrepro` and `python` are
# this checkout's.
PRELUDE = f'mlrepro() {{ "{sys.executable}" -m pytest_mlrepro.cli "$@"; }}\n'
PRELUDE += f'python() {{ "{sys.executable}" "$@"; }}\nset -eo pipefail\n'
NIGHTS = ((1, False), (2, True), (3, False))
"""(day, drifts): the nights played."""

needs_linter = pytest.mark.skipif(
    importlib.util.find_spec("check_jsonschema") is None,
    reason="check-jsonschema is not installed (pip install -e '.[compat]'; .ci/run)",
)


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


# --- lint ---------------------------------------------------------------------------------------


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
        timeout=CHILD_TIMEOUT_S,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr


# The compat extra's zizmor: beside this interpreter (its venv, activated or not), else on PATH.
ZIZMOR = shutil.which("zizmor", path=str(Path(sys.executable).parent)) or shutil.which("zizmor")


@pytest.mark.skipif(ZIZMOR is None, reason="zizmor is not installed (pip install -e '.[compat]')")
def test_zizmor_finds_nothing_in_the_github_recipe() -> None:
    """zizmor's auditor persona (every audit, every confidence), offline."""
    assert ZIZMOR is not None
    lint = subprocess.run(
        [ZIZMOR, "--offline", "--persona", "auditor", str(GITHUB)],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr


def test_actions_are_pinned_and_checkouts_keep_no_credentials() -> None:
    steps = [s for job in load(GITHUB)["jobs"].values() for s in job["steps"]]
    uses = [s["uses"] for s in steps if "uses" in s]
    assert len(uses) >= 10
    for line in GITHUB.read_text().splitlines():
        if "uses:" in line:  # owner/name@<40 hex digits> # vX.Y.Z
            assert re.search(r"uses: [\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$", line), line
    checkouts = [s for s in steps if s.get("uses", "").startswith("actions/checkout@")]
    assert len(checkouts) == 2
    assert all(s["with"]["persist-credentials"] is False for s in checkouts)


# --- the engines, played -----------------------------------------------------------------------


@dataclass
class Engine:
    """What outlives one runner: the caches (by key, in the order saved) and, per pipeline, the
    artifacts; what a night published; the output of every command run."""

    root: Path
    caches: dict[str, Path] = field(default_factory=dict)
    artifacts: dict[str, Path] = field(default_factory=dict)
    published: Path | None = None
    said: list[str] = field(default_factory=list)

    def keep(self, kind: str, name: str, source: Path) -> Path:
        target = self.root / kind / re.sub(r"\W", "_", name)
        shutil.rmtree(target, ignore_errors=True)
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            target.mkdir(parents=True)
        return target

    def save_cache(self, key: str, source: Path) -> None:
        if key not in self.caches and source.exists():  # a cache entry is never overwritten
            self.caches[key] = self.keep("cache", key, source)

    def restore_cache(self, key: str, target: Path, prefixes: tuple[str, ...] = ()) -> str:
        """'true' on an exact hit; else the newest entry whose key starts with a prefix."""
        hit = key if key in self.caches else None
        if hit is None:
            hit = next(
                (k for k in reversed(self.caches) if any(k.startswith(p) for p in prefixes)), None
            )
        if hit is not None:
            shutil.copytree(self.caches[hit], target, dirs_exist_ok=True)
        return "true" if hit == key else "false"

    def run(self, command: str, cwd: Path, env: dict[str, str]) -> bool:
        done = subprocess.run(
            ["bash", "-c", PRELUDE + command],
            cwd=cwd,
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
        )
        self.said.append(f"$ {command}\n{done.stdout}{done.stderr}")
        return done.returncode == 0


@dataclass
class Nights:
    """The project as it is each night (a checkout: no data, no cache), the team's store."""

    project: Project
    store_url: str

    def checkout(self, runner: Path, drifts: bool) -> Path:
        shutil.rmtree(runner, ignore_errors=True)
        shutil.copytree(
            self.project.path,
            runner,
            ignore=shutil.ignore_patterns("data", ".mlrepro-cache", "runners", "engine", "store"),
        )
        if drifts:  # tonight's commit: tiny_onnx decodes BGR against its RGB golden
            manifest = runner / "manifests" / "tiny_onnx.yaml"
            manifest.write_text(manifest.read_text().replace(PREPROCESS_RGB, PREPROCESS_BGR))
        return runner


def date_the_night(results: Path, day: int) -> None:
    """Tonight's results files dated to night ``day`` (see the module docstring)."""
    for path in results.rglob("*.json"):
        document = json.loads(path.read_text())
        document["created"] = f"2026-11-{day:02d}T02:00:00Z"
        path.write_text(json.dumps(document))


@pytest.fixture
def nights(serial_project: Project) -> Nights:
    """Two manifests that pass, no data in the project (nor an ini key for it); the data set
    packed as the team's store (a .tar.gz, what the recipes fetch on a runner without it)."""
    p = serial_project
    p.make(
        {
            "tiny_onnx.yaml": p.manifest("tiny_onnx"),
            "tiny_loose.yaml": p.manifest("tiny_loose"),
        },
        goldens=["tiny_onnx", "tiny_loose"],
        ini_data=None,
    )
    (p.path / "store").mkdir()
    archive = p.path / "store" / "mirror.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(p.path / "data" / "tiny", arcname="tiny")
    return Nights(p, archive.as_uri())


def expand(text: str, values: dict[str, str]) -> str:
    """``${{ x.y }}`` as Actions replaces it (a name the test does not know fails it)."""
    return re.sub(r"\$\{\{\s*([\w.-]+)\s*\}\}", lambda m: values[m.group(1)], text)


def github_runs(condition: str | None, failed: bool, values: dict[str, str]) -> bool:
    """Whether a step runs: by default only while no step failed; ``always()`` whatever
    happened; ``steps.<id>.outputs.<name> != 'true'``."""
    if condition is None:
        return not failed
    if condition == "always()":
        return True
    output = re.fullmatch(r"(steps\.[\w-]+\.outputs\.[\w-]+) != 'true'", condition)
    assert output is not None, f"a condition the test does not play: {condition}"
    return not failed and values.get(output.group(1)) != "true"


def play_github_job(
    engine: Engine,
    job: dict[str, Any],
    runner: Path,
    values: dict[str, str],
    runner_env: dict[str, str] | None = None,
) -> bool:
    """One job on a fresh runner; whether it succeeded. ``runner_env``: what the runner sets."""
    values = dict(values, **{"github.workspace": str(runner)})
    env = dict(runner_env or {})
    env |= {k: expand(str(v), values) for k, v in job.get("env", {}).items()}
    values |= {f"env.{k}": v for k, v in env.items()}
    failed, saved_at_end = False, []
    for step in job["steps"]:
        if not github_runs(step.get("if"), failed, values):
            continue
        given = {k: expand(str(v), values) for k, v in step.get("with", {}).items()}
        if "run" in step:
            if "pip install" in step["run"]:
                continue
            step_env = {k: expand(str(v), values) for k, v in step.get("env", {}).items()}
            command = expand(step["run"], values)
            failed |= not engine.run(command, runner, {**env, **step_env})
            continue
        action = step["uses"].split("@")[0]
        path = runner / given.get("path", ".")
        if action in ("actions/checkout", "actions/setup-python"):
            continue  # the runner holds tonight's checkout and this interpreter
        if action in ("actions/cache", "actions/cache/restore"):
            prefixes = tuple(given.get("restore-keys", "").split())
            hit = engine.restore_cache(given["key"], path, prefixes)
            if "id" in step:
                values[f"steps.{step['id']}.outputs.cache-hit"] = hit
            if action == "actions/cache":  # its save runs after the job, if it succeeded
                saved_at_end.append((given["key"], path))
        elif action == "actions/cache/save":
            engine.save_cache(given["key"], path)
        elif action == "actions/upload-artifact":
            engine.artifacts[given["name"]] = engine.keep("artifacts", given["name"], path)
        elif action == "actions/download-artifact":
            names = fnmatch.filter(engine.artifacts, given["pattern"])
            assert given["merge-multiple"] == "True" and names
            for name in names:
                shutil.copytree(engine.artifacts[name], path, dirs_exist_ok=True)
        elif action == "actions/upload-pages-artifact":
            engine.published = engine.keep("pages", "github-pages", path)
        else:
            raise AssertionError(f"an action the test does not play: {action}")
    for key, path in saved_at_end if not failed else ():
        engine.save_cache(key, path)
    return not failed


def play_github_night(engine: Engine, nights: Nights, day: int, drifts: bool) -> dict[str, bool]:
    jobs = load(GITHUB)["jobs"]
    assert jobs["report"]["needs"] == "run" and jobs["pages"]["needs"] == "report"
    assert jobs["report"]["if"] == "always()" and jobs["pages"]["if"] == "always()"
    engine.artifacts.clear()
    values = {
        "github.run_id": str(100 + day),
        "vars.MLREPRO_STORE_URL": nights.store_url,
        "vars.MLFLOW_TRACKING_URI": "",  # no tracking server in the play: the line as it was
    }
    workflow_env = {f"env.{k}": str(v) for k, v in load(GITHUB).get("env", {}).items()}
    outcome = {}
    for n, entry in enumerate(jobs["run"]["strategy"]["matrix"]["include"]):
        runner = nights.checkout(engine.root / "runners" / f"run{n}", drifts)
        matrix = {f"matrix.{k}": str(v) for k, v in entry.items()}
        outcome[f"run {n}"] = play_github_job(
            engine, jobs["run"], runner, values | workflow_env | matrix
        )
    for name in engine.artifacts:
        date_the_night(engine.artifacts[name], day)
    runner = nights.checkout(engine.root / "runners" / "report", drifts)
    summary = {"GITHUB_STEP_SUMMARY": str(runner / "summary.md")}
    outcome["report"] = play_github_job(engine, jobs["report"], runner, values, summary)
    return outcome


def gitlab_matrix(matrix: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The jobs of a ``parallel: matrix``: each entry's product of its values."""
    jobs = []
    for entry in matrix:
        keys = list(entry)
        lists = [v if isinstance(v, list) else [v] for v in entry.values()]
        jobs += [dict(zip(keys, map(str, combo))) for combo in itertools.product(*lists)]
    return jobs


def gitlab_expand(text: str, variables: dict[str, str]) -> str:
    return re.sub(r"\$\{?(\w+)\}?", lambda m: variables.get(m.group(1), m.group(0)), text)


def play_gitlab_job(
    engine: Engine, job: dict[str, Any], runner: Path, variables: dict[str, str]
) -> bool:
    """One job on a fresh runner: its cache restored, its script lines in order (the first that
    fails ends it), its cache saved (``when``: on_success by default), its artifacts kept."""
    variables = dict(variables, CI_PROJECT_DIR=str(runner))
    for name, value in job.get("variables", {}).items():
        variables[name] = gitlab_expand(str(value), variables)
    cache = job.get("cache")
    if cache is not None:
        engine.restore_cache(gitlab_expand(cache["key"], variables), runner)
    ok = True
    for line in job["script"]:
        if "pip install" in line:
            continue
        if not engine.run(line, runner, variables):
            ok = False
            break
    if cache is not None and (ok or cache.get("when") == "always"):
        bundle = engine.root / "bundle"  # the cache's paths, each where it is in the project
        shutil.rmtree(bundle, ignore_errors=True)
        bundle.mkdir(parents=True)
        for folder in cache["paths"]:
            if (runner / folder).is_dir():
                shutil.copytree(runner / folder, bundle / folder)
        key = gitlab_expand(cache["key"], variables)
        engine.caches.pop(key, None)  # a GitLab cache key is overwritten, not kept
        engine.save_cache(key, bundle)
    artifacts = job.get("artifacts")
    if artifacts is not None and (ok or artifacts.get("when") == "always"):
        for folder in artifacts["paths"]:
            name = f"{variables.get('CI_JOB_NAME', 'job')}:{folder}"
            engine.artifacts[name] = engine.keep("artifacts", name, runner / folder)
    return ok


def gitlab_receive(engine: Engine, runner: Path) -> None:
    """A later stage's job gets the earlier stages' artifacts."""
    for name, kept in engine.artifacts.items():
        folder = name.split(":", 1)[1]
        shutil.copytree(kept, runner / folder, dirs_exist_ok=True)


def play_gitlab_night(engine: Engine, nights: Nights, day: int, drifts: bool) -> dict[str, bool]:
    recipe = load(GITLAB)
    run, report, pages = recipe["mlrepro"], recipe["report"], recipe["pages"]
    assert report["when"] == "always" and pages["when"] == "always"
    engine.artifacts.clear()
    pipeline = {"CI_PIPELINE_ID": str(100 + day), "MLREPRO_STORE_URL": nights.store_url}
    outcome = {}
    for n, matrix in enumerate(gitlab_matrix(run["parallel"]["matrix"])):
        runner = nights.checkout(engine.root / "runners" / f"run{n}", drifts)
        variables = pipeline | matrix | {"CI_JOB_NAME": f"mlrepro {n}"}
        outcome[f"run {n}"] = play_gitlab_job(engine, run, runner, variables)
    assert len(outcome) == 4
    for kept in engine.artifacts.values():
        date_the_night(kept, day)
    runner = nights.checkout(engine.root / "runners" / "report", drifts)
    gitlab_receive(engine, runner)
    run_artifacts = dict(engine.artifacts)
    outcome["report"] = play_gitlab_job(
        engine, report, runner, pipeline | {"CI_JOB_NAME": "report"}
    )
    # pages needs report: only its artifacts.
    engine.artifacts = {k: v for k, v in engine.artifacts.items() if k not in run_artifacts}
    runner = nights.checkout(engine.root / "runners" / "pages", drifts)
    gitlab_receive(engine, runner)
    outcome["pages"] = play_gitlab_job(engine, pages, runner, pipeline | {"CI_JOB_NAME": "pages"})
    if outcome["pages"]:
        engine.published = runner / "public"
    return outcome


@pytest.mark.parametrize("engine_name", ["github", "gitlab"])
def test_the_recipe_keeps_every_night_and_gates_the_drift(nights: Nights, engine_name: str) -> None:
    play = play_github_night if engine_name == "github" else play_gitlab_night
    engine = Engine(nights.project.path / "engine")
    outcomes = []
    for day, drifts in NIGHTS:
        outcomes.append(play(engine, nights, day, drifts))
        said = "\n".join(engine.said)
        # Every night is published, the drifting one too.
        assert engine.published is not None, said
        assert (engine.published / "history.html").is_file(), said
        assert (engine.published / "index.html").is_file(), said
    passed, drifted, again = outcomes
    said = "\n".join(engine.said)
    assert all(passed.values()) and all(again.values()), (outcomes, said)
    # The drifting night: each shard job compares its shard and passes (the verdict is the
    # merge's); the gate, the report job's merge, fails it, after the nights were kept.
    assert all(v for k, v in drifted.items() if k.startswith("run ")), (drifted, said)
    assert drifted["report"] is False, said
    # The data came from the team's store (a fresh runner has none), then from the cache.
    assert "mlrepro-mirror-v1" in engine.caches, said
    fetched = [s for s in engine.said if "curl" in s.splitlines()[0]]
    assert fetched, said
    if engine_name == "github":  # a step of its own, run once: the cache holds it since
        assert len(fetched) == 1, said
    else:  # a script line that fetches only where the cache brought no mirror
        assert (engine.caches["mlrepro-mirror-v1"] / "mirror" / "tiny").is_dir(), said
    # The third night's history lists the three nights, the drift the first outside tolerance.
    histories = [s for s in engine.said if s.startswith("$ ") and "mlrepro history" in s]
    assert len(histories) == 3, said
    last = histories[-1]
    assert "3 nights: 2026-11-01, 2026-11-02, 2026-11-03" in last, last
    assert "first outside tolerance: 2026-11-02" in last, last
