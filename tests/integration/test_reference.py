"""Cross-framework agreement (``reference:``): the comparison itself on hand-made results, how a
reference is found, and the plugin checking a manifest against another manifest's golden (tiny
project of helpers.py: the TorchScript model against the ONNX model's golden)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import LOOSE, PREPROCESS_BGR, Project, line_of

from pytest_mlrepro.errors import ManifestError
from pytest_mlrepro.goldens._metrics import Results
from pytest_mlrepro.goldens._reference import (
    ReferenceCheck,
    ReferenceGoldenMissing,
    check_reference,
    compare_to_reference,
    resolve_reference,
)
from pytest_mlrepro.manifest._spec import Reference, load_manifest
from pytest_mlrepro.report import explain_reference
from pytest_mlrepro.settings import Settings


def results(ids: list[str], labels: list[int], scores: np.ndarray, k: int = 2) -> Results:
    topk = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return Results(
        ids=tuple(ids),
        labels=np.asarray(labels),
        topk=topk,
        topk_scores=np.take_along_axis(scores, topk, axis=1),
    )


REF_SCORES = np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1], [0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])


def check_of(
    now_scores: np.ndarray, spec: Reference, ids: list[str] | None = None
) -> ReferenceCheck:
    ids = ids or ["a", "b", "c", "d"]
    reference = results(["a", "b", "c", "d"], [0, 1, 2, 1], REF_SCORES)
    now = results(ids, [0, 1, 2, 1][: len(ids)], now_scores)
    comparison, ref_top1, now_top1 = compare_to_reference(reference, now, now_scores)
    return ReferenceCheck(
        "ref", "golden/ref.json", comparison, ref_top1, now_top1, "probability", spec
    )


def test_identical_results_agree() -> None:
    check = check_of(REF_SCORES.copy(), Reference("ref", agreement=1.0, score=0.0, top1=1.0))
    assert check.ok and check.comparison.agreement == 1.0 and check.comparison.max_score_diff == 0.0
    assert check.top1_ratio == 1.0 and check.reference_top1 == 75.0


def test_one_flipped_sample_fails_agreement_and_names_it() -> None:
    now = REF_SCORES.copy()
    now[3] = [0.3, 0.6, 0.1]  # d: class 0 → 1 (and 1 is d's label: accuracy goes up)
    check = check_of(now, Reference("ref", agreement=0.9, score=1.0, top1=0.99))
    assert check.comparison.agreement == 0.75 and check.failures == ["agreement"]
    assert check.top1_ratio == pytest.approx(100 / 75)
    text = explain_reference(check, ["cat", "dog", "fish"])
    assert "disagrees with its reference 'ref' (golden/ref.json): top-1 agreement" in text
    assert "d: reference 0 cat (0.6) → 1 dog (0.6)" in text
    assert "1/4 differ" in text


def test_score_distance_is_over_the_references_top_k() -> None:
    now = REF_SCORES.copy()
    now[1] = [0.1, 0.75, 0.15]  # same top-1; the reference's top-2 (1, then 0 or 2) moved
    check = check_of(now, Reference("ref", agreement=1.0, score=0.01, top1=0.99))
    assert check.comparison.agreement == 1.0
    assert check.comparison.max_score_diff == pytest.approx(0.05)
    assert check.comparison.max_score_diff_id == "b"
    assert check.failures == ["score"]


def test_accuracy_ratio_like_mlperf() -> None:
    now = REF_SCORES.copy()
    now[0] = [0.1, 0.7, 0.2]  # a: right → wrong: 50% against the reference's 75%
    loose = Reference("ref", agreement=0.0, score=1.0, top1=0.99)
    assert check_of(now, loose).failures == ["top1"]
    assert check_of(now, Reference("ref", agreement=0.0, score=1.0, top1=0.6)).ok


def test_only_shared_samples_count_and_none_shared_fails() -> None:
    subset = check_of(REF_SCORES[:2].copy(), Reference("ref"), ids=["a", "b"])
    assert subset.comparison.samples == 2 and subset.ok
    assert subset.reference_top1 == 100.0  # over a and b only
    disjoint = check_of(REF_SCORES[:1].copy(), Reference("ref"), ids=["zz"])
    assert disjoint.failures == ["samples"]


# --- finding the reference --------------------------------------------------------------------

SHA = "ab" * 32


def write(folder: Path, file: str, name: str, extra: str = "", dataset: str = "d") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file
    path.write_text(
        f"name: {name}\n"
        'version: "1"\n'
        "framework: {name: onnxruntime}\n"
        f"model: {{format: onnx, file: {{path: m.onnx, sha256: {SHA}}}}}\n"
        "inputs:\n"
        "  - name: input\n"
        "    layout: NCHW\n"
        "    preprocess: [{decode: {}}, {cast: {dtype: float32}}, {layout: {order: NCHW}}]\n"
        f"dataset: {{name: {dataset}, checksums: d.sha256}}\n" + extra
    )
    return path


def test_reference_by_name_by_file_name_and_by_path(tmp_path: Path) -> None:
    settings = Settings.for_project(tmp_path)
    folder = tmp_path / "manifests"
    write(folder, "b.yaml", "base")
    write(folder, "other.yaml", "renamed_base")
    by_name = load_manifest(write(folder, "x.yaml", "x", "reference: renamed_base\n"))
    assert resolve_reference(by_name, settings).name == "renamed_base"  # found by its name:
    by_path = load_manifest(write(folder, "y.yaml", "y", "reference: b.yaml\n"))
    assert resolve_reference(by_path, settings).name == "base"
    block = load_manifest(write(folder, "z.yaml", "z", "reference: {manifest: base}\n"))
    assert resolve_reference(block, settings).name == "base"


def test_unknown_reference_names_the_line_and_the_known_names(tmp_path: Path) -> None:
    settings = Settings.for_project(tmp_path)
    folder = tmp_path / "manifests"
    write(folder, "b.yaml", "base")
    path = write(folder, "x.yaml", "x", "reference: {manifest: basse, agreement: 0.9}\n")
    with pytest.raises(ManifestError) as info:
        resolve_reference(load_manifest(path), settings)
    line = line_of(path.read_text(), "reference:")
    assert f"x.yaml:{line}: reference.manifest: no manifest named 'basse'" in str(info.value)
    assert "(manifests there: base)" in str(info.value)


def test_reference_on_another_data_set_or_outside_the_project_is_refused(tmp_path: Path) -> None:
    settings = Settings.for_project(tmp_path)
    folder = tmp_path / "manifests"
    write(folder, "b.yaml", "base", dataset="other")
    path = write(folder, "x.yaml", "x", "reference: base\n")
    with pytest.raises(ManifestError, match="evaluates data set 'other', this manifest 'd'"):
        resolve_reference(load_manifest(path), settings)
    outside = write(folder, "y.yaml", "y", "reference: ../../elsewhere.yaml\n")
    with pytest.raises(ManifestError, match="outside the project"):
        resolve_reference(load_manifest(outside), settings)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("reference: x\n", "reference: a manifest cannot be its own reference"),
        ("reference: {manifest: b, agreement: 1.5}\n", "reference.agreement: is a fraction"),
        ("reference: {manifest: b, scor: 0.1}\n", "reference.scor: unknown key (did you mean"),
        ("reference: 3\n", "reference: expected a string or a mapping, got 3"),
    ],
)
def test_reference_key_is_validated(tmp_path: Path, extra: str, message: str) -> None:
    path = write(tmp_path / "manifests", "x.yaml", "x", extra)
    with pytest.raises(ManifestError, match=message.replace("(", r"\(")):
        load_manifest(path)


def test_missing_reference_golden_says_how_to_record_it(tmp_path: Path) -> None:
    settings = Settings.for_project(tmp_path)
    write(tmp_path / "manifests", "b.yaml", "base")
    path = write(tmp_path / "manifests", "x.yaml", "x", "reference: base\n")
    empty = results(["a"], [0], np.array([[1.0, 0.0, 0.0]]))
    with pytest.raises(ReferenceGoldenMissing, match=r"golden/base.json.*pytest manifests/b.yaml"):
        check_reference(load_manifest(path), settings, empty, np.array([[1.0, 0.0, 0.0]]))


# --- the plugin ---------------------------------------------------------------------------------


def with_reference(text: str, reference: str = "tiny_onnx") -> str:
    return text + f"reference: {{manifest: {reference}, agreement: 1.0, score: 0.00001}}\n"


def test_plugin_checks_agreement_with_the_reference_golden(project: Project) -> None:
    project.make(
        {
            "tiny_onnx.yaml": project.manifest("tiny_onnx"),
            "tiny_torch.yaml": with_reference(project.manifest("tiny_torch", "torch")),
            # Same model, BGR: a golden of its own (recorded below), but classes 0 and 2 swap.
            "tiny_bgr.yaml": with_reference(
                project.manifest("tiny_bgr", "torch", decode=PREPROCESS_BGR, extra=LOOSE)
            ),
        },
        goldens=["tiny_onnx"],
    )
    # bgr disagrees with onnx: its golden is recorded only because this run asks for it.
    recorded = project.run(
        "--mlrepro-update", "--mlrepro-update-despite-reference", "--mlrepro-json", "out.json"
    )
    recorded.assert_outcomes(passed=2, failed=1)
    assert project.golden("tiny_torch").exists() and project.golden("tiny_bgr").exists()
    result = project.run("--mlrepro-json", "out.json")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*manifests/tiny_bgr.yaml [[]cpu]: disagrees with its reference 'tiny_onnx' "
            "(golden/tiny_onnx.json): top-1 agreement, score distance, accuracy ratio outside*",
            "*top-1 agreement*0.3333*16/24 differ*",
            "*img00.png: reference 0 (*) → 2 (*)*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*= mlrepro reference agreement =*",
            "tiny_bgr [[]cpu] vs tiny_onnx: top-1 agreement 0.3333 over 24 samples*: disagree",
            "tiny_torch [[]cpu] vs tiny_onnx: top-1 agreement 1.0000 over 24 samples, max |Δ "
            "probability| *: agree",
        ]
    )
    rows = {
        r["manifest"]: r for r in json.loads((project.path / "out.json").read_text())["results"]
    }
    assert rows["tiny_torch"]["reference_agreement"] == 1.0
    assert rows["tiny_torch"]["reference_max_score_diff"] < 1e-5
    assert rows["tiny_bgr"]["verdict"] == "reference disagreement"
    assert "reference" not in rows["tiny_onnx"]


def test_missing_reference_golden_fails_unless_recording(serial_project: Project) -> None:
    serial_project.make(
        {
            "tiny_onnx.yaml": serial_project.manifest("tiny_onnx"),
            "tiny_torch.yaml": with_reference(serial_project.manifest("tiny_torch", "torch")),
        }
    )
    # Recording both in one run: tiny_onnx's golden may come after tiny_torch's check.
    recorded = serial_project.run("--mlrepro-update", "-k", "tiny_torch")
    recorded.assert_outcomes(passed=1)
    checked = serial_project.run("-k", "tiny_torch")
    checked.assert_outcomes(failed=1)
    checked.stdout.fnmatch_lines(
        ["*the reference 'tiny_onnx' has no golden at golden/tiny_onnx.json: record it first*"]
    )
