"""An update says what it did, and a data change is named as a data change (issue 10, items 11
and 12), through pytester runs (in-process) of the tiny project of helpers.py.

* With ``reference:`` declared, ``--mlrepro-update`` does not record results that disagree with
  the reference unless ``--mlrepro-update-despite-reference`` asks for it, and a golden that an
  update writes is always reported as written; a drifting item still shows the reference check.
* A golden records the sha256 of every file it was measured on (its ``data`` block); a drift
  whose files or labels changed is named as a data change, first; a drift that keeps every
  ranking and only moves the scores is named as a score-transform change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import (
    LOOSE,
    PREPROCESS_BGR,
    QUIET,
    checksum_list,
    make_assets,
    make_project,
    manifest_text,
    sha256,
)

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

# The reference is the ONNX manifest tiny_onnx; agreement must be exact.
REFERENCE = "reference: {manifest: tiny_onnx, agreement: 1.0, score: 0.00001}\n"


@pytest.fixture(scope="module")
def assets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Images, labels and the tiny ONNX model, made once for this module."""
    return make_assets(tmp_path_factory.mktemp("trust-assets"), torchscript=False)


class Tiny:
    """The tiny project in ``pytester.path``, run in-process."""

    def __init__(self, pytester: pytest.Pytester, assets: Path) -> None:
        self.pytester = pytester
        self.path = pytester.path
        self.assets = assets
        make_project(self.path, assets, manifests={})

    def manifest(self, name: str, **kwargs: Any) -> None:
        text = manifest_text(name, assets=self.assets, **kwargs)
        (self.path / "manifests" / f"{name}.yaml").write_text(text)

    def golden(self, name: str) -> Path:
        return self.path / "golden" / f"{name}.json"

    def golden_json(self, name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.golden(name).read_text())
        return data

    def data(self) -> Path:
        return self.path / "data" / "tiny"

    def rewrite_checksums(self) -> None:
        """The checksum list made anew: the project's owner accepts the edited data."""
        (self.path / "manifests" / "tiny.sha256").write_text(checksum_list(self.data()))

    def run(self, *args: str) -> pytest.RunResult:
        return self.pytester.runpytest(*QUIET, *args)


@pytest.fixture
def tiny(pytester: pytest.Pytester, assets: Path, _mlrepro_env: None) -> Tiny:
    return Tiny(pytester, assets)


def verdicts(result: pytest.RunResult) -> dict[str, str]:
    """The summary table's verdict column, by manifest."""
    lines = result.stdout.lines
    start = next(
        i for i, line in enumerate(lines) if line.startswith("manifest ") and "verdict" in line
    )
    column = lines[start].index("verdict")
    out = {}
    for line in lines[start + 1 :]:
        if not line.strip() or line.startswith("="):
            break
        out[line.split()[0]] = line[column:].strip()
    return out


def lead_of(result: pytest.RunResult) -> str:
    """The diagnosis's lead sentence, its wrapped lines joined."""
    text = result.stdout.str().split("\ndiagnosis (", 1)[1]
    return " ".join(line.strip() for line in text.split("\n\n")[0].splitlines()[1:])


# --- 11. an update says what it did -------------------------------------------------------


def edited_to_bgr(tiny: Tiny) -> bytes:
    """tiny_onnx (the reference) and tiny_edit, both recorded while they agree; then tiny_edit
    decodes BGR, which swaps classes 0 and 2: it drifts and disagrees with its reference.
    Returns tiny_edit's golden as recorded."""
    tiny.manifest("tiny_onnx")
    tiny.manifest("tiny_edit", extra=REFERENCE)
    tiny.run("--mlrepro-update", "-k", "tiny_onnx").assert_outcomes(passed=1)
    tiny.run("--mlrepro-update", "-k", "tiny_edit").assert_outcomes(passed=1)
    tiny.manifest("tiny_edit", decode=PREPROCESS_BGR, extra=REFERENCE)
    return tiny.golden("tiny_edit").read_bytes()


