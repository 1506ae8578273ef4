"""``mlrepro merge`` is a CI gate over other jobs' artifacts: whatever the results files hold, it
answers with exit 0 (every cell passed), 1 (a cell failed) or 2 (a file is unreadable or
invalid: ``mlrepro merge: FILE: $.json.path: message``), within bounded time and memory, and
never a traceback (whose exit 1 the gate would read as "a cell failed").

Every merge here runs as the command does in CI: a child process, under an address-space limit
(2 GiB) and a time limit.
"""

from __future__ import annotations

import copy
import html
import json
import random
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import CHILD_TIMEOUT_S, dev_zero_link, examples, fifo_file, nested_json, two_gib_file
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from pytest_mlrepro.results import FORMAT

REPO = Path(__file__).resolve().parents[2]
MEMORY_LIMIT = 2 << 30  # bytes of address space: 2 GiB
TIME_LIMIT_S = CHILD_TIMEOUT_S  # a hang detector (helpers.py)
TOL = {"top1": 1.0, "top5": 1.0, "agreement": 0.5, "score": 0.5}
IDS = [f"s{i}.png" for i in range(6)]


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def merge(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """``mlrepro merge ARGS`` in a child process under the memory and time limits."""
    return subprocess.run(
        [sys.executable, "-m", "pytest_mlrepro.cli", "merge", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=TIME_LIMIT_S,
        preexec_fn=_limit_memory,
        cwd=REPO,  # the worktree's package first on sys.path
    )


def results(ids: list[str]) -> dict[str, Any]:
    """Per-sample results over 3 classes, top-2, the same now and in the golden."""
    classes = [i % 3 for i in range(len(ids))]
    return {
        "ids": ids,
        "labels": classes,
        "topk": [[c, (c + 1) % 3] for c in classes],
        "topk_scores": [[0.7, 0.2] for _ in ids],
    }


def accuracy_row(shard: tuple[int, int] | None = None) -> dict[str, Any]:
    ids = IDS if shard is None else [s for s in IDS if _shard_of(s, shard[1]) == shard[0]]
    row: dict[str, Any] = {
        "kind": "accuracy",
        "manifest": "tiny",
        "manifest_file": "manifests/tiny.yaml",
        "manifest_digest": "a" * 64,
        "data_identity": "d" * 64,
        "golden_digest": "e" * 64,
        "device": "cpu",
        "framework": "onnxruntime",
        "framework_version": "1.20.0",
        "samples": len(ids),
        "top1": 100.0,
        "top5": 100.0,
        "agreement": 1.0,
        "max_score_diff": 0.0,
        "tolerances": TOL,
        "verdict": "pass",
        "outcome": "passed",
        "nodeid": "manifests/tiny.yaml::accuracy[cpu]",
        "per_sample": {
            "now": results(ids),
            "golden": results(ids),
            "score_diff": {s: 0.0 for s in ids},
        },
    }
    if shard is not None:
        row["shard"] = {"index": shard[0], "count": shard[1]}
        row["nodeid"] += f"[shard{shard[0]}of{shard[1]}]"
        row["verdict"] = f"shard {shard[0]}/{shard[1]} compared (verdict at the merge)"
    return row


def _shard_of(sample: str, count: int) -> int:
    from pytest_mlrepro.results import shard_of

    return shard_of(sample, count)


def latency_row() -> dict[str, Any]:
    return {
        "kind": "latency",
        "manifest": "tiny",
        "manifest_digest": "a" * 64,
        "device": "cpu",
        "batch": 1,
        "framework": "onnxruntime",
        "framework_version": "1.20.0",
        "nodeid": "manifests/tiny.yaml::latency[cpu-b1]",
        "outcome": "passed",
        "verdict": "pass",
        "p50_ms": 2.0,
        "golden_p50_ms": 2.0,
        "ratio_to_golden": 1.0,
        "decided_by": "both ratios within ≤×1.25",
        "stale_golden": None,
    }


def document(
    machine: str = "ci-1",
    rows: list[dict[str, Any]] | None = None,
    shard: tuple[int, int] | None = None,
) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "machine": {"name": machine, "environment": {"python": "3.11"}},
        "shard": None if shard is None else {"index": shard[0], "count": shard[1]},
        "results": [accuracy_row(shard)] if rows is None else rows,
    }


def write(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value))
    return path


