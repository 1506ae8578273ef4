"""A data change is named as a data change.

A golden records the sha256 of every file it was measured on (its ``data`` block); a drift whose
files or labels changed is named as a data change, first, and files re-encoded are named as
re-encodings of the same pictures. A golden without the block still loads; a malformed block is
refused. Through pytester runs (in-process) of the tiny project of helpers.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import LOOSE, BareProject, lead_of, sha256, verdicts

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")


def test_a_golden_records_the_files_it_was_measured_on(bare: BareProject) -> None:
    bare.manifest("tiny_onnx")
    bare.run("--mlrepro-update").assert_outcomes(passed=1)
    golden = bare.golden_json("tiny_onnx")
    files = sorted(p for p in bare.data().iterdir() if p.suffix == ".png")
    assert golden["data"] == {p.name: sha256(p) for p in files}
    # Reviewable: one file a line.
    text = bare.golden("tiny_onnx").read_text()
    assert f'    "img00.png": "{sha256(files[0])}",\n' in text


def test_a_changed_file_is_named_as_a_data_change_first(bare: BareProject) -> None:
    bare.manifest("tiny_onnx")
    bare.run("--mlrepro-update").assert_outcomes(passed=1)
    golden = bare.golden_json("tiny_onnx")
    # A step probe whose class is red or blue: swapping its channels changes its prediction
    # (and its decoded pixels, which the step fingerprints alone would blame on the decoder).
    name = next(s for s in golden["probes"]["samples"] if int(s[3:5]) % 3 != 1)
    from PIL import Image

    path = bare.data() / name
    pixels = np.asarray(Image.open(path).convert("RGB"))[:, :, ::-1]
    Image.fromarray(np.ascontiguousarray(pixels)).save(path)
    bare.rewrite_checksums()
    # The golden was also recorded under another ONNX Runtime: an unrelated difference.
    golden["environment"]["frameworks"] = {"onnxruntime": "0.0.1"}
    bare.golden("tiny_onnx").write_text(json.dumps(golden))
    result = bare.run()
    result.assert_outcomes(failed=1)
    change = (
        f"the data changed since the golden was recorded: 1 file of 24 has other content "
        f"(sha256) than the golden's ({name})"
    )
    result.stdout.fnmatch_lines(
        [
            "*manifests/tiny_onnx.yaml [[]cpu]: results drifted from the golden (*)",
            f"  {change}",
            "diagnosis (*",
            "  Likely cause: the data*",
            "",
            "  the data against the golden's:",
            f"    1 file of 24 has other content (sha256) than the golden's ({name})",
        ]
    )
    assert lead_of(result) == (
        f"Likely cause: the data — 1 file of 24 has other content (sha256) than the golden's "
        f"({name}); every sample whose prediction changed (1) is among them."
    )


def test_swapped_labels_are_named_as_a_data_change(bare: BareProject) -> None:
    bare.manifest("tiny_onnx")
    bare.run("--mlrepro-update").assert_outcomes(passed=1)
    labels = bare.data() / "labels.csv"
    text = labels.read_text()
    labels.write_text(text.replace("img00.png,0", "img00.png,X").replace(
        "img01.png,1", "img01.png,0").replace("img00.png,X", "img00.png,1"))  # fmt: skip
    bare.rewrite_checksums()
    result = bare.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*results drifted from the golden (top-1 accuracy outside tolerance)",
            "  the data changed since the golden was recorded: the label of 2 samples of 24 "
            "changed (img00.png 0 → 1, img01.png 1 → 0)",
        ]
    )
    assert lead_of(result) == (
        "Likely cause: the data — the label of 2 samples of 24 changed (img00.png 0 → 1, "
        "img01.png 1 → 0); every prediction is the golden's: the accuracy moved with the labels."
    )


def test_one_label_changed_within_tolerance_fails_as_a_data_change(bare: BareProject) -> None:
    """One label changed (the checksum list updated) moves the accuracy inside every
    tolerance; a golden measured on other data is not a comparison of the same thing, so the
    item fails, named as a data change with the sample concerned, as an added sample does.
    --mlrepro-update re-records it."""
    bare.manifest("tiny_onnx", extra=LOOSE)
    bare.run("--mlrepro-update").assert_outcomes(passed=1)
    labels = bare.data() / "labels.csv"
    labels.write_text(labels.read_text().replace("img05.png,2", "img05.png,0"))
    bare.rewrite_checksums()
    result = bare.run()
    result.assert_outcomes(failed=1)
    assert verdicts(result)["tiny_onnx"] == "data changed"
    result.stdout.fnmatch_lines(
        [
            "*manifests/tiny_onnx.yaml [[]cpu]: the data changed since the golden was recorded: "
            "the label of 1 sample of 24 changed (img05.png 2 → 0).",
            "  The results are within tolerance (top-1 *), but a golden measured on other data "
            "is not a comparison of the same thing.",
        ]
    )
    assert lead_of(result).startswith("Likely cause: the data — the label of 1 sample of 24")
    updated = bare.run("--mlrepro-update")
    assert verdicts(updated)["tiny_onnx"] == "golden updated (data changed)"
    assert verdicts(bare.run())["tiny_onnx"] == "pass"


def test_a_replaced_file_within_tolerance_fails_as_a_data_change(bare: BareProject) -> None:
    bare.manifest("tiny_onnx", extra=LOOSE)
    bare.run("--mlrepro-update").assert_outcomes(passed=1)
    from PIL import Image

    path = bare.data() / "img03.png"
    pixels = np.asarray(Image.open(path).convert("RGB")).copy()
    pixels[0, 0] ^= 1  # one pixel: no prediction moves
    Image.fromarray(pixels).save(path)
    bare.rewrite_checksums()
    result = bare.run()
    result.assert_outcomes(failed=1)
    assert verdicts(result)["tiny_onnx"] == "data changed"
    result.stdout.fnmatch_lines(
        ["*the data changed since the golden was recorded: 1 file of 24 has other content "
         "(sha256) than the golden's (img03.png).*"]
    )  # fmt: skip


def test_an_old_golden_without_the_data_block_passes_and_an_update_adds_it(
    bare: BareProject,
) -> None:
    bare.manifest("tiny_onnx")
    bare.run("--mlrepro-update").assert_outcomes(passed=1)
    golden = bare.golden_json("tiny_onnx")
    golden.pop("data", None)  # as recorded before goldens kept it
    bare.golden("tiny_onnx").write_text(json.dumps(golden, indent=2))
    plain = bare.run()
    plain.assert_outcomes(passed=1)
    assert "data" not in bare.golden_json("tiny_onnx")  # a plain run never writes
    updated = bare.run("--mlrepro-update")
    updated.assert_outcomes(passed=1)
    assert verdicts(updated)["tiny_onnx"] == "golden updated (data identity added)"
    assert "img00.png" in bare.golden_json("tiny_onnx")["data"]
    assert verdicts(bare.run("--mlrepro-update"))["tiny_onnx"] == "pass"  # once


def test_a_malformed_data_block_is_refused(bare: BareProject) -> None:
    bare.manifest("tiny_onnx")
    bare.run("--mlrepro-update").assert_outcomes(passed=1)
    golden = bare.golden_json("tiny_onnx")
    golden["data"]["img00.png"] = "not a digest"
    bare.golden("tiny_onnx").write_text(json.dumps(golden, indent=2))
    result = bare.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*golden/tiny_onnx.json:*: data.img00.png: expected a sha256 (64 hex digits)*"]
    )


@pytest.mark.parametrize(
    ("fmt", "says"),
    [
        ("PNG", "decode to the very same pixels as the golden's (re-encoded losslessly"),
        ("JPEG", "are the same pictures re-encoded: same size, block means within"),
    ],
)
def test_files_re_encoded_are_named_as_re_encodings_of_the_same_pictures(
    bare: BareProject, fmt: str, says: str
) -> None:
    """Data that changed by re-encoding (losslessly under --mlrepro-strict, or as JPEG) is named
    that way,
    from the decoded probes against the golden's decode fingerprints: the most specific cause
    the evidence supports, beside the list of changed files."""
    from PIL import Image

    bare.manifest("tiny_onnx", extra=LOOSE)
    bare.run("--mlrepro-update").assert_outcomes(passed=1)
    for path in sorted(bare.data().glob("*.png")):
        with Image.open(path) as image:
            pixels = image.convert("RGB")
        if fmt == "PNG":  # the same pixels, other bytes
            pixels.save(path, format="PNG", compress_level=1, pnginfo=None)
        else:
            pixels.save(path, format="JPEG", quality=97, subsampling=0)
    bare.rewrite_checksums()
    if fmt == "PNG":
        # The same pixels are no data change (issue 33): the item passes with a note naming
        # the files; --mlrepro-strict keeps every byte change a data change, named as below.
        passed = bare.run()
        passed.assert_outcomes(passed=1)
        passed.stdout.fnmatch_lines(["*24 files of the data changed bytes (sha256) but decode*"])
    result = bare.run(*(["--mlrepro-strict"] if fmt == "PNG" else []))
    result.assert_outcomes(failed=1)
    assert verdicts(result)["tiny_onnx"] == "data changed"
    lead = lead_of(result)
    assert lead.startswith("Likely cause: the data — 24 files of 24 have other content"), lead
    assert says in lead, lead
