"""The step fingerprints' comparison (diagnosis/_step_fingerprints.py) on a probe that no longer
decodes: it says why it cannot compare in the report's note, never raises, so that the rest of
a drift's diagnosis stands."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from pytest_mlrepro.data import Sample
from pytest_mlrepro.diagnosis._step_fingerprints import compare_steps, record
from pytest_mlrepro.pipeline import Decode


def test_a_probe_that_no_longer_decodes_is_said_not_raised(tmp_path: Path) -> None:
    path = tmp_path / "a.png"
    Image.fromarray(np.full((4, 4, 3), 7, np.uint8)).save(path)
    sample = Sample("a.png", path, 0)
    steps = (Decode(),)
    probes = record(steps, [sample], 1)
    assert probes is not None and probes["samples"] == ["a.png"]
    same = compare_steps(probes, steps, [sample], recorded_steps=steps)
    assert same.note == "" and same.first is None and same.environment_step is None
    path.write_bytes(b"not an image")
    broken = compare_steps(probes, steps, [sample], recorded_steps=steps)
    assert broken.note.startswith("the step probes could not be traced: "), broken.note
    assert "a.png" in broken.note and broken.steps == []