def test_an_update_that_contradicts_the_reference_is_not_recorded(tiny: Tiny) -> None:
    before = edited_to_bgr(tiny)
    result = tiny.run("--mlrepro-update", "-k", "tiny_edit")
    result.assert_outcomes(failed=1)
    assert tiny.golden("tiny_edit").read_bytes() == before  # the next run compares with it
    result.stdout.fnmatch_lines(
        [
            "*manifests/tiny_edit.yaml [[]cpu]: disagrees with its reference 'tiny_onnx'*",
            "manifests/tiny_edit.yaml [[]cpu]: golden not updated (golden/tiny_edit.json is "
            "left as it was):",
            "  the results disagree with the manifest's reference. If they are right and the "
            "reference is not,",
            "  record them anyway with",
            "    pytest manifests/tiny_edit.yaml --mlrepro-update "
            "--mlrepro-update-despite-reference",
        ]
    )
    assert verdicts(result)["tiny_edit"] == "reference disagreement (golden not updated)"


def test_a_first_recording_that_contradicts_the_reference_is_not_recorded(tiny: Tiny) -> None:
    tiny.manifest("tiny_onnx")
    tiny.manifest("tiny_bgr", decode=PREPROCESS_BGR, extra=LOOSE + REFERENCE)
    tiny.run("--mlrepro-update", "-k", "tiny_onnx").assert_outcomes(passed=1)
    result = tiny.run("--mlrepro-update")
    result.assert_outcomes(passed=1, failed=1)
    assert not tiny.golden("tiny_bgr").exists()
    result.stdout.fnmatch_lines(
        ["*tiny_bgr.yaml [[]cpu]: golden not recorded (golden/tiny_bgr.json is left as it was):"]
    )
    assert verdicts(result) == {
        "tiny_bgr": "reference disagreement (golden not recorded)",
        "tiny_onnx": "pass",
    }


def test_an_update_despite_the_reference_is_recorded_and_reported_as_written(
    tiny: Tiny,
) -> None:
    before = edited_to_bgr(tiny)
    result = tiny.run("--mlrepro-update", "--mlrepro-update-despite-reference", "-k", "tiny_edit")
    result.assert_outcomes(failed=1)  # written as asked; the disagreement is still a failure
    assert tiny.golden("tiny_edit").read_bytes() != before
    result.stdout.fnmatch_lines(
        [
            "*manifests/tiny_edit.yaml [[]cpu]: golden updated despite reference disagreement: "
            "golden/tiny_edit.json",
            "*manifests/tiny_edit.yaml [[]cpu]: disagrees with its reference 'tiny_onnx'*",
        ]
    )
    assert verdicts(result)["tiny_edit"] == "golden updated despite reference disagreement"
    result.stdout.fnmatch_lines(["tiny_edit [[]cpu] vs tiny_onnx: top-1 agreement 0.3333*"])
    # The next run compares with what was written: no drift, the disagreement alone.
    again = tiny.run("-k", "tiny_edit")
    again.assert_outcomes(failed=1)
    assert verdicts(again)["tiny_edit"] == "reference disagreement"


def test_a_golden_written_beside_a_broken_reference_is_reported_as_written(tiny: Tiny) -> None:
    tiny.manifest("tiny_onnx")
    tiny.manifest("tiny_edit", extra=REFERENCE)
    tiny.run("--mlrepro-update", "-k", "tiny_onnx").assert_outcomes(passed=1)
    tiny.golden("tiny_onnx").write_text("{")  # the reference's golden no longer parses
    result = tiny.run("--mlrepro-update", "-k", "tiny_edit")
    result.assert_outcomes(failed=1)  # the reference could not be checked: a failure
    assert tiny.golden("tiny_edit").exists()
    result.stdout.fnmatch_lines(
        [
            "manifests/tiny_edit.yaml [[]cpu]: golden recorded: golden/tiny_edit.json",
            "*tiny_onnx.json:1: not valid JSON*",
        ]
    )
    assert verdicts(result)["tiny_edit"] == "golden recorded"