@pytest.mark.parametrize("key", ["data_identity", "golden_digest"])
def test_shards_of_two_data_or_golden_versions_do_not_merge(tmp_path: Path, key: str) -> None:
    """Shard 1/2 measured on one version of the data (or compared with one recording of the
    golden), shard 2/2 on another: each row says which, and the merge refuses to make one
    verdict of them. The same two shards of one version pass."""
    first = write(tmp_path / "s1.json", document(shard=(1, 2)))
    other = document(shard=(2, 2))
    second = write(tmp_path / "s2.json", other)
    same = merge(first, second)
    assert same.returncode == 0, same.stderr
    assert "**PASSED**" in same.stdout
    other["results"][0][key] = "f" * 64
    write(second, other)
    done = merge(first, second)
    assert done.returncode == 1, done.stderr
    thing = "data set" if key == "data_identity" else "golden"
    assert f"the shards were measured on different versions of the {thing} ({key}: " in (
        done.stdout
    )


def _class_index_1e30(tmp_path: Path) -> Path:
    value = document()
    value["results"][0]["per_sample"]["now"]["topk"][0][0] = 10**30
    return write(tmp_path / "r.json", value)


def _shard_count_1e9(tmp_path: Path) -> Path:
    return write(tmp_path / "r.json", document(shard=(1, 10**9)))


