"""The step fingerprints' comparison (diagnosis/_step_fingerprints.py) on a probe that no longer
decodes: it says why it cannot compare in the report's note, never raises, so that the rest of
a drift's diagnosis stands. And whether a golden's step probes are this run's (what enrichment
asks before it adds layer fingerprints)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from pytest_mlrepro.data import Sample
from pytest_mlrepro.diagnosis._step_fingerprints import compare_steps, record, same_outputs
from pytest_mlrepro.pipeline import Decode, Invert
from pytest_mlrepro.report._diagnosis_lead import step_note_words


def test_a_probe_that_no_longer_decodes_is_said_not_raised(tmp_path: Path) -> None:
    path = tmp_path / "a.png"
    Image.fromarray(np.full((4, 4, 3), 7, np.uint8)).save(path)
    sample = Sample("a.png", path, 0)
    steps = (Decode(),)
    probes = record(steps, [sample], 1)
    assert probes is not None and probes["samples"] == ["a.png"]
    same = compare_steps(probes, steps, [sample], recorded_steps=steps)
    assert same.note is None and same.first is None and same.environment_step is None
    path.write_bytes(b"not an image")
    broken = compare_steps(probes, steps, [sample], recorded_steps=steps)
    said = step_note_words(broken.note or "", broken.error)
    assert broken.note == "error" and said.startswith("the step probes could not be traced: "), said
    assert "a.png" in said and broken.steps == []


def test_step_probes_are_the_same_outputs_only_when_every_step_hashes_alike(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.png"
    Image.fromarray(np.full((4, 4), 7, np.uint8)).save(path)
    sample = Sample("a.png", path, 0)
    steps = (Decode(mode="L"),)
    golden = record(steps, [sample], 1)
    fresh = record(steps, [sample], 1)
    assert golden is not None and fresh is not None
    assert same_outputs(golden, fresh)
    # The same probe and steps, a step output that is not the recorded one.
    tampered = [[*row[:3], {**row[3], "sha256": "0" * 16}] for row in golden["fingerprints"]]
    assert not same_outputs({**golden, "fingerprints": tampered}, fresh)
    assert not same_outputs({**golden, "fingerprints": []}, fresh)
    # Other steps, another format, or no probes at all.
    other = record((*steps, Invert()), [sample], 1)
    assert other is not None and not same_outputs(other, fresh)
    assert not same_outputs({**golden, "format": 0}, fresh)
    assert not same_outputs(None, fresh)