def test_the_opt_in_only_goes_with_an_update(tiny: Tiny) -> None:
    tiny.manifest("tiny_onnx")
    result = tiny.run("--mlrepro-update-despite-reference")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--mlrepro-update-despite-reference only applies with --mlrepro-update*"]
    )


def test_a_drifting_item_still_shows_its_reference_check(tiny: Tiny) -> None:
    edited_to_bgr(tiny)
    result = tiny.run("-k", "tiny_edit", "--mlrepro-no-diagnose")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*manifests/tiny_edit.yaml [[]cpu]: results drifted from the golden*",
            "reference check:",
            "*manifests/tiny_edit.yaml [[]cpu]: disagrees with its reference 'tiny_onnx'*",
            "*= mlrepro reference agreement =*",
            "tiny_edit [[]cpu] vs tiny_onnx: top-1 agreement 0.3333 over 24 samples*: disagree",
        ]
    )
    assert verdicts(result)["tiny_edit"] == "drift"


# --- 12. data identity --------------------------------------------------------------------


def test_a_golden_records_the_files_it_was_measured_on(tiny: Tiny) -> None:
    tiny.manifest("tiny_onnx")
    tiny.run("--mlrepro-update").assert_outcomes(passed=1)
    golden = tiny.golden_json("tiny_onnx")
    files = sorted(p for p in tiny.data().iterdir() if p.suffix == ".png")
    assert golden["data"] == {p.name: sha256(p) for p in files}
    # Reviewable: one file a line.
    text = tiny.golden("tiny_onnx").read_text()
    assert f'    "img00.png": "{sha256(files[0])}",\n' in text


def test_a_changed_file_is_named_as_a_data_change_first(tiny: Tiny) -> None:
    tiny.manifest("tiny_onnx")
    tiny.run("--mlrepro-update").assert_outcomes(passed=1)
    golden = tiny.golden_json("tiny_onnx")
    # A step probe whose class is red or blue: swapping its channels changes its prediction
    # (and its decoded pixels, which the step fingerprints alone would blame on the decoder).
    name = next(s for s in golden["probes"]["samples"] if int(s[3:5]) % 3 != 1)
    from PIL import Image

    path = tiny.data() / name
    pixels = np.asarray(Image.open(path).convert("RGB"))[:, :, ::-1]
    Image.fromarray(np.ascontiguousarray(pixels)).save(path)
    tiny.rewrite_checksums()
    # The golden was also recorded under another ONNX Runtime: an unrelated difference.
    golden["environment"]["frameworks"] = {"onnxruntime": "0.0.1"}
    tiny.golden("tiny_onnx").write_text(json.dumps(golden))
    result = tiny.run()
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


def test_swapped_labels_are_named_as_a_data_change(tiny: Tiny) -> None:
    tiny.manifest("tiny_onnx")
    tiny.run("--mlrepro-update").assert_outcomes(passed=1)
    labels = tiny.data() / "labels.csv"
    text = labels.read_text()
    labels.write_text(text.replace("img00.png,0", "img00.png,X").replace(
        "img01.png,1", "img01.png,0").replace("img00.png,X", "img00.png,1"))  # fmt: skip
    tiny.rewrite_checksums()
    result = tiny.run()
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


def test_one_label_changed_within_tolerance_fails_as_a_data_change(tiny: Tiny) -> None:
    """Issue 20: one label changed (the checksum list updated) moves the accuracy inside every
    tolerance; a golden measured on other data is not a comparison of the same thing, so the
    item fails, named as a data change with the sample concerned, as an added sample does.
    --mlrepro-update re-records it."""
    tiny.manifest("tiny_onnx", extra=LOOSE)
    tiny.run("--mlrepro-update").assert_outcomes(passed=1)
    labels = tiny.data() / "labels.csv"
    labels.write_text(labels.read_text().replace("img05.png,2", "img05.png,0"))
    tiny.rewrite_checksums()
    result = tiny.run()
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
    updated = tiny.run("--mlrepro-update")
    assert verdicts(updated)["tiny_onnx"] == "golden updated (data changed)"
    assert verdicts(tiny.run())["tiny_onnx"] == "pass"


