"""The words of a diagnosis are the report's: one renderer per evidence type
(``report/_diagnosis_text.py``), the layout there too, and a :class:`Diagnosis` says what the
wording it was handed says."""

from __future__ import annotations

import dataclasses
import typing

from pytest_mlrepro.diagnosis import (
    DriftDiagnosis,
    EnvironmentEvidence,
    Evidence,
    Lead,
    ManifestEvidence,
    Rule,
)
from pytest_mlrepro.report import DIAGNOSIS_WORDING
from pytest_mlrepro.report._diagnosis_lead import LEAD_TEXTS
from pytest_mlrepro.report._diagnosis_text import SECTION_RENDERERS


def test_every_evidence_type_has_a_renderer() -> None:
    assert set(SECTION_RENDERERS) == set(typing.get_args(Evidence))


def test_every_rule_of_the_lead_has_a_sentence() -> None:
    assert set(LEAD_TEXTS) == set(typing.get_args(Rule))


def _diagnosis(**wording: typing.Any) -> DriftDiagnosis:
    return DriftDiagnosis(
        found=Lead("unknown", "unknown"),
        evidence=(ManifestEvidence(()), EnvironmentEvidence((("threads", 4, 8),), True)),
        wording=dataclasses.replace(DIAGNOSIS_WORDING, **wording),
        counterfactuals=3,
        probes=24,
        screen=8,
    )


def test_a_diagnosis_reads_as_the_report_words_it() -> None:
    assert _diagnosis().render().splitlines() == [
        "diagnosis (3 counterfactuals on 24 probe samples, 8 first, 0.0 s)",
        "  Likely cause unknown — no manifest edit, step difference or known pitfall explains"
        " the drift.",
        "",
        "  manifest diff against the manifest the golden was recorded with:",
        "    no change that can move the outputs",
        "",
        "  environment diff against the golden's:",
        "    threads: 4 → 8",
    ]


def test_another_wording_gives_other_words() -> None:
    d = _diagnosis(section=lambda e: (type(e).__name__, ["said otherwise"]))
    assert d.sections == [
        ("ManifestEvidence", ["said otherwise"]),
        ("EnvironmentEvidence", ["said otherwise"]),
    ]
    assert "  ManifestEvidence\n    said otherwise" in d.render()
    assert _diagnosis(text=lambda d, width: f"{d.cause} in {width}").render(60) == "unknown in 60"


def test_the_lead_is_the_first_rule_of_the_table_that_holds() -> None:
    """The decision table in order: a class map before anything, the same preprocessing on
    every probe before a model edit alone, a preprocessing edit when nothing restores."""
    from pytest_mlrepro.diagnosis import Change, ClassMap, CounterfactualEvidence
    from pytest_mlrepro.diagnosis._lead import Facts, decide
    from pytest_mlrepro.diagnosis._step_fingerprints import StepReport

    trials = CounterfactualEvidence((), None, 0.01)
    model = Change("model.file.sha256", "a" * 64, "b" * 64, "model")
    crop = Change("inputs[0].preprocess[1].crop.fraction", 0.875, 1.0, "preprocess", "crop")
    shift = ClassMap("shift", 24, 24, 0, 24, 1)

    def rule(*changes: Change, probes: int = 8, class_map: ClassMap | None = None) -> str:
        facts = Facts(changes, StepReport(probes), trials, (), class_map=class_map)
        return decide(facts).rule

    assert rule(model, crop, class_map=shift) == "class map"
    assert rule(model) == "same steps"
    assert rule(model, probes=0) == "model"
    assert rule() == "runtime"
    assert rule(probes=0) == "unknown"
    assert rule(crop) == "edits"
    edits = decide(Facts((crop,), StepReport(8), trials, ()))
    assert edits.cause == "crop"
    assert DIAGNOSIS_WORDING.lead(edits) == (
        "Likely cause: the manifest's preprocessing edits (crop) — "
        "inputs[0].preprocess[1].crop.fraction: 0.875 → 1, though no single flip brings the "
        "probe predictions back."
    )
