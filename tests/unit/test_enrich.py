"""What an enrichment adds to a golden (accuracy/_enrich.py): only missing evidence, each piece
only where it describes what the golden describes, and never a figure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import make_images, manifest_text

from pytest_mlrepro.accuracy._enrich import enrich
from pytest_mlrepro.data import Sample
from pytest_mlrepro.goldens import Golden, Results
from pytest_mlrepro.manifest import Manifest, parse_manifest
from pytest_mlrepro.report import accuracy_words


@pytest.fixture
def tiny(tmp_path: Path) -> tuple[Manifest, list[Sample]]:
    make_images(tmp_path / "data", count=6)
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "tiny.onnx").write_bytes(b"not needed: no model runs here")
    text = manifest_text("tiny", assets=tmp_path)
    manifest = parse_manifest(yaml.safe_load(text), "tiny.yaml", {})
    samples = [
        Sample(p.name, p, i % 3) for i, p in enumerate(sorted((tmp_path / "data").glob("*.png")))
    ]
    return manifest, samples


def golden_of(manifest: Manifest, samples: list[Sample], environment: dict[str, object]) -> Golden:
    n = len(samples)
    results = Results(
        tuple(s.id for s in samples),
        np.asarray([s.label for s in samples]),
        np.tile(np.arange(3), (n, 1)),
        np.tile([0.5, 0.3, 0.2], (n, 1)),
    )
    return Golden("tiny", manifest.normalized(), environment, results)


def test_missing_evidence_is_added_and_a_foreign_environment_is_not(
    tiny: tuple[Manifest, list[Sample]],
) -> None:
    manifest, samples = tiny
    golden = golden_of(manifest, samples, {"cpu": "Recorded CPU", "python": "3.11.7"})
    now = {"cpu": "This CPU", "python": "3.11.7", "cpu_flags": ["avx2"]}
    files = {s.id: "0" * 64 for s in samples}
    found = enrich(golden, manifest, samples, None, now, files, 4)
    assert found.golden is not None
    assert [accuracy_words(e) for e in found.added] == [
        "step fingerprints", "data checksums (6 files)", "decoded-pixel identities (6 files)"
    ]  # fmt: skip
    # The CPU flags of another machine beside the recorded CPU would mislead: left out.
    assert [accuracy_words(e) for e in found.left_out] == [
        "environment fields cpu_flags (this run's environment is not the recording's: cpu differ)"
    ]
    assert found.golden.environment == golden.environment
    assert found.golden.results is golden.results and found.golden.manifest is golden.manifest
    assert found.golden.probes is not None and len(found.golden.probes["samples"]) == 4
    assert found.golden.pixels is not None and set(found.golden.pixels) == set(files)

    # The same environment: the missing fields are added, the recorded ones kept.
    same = dict(now, cpu="Recorded CPU")
    again = enrich(found.golden, manifest, samples, None, same, files, 4)
    assert [accuracy_words(e) for e in again.added] == ["environment fields (cpu_flags)"]
    assert again.golden is not None
    assert again.golden.environment == {**golden.environment, "cpu_flags": ["avx2"]}
    # Nothing left to add: no golden to write.
    complete = enrich(again.golden, manifest, samples, None, same, files, 4)
    assert complete.golden is None and complete.added == []
