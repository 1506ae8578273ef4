"""Goldens gain evidence without being re-recorded, and byte changes that are not data changes.

* ``--mlrepro-enrich``: a run that reproduces a golden recorded before layer fingerprints (and
  pixel identities, and environment fields) adds them and changes no figure; a drifting run is
  refused and leaves the file as it was; the enriched golden then names a damaged layer.
* A file whose bytes changed but whose decoded pixels are the golden's (a JPEG comment) passes
  with a note naming it; ``--mlrepro-strict`` fails it as before; changed pixels always fail.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import BareProject, sha256, store_as_jpegs
from machines import identity

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

# What a golden's figures are: everything but the evidence an enrichment may add.
EVIDENCE = ("probes", "pixels", "environment", "data")


def figures(golden: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in golden.items() if k not in EVIDENCE}


def samples_text(path: Path) -> str:
    """The golden's sample lines, as written (byte for byte)."""
    text = path.read_text()
    return text[text.index('  "samples": [') :]


def as_older_golden(bare: BareProject, name: str) -> None:
    """The recorded golden as an older release wrote it: step probes but no layer
    fingerprints, no pixel identities, and an environment without the CPU flags."""
    from pytest_mlrepro.goldens import read, write

    path = bare.golden(name)
    golden = read(path)
    assert golden is not None
    probes = {k: v for k, v in (golden.probes or {}).items() if k != "layers"}
    environment = {k: v for k, v in golden.environment.items() if k != "cpu_flags"}
    import dataclasses

    write(path, dataclasses.replace(golden, probes=probes, pixels=None, environment=environment))


def with_max(source: Path, target: Path) -> str:
    """The bare model with its first layer changed (channel maxima instead of means)."""
    import onnx

    model = onnx.load(str(source))
    for node in model.graph.node:
        if node.op_type == "ReduceMean":
            node.op_type = "ReduceMax"
    onnx.save(model, str(target))
    return sha256(target)


def test_a_reproducing_run_enriches_an_older_golden_and_a_drifting_one_is_refused(
    bare: BareProject, as_machine: Callable[[str], dict[str, Any]]
) -> None:
    # A fixed machine: the CPU flags that enrichment adds back are its flags, whatever the host
    # shows (a container may hide /proc/cpuinfo's flags).
    as_machine("amd-epyc-avx2")
    bare.manifest("tiny_onnx")
    bare.run("--mlrepro-update").assert_outcomes(passed=1)
    as_older_golden(bare, "tiny_onnx")
    path = bare.golden("tiny_onnx")
    before, before_samples = json.loads(path.read_text()), samples_text(path)
    assert "layers" not in before["probes"] and "pixels" not in before

    # A drifting run: refused, the file left byte for byte as it was.
    older = path.read_bytes()
    sha = with_max(bare.path / "models" / "tiny.onnx", bare.path / "models" / "tiny_max.onnx")
    bare.manifest("tiny_onnx", model_path="../models/tiny_max.onnx", sha=sha)
    refused = bare.run("--mlrepro-enrich", "--mlrepro-no-diagnose")
    refused.assert_outcomes(failed=1)
    refused.stdout.fnmatch_lines(["*golden not enriched*this run does not reproduce it*"])
    assert path.read_bytes() == older

    # The golden's own model again: the run reproduces it and adds only evidence.
    bare.manifest("tiny_onnx")
    result = bare.run("--mlrepro-enrich")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*golden*tiny_onnx.json enriched with layer fingerprints (3 layers)*no figure changed*"]
    )
    after = json.loads(path.read_text())
    assert figures(after) == figures(before)
    assert samples_text(path) == before_samples  # the figures' very bytes
    assert [row[:2] for row in after["probes"]["layers"]["rows"]] == [
        ["means", "ReduceMean"], ["flat", "Flatten"], ["logits", "Mul"]
    ]  # fmt: skip
    assert set(after["pixels"]) == set(before["data"])
    assert after["environment"]["cpu_flags"] == identity("amd-epyc-avx2")["cpu_flags"]
    # Nothing left to add: the next enrichment writes nothing.
    enriched = path.read_bytes()
    again = bare.run("--mlrepro-enrich")
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["*has every evidence this run records*"])
    assert path.read_bytes() == enriched

    # The damaged model is now named by its layer.
    bare.manifest("tiny_onnx", model_path="../models/tiny_max.onnx", sha=sha)
    named = bare.run()
    named.assert_outcomes(failed=1)
    named.stdout.fnmatch_lines(
        ["    the first layer whose output differs is ReduceMax 'means' (layer 1 of 3:*"]
    )


def test_enrich_and_update_together_are_a_usage_error(bare: BareProject) -> None:
    bare.manifest("tiny_onnx")
    result = bare.run("--mlrepro-enrich", "--mlrepro-update")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--mlrepro-enrich and --mlrepro-update cannot be combined*"])


def _add_comment(path: Path, text: bytes) -> None:
    """A JPEG comment (COM segment) inserted after the start of image: the entropy-coded
    data, and so the decoded pixels, stay as they were."""
    raw = path.read_bytes()
    assert raw[:2] == b"\xff\xd8"
    segment = b"\xff\xfe" + (len(text) + 2).to_bytes(2, "big") + text
    path.write_bytes(raw[:2] + segment + raw[2:])


def test_a_jpeg_comment_passes_with_a_note_and_fails_under_strict(bare: BareProject) -> None:
    store_as_jpegs(bare)
    bare.manifest("tiny_onnx")
    bare.run("--mlrepro-update").assert_outcomes(passed=1)
    assert "pixels" in bare.golden_json("tiny_onnx")
    for name in ("img03.jpg", "img11.jpg"):
        _add_comment(bare.data() / name, b"edited by a photo manager")
    bare.rewrite_checksums()
    golden = bare.golden("tiny_onnx").read_bytes()

    result = bare.run()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*tiny_onnx ?cpu?: 2 files of the data changed bytes (sha256) but decode to the "
            "golden's very pixels (img03.jpg, img11.jpg): not a data change. Refresh the "
            "golden's data identity with `pytest manifests/tiny_onnx.yaml --mlrepro-enrich`*"
        ]
    )
    strict = bare.run("--mlrepro-strict")
    strict.assert_outcomes(failed=1)
    strict.stdout.fnmatch_lines(["*the data changed since the golden was recorded: 2 files*"])
    assert bare.golden("tiny_onnx").read_bytes() == golden

    # The data identity refreshed by an enrichment: strict passes again.
    bare.run("--mlrepro-enrich").assert_outcomes(passed=1)
    assert bare.golden_json("tiny_onnx")["data"]["img03.jpg"] == sha256(bare.data() / "img03.jpg")
    bare.run("--mlrepro-strict").assert_outcomes(passed=1)


def test_changed_pixels_still_fail_as_a_data_change(bare: BareProject) -> None:
    """One pixel moved by one level: no decode of it is the golden's, whatever the tolerance."""
    from PIL import Image

    bare.manifest("tiny_onnx")
    bare.run("--mlrepro-update").assert_outcomes(passed=1)
    path = bare.data() / "img05.png"
    pixels = __import__("numpy").asarray(Image.open(path)).copy()
    pixels[10, 10, 0] = pixels[10, 10, 0] ^ 1
    Image.fromarray(pixels).save(path)
    bare.rewrite_checksums()
    result = bare.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*the data changed since the golden was recorded: 1 file*"])
    assert "very pixels" not in result.stdout.str()
