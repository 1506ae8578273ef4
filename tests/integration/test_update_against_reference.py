"""An update says what it did when a reference is declared.

With ``reference:`` declared, ``--mlrepro-update`` does not record results that disagree with
the reference unless ``--mlrepro-update-despite-reference`` asks for it, and a golden that an
update writes is always reported as written; a drifting item still shows the reference check.
Through pytester runs (in-process) of the tiny project of helpers.py.
"""

from __future__ import annotations

import pytest
from helpers import LOOSE, PREPROCESS_BGR, BareProject, verdicts

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

# The reference is the ONNX manifest tiny_onnx; agreement must be exact.
REFERENCE = "reference: {manifest: tiny_onnx, agreement: 1.0, score: 0.00001}\n"



def edited_to_bgr(bare: BareProject) -> bytes:
    """tiny_onnx (the reference) and tiny_edit, both recorded while they agree; then tiny_edit
    decodes BGR, which swaps classes 0 and 2: it drifts and disagrees with its reference.
    Returns tiny_edit's golden as recorded."""
    bare.manifest("tiny_onnx")
    bare.manifest("tiny_edit", extra=REFERENCE)
    bare.run("--mlrepro-update", "-k", "tiny_onnx").assert_outcomes(passed=1)
    bare.run("--mlrepro-update", "-k", "tiny_edit").assert_outcomes(passed=1)
    bare.manifest("tiny_edit", decode=PREPROCESS_BGR, extra=REFERENCE)
    return bare.golden("tiny_edit").read_bytes()


def test_an_update_that_contradicts_the_reference_is_not_recorded(bare: BareProject) -> None:
    before = edited_to_bgr(bare)
    result = bare.run("--mlrepro-update", "-k", "tiny_edit")
    result.assert_outcomes(failed=1)
    assert bare.golden("tiny_edit").read_bytes() == before  # the next run compares with it
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


def test_a_first_recording_that_contradicts_the_reference_is_not_recorded(
    bare: BareProject,
) -> None:
    bare.manifest("tiny_onnx")
    bare.manifest("tiny_bgr", decode=PREPROCESS_BGR, extra=LOOSE + REFERENCE)
    bare.run("--mlrepro-update", "-k", "tiny_onnx").assert_outcomes(passed=1)
    result = bare.run("--mlrepro-update")
    result.assert_outcomes(passed=1, failed=1)
    assert not bare.golden("tiny_bgr").exists()
    result.stdout.fnmatch_lines(
        ["*tiny_bgr.yaml [[]cpu]: golden not recorded (golden/tiny_bgr.json is left as it was):"]
    )
    assert verdicts(result) == {
        "tiny_bgr": "reference disagreement (golden not recorded)",
        "tiny_onnx": "pass",
    }


def test_an_update_despite_the_reference_is_recorded_and_reported_as_written(
    bare: BareProject,
) -> None:
    before = edited_to_bgr(bare)
    result = bare.run("--mlrepro-update", "--mlrepro-update-despite-reference", "-k", "tiny_edit")
    result.assert_outcomes(failed=1)  # written as asked; the disagreement is still a failure
    assert bare.golden("tiny_edit").read_bytes() != before
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
    again = bare.run("-k", "tiny_edit")
    again.assert_outcomes(failed=1)
    assert verdicts(again)["tiny_edit"] == "reference disagreement"


def test_a_golden_written_beside_a_broken_reference_is_reported_as_written(
    bare: BareProject,
) -> None:
    bare.manifest("tiny_onnx")
    bare.manifest("tiny_edit", extra=REFERENCE)
    bare.run("--mlrepro-update", "-k", "tiny_onnx").assert_outcomes(passed=1)
    bare.golden("tiny_onnx").write_text("{")  # the reference's golden no longer parses
    result = bare.run("--mlrepro-update", "-k", "tiny_edit")
    result.assert_outcomes(failed=1)  # the reference could not be checked: a failure
    assert bare.golden("tiny_edit").exists()
    result.stdout.fnmatch_lines(
        [
            "manifests/tiny_edit.yaml [[]cpu]: golden recorded: golden/tiny_edit.json",
            "*tiny_onnx.json:1: not valid JSON*",
        ]
    )
    assert verdicts(result)["tiny_edit"] == "golden recorded"


def test_the_opt_in_only_goes_with_an_update(bare: BareProject) -> None:
    bare.manifest("tiny_onnx")
    result = bare.run("--mlrepro-update-despite-reference")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--mlrepro-update-despite-reference only applies with --mlrepro-update*"]
    )


def test_a_drifting_item_still_shows_its_reference_check(bare: BareProject) -> None:
    edited_to_bgr(bare)
    result = bare.run("-k", "tiny_edit", "--mlrepro-no-diagnose")
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
