"""Manifests of one session that read the same data through the same preprocessing share it:
each image is decoded once, a pipeline one parameter apart gets its own tensors, and every
golden is the one its manifest records alone."""

from __future__ import annotations

import json
import textwrap

from helpers import Project

# Counts the decode and resize ops of the pytest run it is loaded in (in this process, or a
# subprocess's), and puts the pipeline's methods back at the run's end.
COUNTING_CONFTEST = textwrap.dedent("""\
    import json
    from collections import Counter

    from pytest_mlrepro.pipeline import Decode, Resize

    CALLS = Counter()
    _decode, _resize = Decode.decode, Resize.apply

    def _counting_decode(self, data, sample):
        CALLS["decode"] += 1
        return _decode(self, data, sample)

    def _counting_resize(self, t):
        CALLS["resize"] += 1
        return _resize(self, t)

    Decode.decode = _counting_decode
    Resize.apply = _counting_resize

    def pytest_sessionfinish(session):
        worker = getattr(session.config, "workerinput", {}).get("workerid", "")
        if worker or not hasattr(session.config, "workerinput"):
            with open(f"calls{worker}.json", "w") as fh:
                json.dump(CALLS, fh)

    def pytest_unconfigure(config):
        Decode.decode, Resize.apply = _decode, _resize
    """)


def bicubic(text: str) -> str:
    assert "method: bilinear" in text
    return text.replace("method: bilinear", "method: bicubic")


def calls(project: Project) -> dict[str, int]:
    return dict(json.loads((project.path / "calls.json").read_text()))


def recorded_twins(serial_project: Project) -> Project:
    """Two identical manifests (``first``, ``second``) with their goldens, their decodes and
    resizes counted."""
    project = serial_project.make(
        {
            "first.yaml": serial_project.manifest("first"),
            "second.yaml": serial_project.manifest("second"),
        }
    )
    (project.path / "conftest.py").write_text(COUNTING_CONFTEST)
    project.run("manifests", "--mlrepro-update").assert_outcomes(passed=2)
    return project


def test_identical_pipelines_decode_once_and_one_parameter_apart_is_not_shared(
    serial_project: Project,
) -> None:
    project = serial_project.make(
        {
            "first.yaml": serial_project.manifest("first"),
            "second.yaml": serial_project.manifest("second"),
            "bicubic.yaml": bicubic(serial_project.manifest("bicubic")),
        }
    )
    (project.path / "conftest.py").write_text(COUNTING_CONFTEST)
    images = 24  # helpers.N_SAMPLES

    project.run("manifests", "--mlrepro-update").assert_outcomes(passed=3)
    together = {n: project.golden(n).read_text() for n in ("first", "second", "bicubic")}
    first, other = (json.loads(together[n]) for n in ("first", "bicubic"))
    assert first["samples"] != other["samples"], "bicubic got the bilinear tensors"

    # Compared (recording also traces a few samples step by step for the golden: not counted
    # here): one decode per image for the three; one resize per image for the two bilinear
    # manifests (the second reads the first's resized image), and the bicubic one's own.
    project.run("manifests").assert_outcomes(passed=3)
    assert calls(project) == {"decode": images, "resize": 2 * images}

    for name in together:
        # Alone (nothing to share with), each manifest decodes and resizes every image itself...
        project.run(f"manifests/{name}.yaml").assert_outcomes(passed=1)
        assert calls(project) == {"decode": images, "resize": images}
        # ...and records the golden it recorded in the shared session, byte for byte.
        project.golden(name).unlink()
        update = project.run(f"manifests/{name}.yaml", "--mlrepro-update")
        update.assert_outcomes(passed=1)
        assert project.golden(name).read_text() == together[name]


def test_the_shared_pass_is_the_first_items_account_of_its_own(serial_project: Project) -> None:
    """The first item through a shared prefix computes it for every item, up front, as its
    ``shared preprocessing`` phase (a one-time cost of the session); the items after it only
    run the pipeline's own last steps."""
    project = recorded_twins(serial_project)
    results = project.path / "results.json"
    project.run("manifests", f"--mlrepro-json={results}").assert_outcomes(passed=2)
    assert calls(project) == {"decode": 24, "resize": 24}
    rows = {row["manifest"]: row for row in json.loads(results.read_text())["results"]}
    first, second = (rows[name]["timing"] for name in ("first", "second"))
    assert "shared preprocessing" in first["phases"]
    assert "shared preprocessing" not in second["phases"]
    for timing in (first, second):
        assert "preprocessing" in timing["phases"]  # the own last steps, batch by batch
    # The pass is a part of the payer's call (that the phases add up to the call is
    # test_phase_account's; on items this small, under load, the hooks outside the clock are
    # milliseconds, a timing, not this behaviour).
    assert 0 < first["phases"]["shared preprocessing"]["wall"] <= first["call"]
    # Nothing to share with: no shared pass.
    project.run("manifests/first.yaml", f"--mlrepro-json={results}").assert_outcomes(passed=1)
    (alone,) = json.loads(results.read_text())["results"]
    assert "shared preprocessing" not in alone["timing"]["phases"]


def test_deselected_items_are_not_planned_for(serial_project: Project) -> None:
    """With ``-k`` leaving one of two identical manifests, the one item decodes and resizes each
    image once, as alone; with both, still once."""
    project = recorded_twins(serial_project)
    project.run("manifests", "-k", "first").assert_outcomes(passed=1, deselected=1)
    assert calls(project) == {"decode": 24, "resize": 24}
    project.run("manifests").assert_outcomes(passed=2)
    assert calls(project) == {"decode": 24, "resize": 24}


def test_no_memory_for_sharing_preprocesses_each_manifest_alone(serial_project: Project) -> None:
    project = recorded_twins(serial_project)
    off = project.run("manifests", "-o", "mlrepro_preprocessing_memory=0")
    off.assert_outcomes(passed=2)
    assert calls(project) == {"decode": 48, "resize": 48}
    bad = project.run("manifests", "-o", "mlrepro_preprocessing_memory=lots")
    assert "mlrepro_preprocessing_memory: expected a whole number, got 'lots'" in bad.stderr.str()


def test_under_xdist_loadgroup_one_data_sets_items_share_a_worker(serial_project: Project) -> None:
    project = recorded_twins(serial_project)
    run = project.run("manifests", "-n", "2", "--dist", "loadgroup", subprocess=True)
    run.assert_outcomes(passed=2)
    per_worker = [json.loads(f.read_text()) for f in project.path.glob("calls?*.json")]
    assert len(per_worker) == 2
    # One worker ran both items, decoding and resizing each image once; the other ran none.
    assert sorted(c.get("decode", 0) for c in per_worker) == [0, 24]
    assert sorted(c.get("resize", 0) for c in per_worker) == [0, 24]