def test_a_replaced_file_within_tolerance_fails_as_a_data_change(tiny: Tiny) -> None:
    tiny.manifest("tiny_onnx", extra=LOOSE)
    tiny.run("--mlrepro-update").assert_outcomes(passed=1)
    from PIL import Image

    path = tiny.data() / "img03.png"
    pixels = np.asarray(Image.open(path).convert("RGB")).copy()
    pixels[0, 0] ^= 1  # one pixel: no prediction moves
    Image.fromarray(pixels).save(path)
    tiny.rewrite_checksums()
    result = tiny.run()
    result.assert_outcomes(failed=1)
    assert verdicts(result)["tiny_onnx"] == "data changed"
    result.stdout.fnmatch_lines(
        ["*the data changed since the golden was recorded: 1 file of 24 has other content "
         "(sha256) than the golden's (img03.png).*"]
    )  # fmt: skip


def with_max(source: Path, target: Path) -> str:
    """The tiny model with its first layer changed (channel maxima instead of means)."""
    import onnx

    model = onnx.load(str(source))
    for node in model.graph.node:
        if node.op_type == "ReduceMean":
            node.op_type = "ReduceMax"
    onnx.checker.check_model(model)
    onnx.save(model, str(target))
    return sha256(target)


def test_the_failure_and_mlrepro_diagnose_show_the_layer_section(tiny: Tiny) -> None:
    """Issue 20: a recorded golden keeps layer fingerprints; when the model changed, the failure
    and ``mlrepro diagnose`` name the first layer whose output differs."""
    import os
    import subprocess
    import sys

    tiny.manifest("tiny_onnx")
    tiny.run("--mlrepro-update").assert_outcomes(passed=1)
    layers = tiny.golden_json("tiny_onnx")["probes"]["layers"]
    assert [row[:2] for row in layers["rows"]] == [
        ["means", "ReduceMean"], ["flat", "Flatten"], ["logits", "Mul"]
    ]  # fmt: skip
    # Reviewable: one layer a line.
    assert (
        '        ["means", "ReduceMean", [2, 3, 1, 1], "float32",'
        in tiny.golden("tiny_onnx").read_text()
    )
    sha = with_max(tiny.path / "models" / "tiny.onnx", tiny.path / "models" / "tiny_max.onnx")
    tiny.manifest("tiny_onnx", model_path="../models/tiny_max.onnx", sha=sha)
    result = tiny.run("--mlrepro-html", "report.html")
    result.assert_outcomes(failed=1)
    # The HTML report shows it as a chart of the difference by layer depth.
    page = (tiny.path / "report.html").read_text()
    assert 'alt="difference from the golden by layer depth"' in page
    result.stdout.fnmatch_lines(
        [
            "  the model, layer by layer, on the golden's 2 layer probes:",
            "    3 layers aligned by name",
            "    the first layer whose output differs is ReduceMax 'means' (layer 1 of 3:*",
        ]
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    env.pop("MLREPRO_DATA", None)
    env.pop("MLREPRO_CACHE", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest_mlrepro.cli", "diagnose", "manifests/tiny_onnx.yaml"],
        cwd=tiny.path, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the first layer whose output differs is ReduceMax 'means'" in " ".join(
        done.stdout.split()
    )


def test_an_old_golden_without_the_data_block_passes_and_an_update_adds_it(tiny: Tiny) -> None:
    tiny.manifest("tiny_onnx")
    tiny.run("--mlrepro-update").assert_outcomes(passed=1)
    golden = tiny.golden_json("tiny_onnx")
    golden.pop("data", None)  # as recorded before goldens kept it
    tiny.golden("tiny_onnx").write_text(json.dumps(golden, indent=2))
    plain = tiny.run()
    plain.assert_outcomes(passed=1)
    assert "data" not in tiny.golden_json("tiny_onnx")  # a plain run never writes
    updated = tiny.run("--mlrepro-update")
    updated.assert_outcomes(passed=1)
    assert verdicts(updated)["tiny_onnx"] == "golden updated (data identity added)"
    assert "img00.png" in tiny.golden_json("tiny_onnx")["data"]
    assert verdicts(tiny.run("--mlrepro-update"))["tiny_onnx"] == "pass"  # once


def test_a_malformed_data_block_is_refused(tiny: Tiny) -> None:
    tiny.manifest("tiny_onnx")
    tiny.run("--mlrepro-update").assert_outcomes(passed=1)
    golden = tiny.golden_json("tiny_onnx")
    golden["data"]["img00.png"] = "not a digest"
    tiny.golden("tiny_onnx").write_text(json.dumps(golden, indent=2))
    result = tiny.run()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*golden/tiny_onnx.json:*: data.img00.png: expected a sha256 (64 hex digits)*"]
    )


