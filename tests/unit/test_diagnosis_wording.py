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