HOSTILE = {
    "class index 10**30": (
        _class_index_1e30,
        "$.results[0].per_sample.now.topk[0][0]: 1000000000000000000000000000000 is greater "
        "than the maximum of 2147483647",
    ),
    "shard count 10**9": (
        _shard_count_1e9,
        "$.shard.count: 1000000000 is greater than the maximum of 10000",
    ),
    "100,000 nested lists": (nested_json, "nested deeper than 64 levels"),
    "a 2 GiB file": (two_gib_file, "2147483648 bytes, larger than the limit of"),
    "a FIFO": (fifo_file, "is a FIFO"),
    "a link to /dev/zero": (dev_zero_link, "is a device"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_results_file_exits_2_naming_the_file(tmp_path: Path, case: str) -> None:
    make, message = HOSTILE[case]
    path = make(tmp_path)
    try:
        done = merge(path)
    except subprocess.TimeoutExpired:
        pytest.fail(f"mlrepro merge hung on {case}")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.startswith(f"mlrepro merge: {path}: "), done.stderr
    assert message in done.stderr


def test_one_shard_of_ten_thousand_names_a_few_missing_and_counts_the_rest(
    tmp_path: Path,
) -> None:
    """The largest shard count allowed: the verdict names five missing shards and counts the
    others, instead of listing (and building a list of) all 9,999."""
    path = write(tmp_path / "s1.json", document(shard=(1, 10_000)))
    done = merge(path)
    assert done.returncode == 1, done.stderr
    assert "missing shard 2/10000, 3/10000, 4/10000, 5/10000, 6/10000 and 9994 more" in (
        done.stdout
    )


MACHINE = "$\\foo{$ <b>&"


def test_a_machine_name_that_is_tex_or_html_is_shown_as_text_in_the_html_matrix(
    tmp_path: Path,
) -> None:
    """matplotlib would parse ``$…$`` as mathtext (and crash on ``\\foo{``); the page would
    take ``<b>`` as markup: the name is drawn and written as the text it is."""
    first = write(tmp_path / "a.json", document(machine=MACHINE))
    second = write(tmp_path / "b.json", document(machine="plain"))
    done = merge(first, second, "--html", tmp_path / "m.html")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    page = (tmp_path / "m.html").read_text()
    assert html.escape(MACHINE) in page
    assert "<b>&" not in page


# --- any input: a property test ------------------------------------------------------------------

DEEP = "<nested {}>"
"""A placeholder for a list nested N deep, spliced into the file's text (json.dumps itself would
recurse past Python's limit)."""


def _deep(text: str) -> str:
    for depth in (3, 65, 5000):
        text = text.replace(json.dumps(DEEP.format(depth)), "[" * depth + "]" * depth)
    return text


HOSTILE_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**40), max_value=10**40),
    st.sampled_from([10**9, 2**63, 2**64, 10**30, -(10**30), -1, 0, 1, 1e308, -1e308, 0.5]),
    st.text(max_size=20),
    st.sampled_from(["$\\foo{$", "<script>", "", "\x00", "../../x", "NaN"]),
    st.lists(st.integers(min_value=-5, max_value=5), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
    # Nesting below the limit, just past it, and past Python's recursion limit.
    st.sampled_from([DEEP.format(depth) for depth in (3, 65, 5000)]),
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (keys and indices), the root excluded."""
    out: list[tuple[Any, ...]] = []
    children = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, child in children:
        out.append((*prefix, key))
        out.extend(_paths(child, (*prefix, key)))
    return out


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        value = value[key]
    return value


def _mutate(value: dict[str, Any], seed: int, replacements: list[Any]) -> dict[str, Any]:
    """``value`` with one field replaced, deleted or duplicated per replacement (chosen by
    ``seed``)."""
    rng = random.Random(seed)
    mutated = copy.deepcopy(value)
    for replacement in replacements:
        paths = _paths(mutated)
        if not paths:
            break
        # Mostly a leaf (a number, a string): where the range checks are.
        leaves = [p for p in paths if not isinstance(_at(mutated, p), (dict, list))]
        path = rng.choice(leaves if leaves and rng.random() < 0.7 else paths)
        parent: Any = mutated
        for key in path[:-1]:
            parent = parent[key]
        action = rng.random()
        if action < 0.15:
            del parent[path[-1]]
        elif action < 0.25 and isinstance(parent, list):
            parent.append(copy.deepcopy(parent[path[-1]]))
        else:
            parent[path[-1]] = copy.deepcopy(replacement)
    return mutated


BASES = [
    [document(shard=(1, 2), rows=[accuracy_row((1, 2)), latency_row()]), document(shard=(2, 2))],
    [document(machine="a"), document(machine="b", rows=[accuracy_row(), latency_row()])],
]


def _merge_mutated(
    tmp_path: Path,
    base: int,
    seed: int,
    replacements: list[Any],
    truncate: int | None,
    html_report: bool,
) -> None:
    files = []
    for number, value in enumerate(BASES[base]):
        text = _deep(
            json.dumps(_mutate(value, seed + number, replacements) if number == 0 else value)
        )
        path = tmp_path / f"r{number}.json"
        path.write_text(text[:truncate] if truncate is not None else text)
        files.append(path)
    extra = ["--html", str(tmp_path / "m.html")] if html_report else []
    done = merge(*files, "--csv", tmp_path / "m.csv", *extra)
    assert done.returncode in (0, 1, 2), done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    if done.returncode == 2:
        assert done.stderr.startswith("mlrepro merge: "), done.stderr


# Mutations that crashed the merge before: a class index of 10**30 (OverflowError), a list
# nested 5,000 deep (RecursionError), a machine named like TeX under --html (mathtext).
CRASHED_BEFORE = [
    pytest.param(0, 149, [10**30], None, False, id="class index 10**30"),
    pytest.param(1, 0, [DEEP.format(5000)], None, False, id="5,000 nested lists"),
    pytest.param(1, 15, ["$\\foo{$"], None, True, id="a TeX machine name, --html"),
]


@pytest.mark.parametrize(
    ("base", "seed", "replacements", "truncate", "html_report"), CRASHED_BEFORE
)
def test_mutations_that_crashed_the_merge_before_get_exit_0_1_or_2(
    tmp_path: Path,
    base: int,
    seed: int,
    replacements: list[Any],
    truncate: int | None,
    html_report: bool,
) -> None:
    _merge_mutated(tmp_path, base, seed, replacements, truncate, html_report)


@pytest.mark.slow  # a child process per generated file: fuzzed in the slow tier, at its depth
@settings(
    max_examples=examples(12),
    deadline=None,
    derandomize=True,  # the same files on every run: CI is stable
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@example(base=0, seed=149, replacements=[10**30], truncate=None, html_report=False)
@example(base=1, seed=0, replacements=[DEEP.format(5000)], truncate=None, html_report=False)
@example(base=1, seed=15, replacements=["$\\foo{$"], truncate=None, html_report=True)
@given(
    base=st.sampled_from(range(len(BASES))),
    seed=st.integers(0, 2**32 - 1),
    replacements=st.lists(HOSTILE_VALUES, min_size=1, max_size=4),
    truncate=st.one_of(st.none(), st.integers(0, 4000)),
    html_report=st.booleans(),
)
def test_any_mutated_results_file_gets_exit_0_1_or_2_and_never_a_traceback(
    tmp_path: Path,
    base: int,
    seed: int,
    replacements: list[Any],
    truncate: int | None,
    html_report: bool,
) -> None:
    _merge_mutated(tmp_path, base, seed, replacements, truncate, html_report)