# --- 12. the score transform --------------------------------------------------------------


def with_softmax(source: Path, target: Path) -> str:
    """The tiny model with a Softmax at its end; returns the new file's sha256."""
    import onnx
    from onnx import helper

    model = onnx.load(str(source))
    graph = model.graph
    output = graph.output[0].name
    for node in graph.node:
        node.output[:] = [f"{name}_logits" if name == output else name for name in node.output]
    graph.node.append(helper.make_node("Softmax", [f"{output}_logits"], [output], axis=1))
    onnx.checker.check_model(model)
    onnx.save(model, str(target))
    return sha256(target)


def test_an_unchanged_ranking_with_moved_scores_names_the_score_transform(tiny: Tiny) -> None:
    tiny.manifest("tiny_onnx")
    tiny.run("--mlrepro-update").assert_outcomes(passed=1)
    # The model now applies its own softmax; the manifest still applies one.
    sha = with_softmax(tiny.path / "models" / "tiny.onnx", tiny.path / "models" / "soft.onnx")
    tiny.manifest("tiny_onnx", model_path="../models/soft.onnx", sha=sha)
    result = tiny.run()
    result.assert_outcomes(failed=1)
    lead = lead_of(result)
    assert lead.startswith("Likely cause: the score transform — the model changed"), lead
    assert (
        "the ranking is identical to the golden's on every sample (top-3 classes in the same "
        "order on all 24), only the scores moved" in lead
    ), lead
    assert (
        "the model's own outputs are already probabilities (non-negative, summing to 1: it "
        "applies its own softmax) and the manifest applies postprocess.softmax on top" in lead
    ), lead
    assert "no known pitfall" not in lead
    assert verdicts(result)["tiny_onnx"] == "drift"


@pytest.mark.parametrize(
    ("fmt", "says"),
    [
        ("PNG", "decode to the very same pixels as the golden's (re-encoded losslessly"),
        ("JPEG", "are the same pictures re-encoded: same size, block means within"),
    ],
)
def test_files_re_encoded_are_named_as_re_encodings_of_the_same_pictures(
    tiny: Tiny, fmt: str, says: str
) -> None:
    """Issue 20: data that changed by re-encoding (losslessly, or as JPEG) is named that way,
    from the decoded probes against the golden's decode fingerprints: the most specific cause
    the evidence supports, beside the list of changed files."""
    from PIL import Image

    tiny.manifest("tiny_onnx", extra=LOOSE)
    tiny.run("--mlrepro-update").assert_outcomes(passed=1)
    for path in sorted(tiny.data().glob("*.png")):
        with Image.open(path) as image:
            pixels = image.convert("RGB")
        if fmt == "PNG":  # the same pixels, other bytes
            pixels.save(path, format="PNG", compress_level=1, pnginfo=None)
        else:
            pixels.save(path, format="JPEG", quality=97, subsampling=0)
    tiny.rewrite_checksums()
    result = tiny.run()
    result.assert_outcomes(failed=1)
    assert verdicts(result)["tiny_onnx"] == "data changed"
    lead = lead_of(result)
    assert lead.startswith("Likely cause: the data — 24 files of 24 have other content"), lead
    assert says in lead, lead
