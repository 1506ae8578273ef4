"""The evidence of a diagnosis, one type per source: facts only. Each is worded by its renderer
in ``report/_diagnosis_text.py``, handed in by the caller above (:class:`DiagnosisWording`):
``diagnosis/`` importing ``report/`` would close the cycle report → accuracy → diagnosis →
report (the import contracts, pyproject.toml)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..goldens import DataChange
from ._layer_fingerprints import LayerReport
from ._manifest_diff import Change
from ._probe_trials import Counterfactual
from ._step_fingerprints import StepReport

Section = tuple[str, list[str]]  # a title and its lines


@dataclass(frozen=True)
class ManifestEvidence:
    """The manifest's edits since the golden's recording."""

    changes: Sequence[Change]


@dataclass(frozen=True)
class StepEvidence:
    """The golden's step probes re-traced: the first preprocessing step whose output differs.
    ``changed_probes``: the probes whose data file changed since the golden."""

    report: StepReport
    changed_probes: Sequence[str] = ()


@dataclass(frozen=True)
class CounterfactualEvidence:
    """The probe samples re-run with one pitfall flipped (or one manifest edit undone) at a
    time; ``note`` says why none ran, when none did."""

    tried: Sequence[Counterfactual]
    baseline: Counterfactual | None
    score_tol: float
    note: str = ""


@dataclass(frozen=True)
class EnvironmentEvidence:
    """The environment's changes since the golden; ``golden_has_flags``: whether the golden
    records the CPU flags, numeric packages and settings (goldens recorded before it kept them
    do not)."""

    changes: Sequence[tuple[str, Any, Any]]
    golden_has_flags: bool


# The data set's files against the golden's (DataChange) and the model compared layer by layer
# (LayerReport) are their own evidence.
Evidence = (
    DataChange
    | ManifestEvidence
    | StepEvidence
    | LayerReport
    | CounterfactualEvidence
    | EnvironmentEvidence
)

__all__ = [
    "CounterfactualEvidence",
    "EnvironmentEvidence",
    "Evidence",
    "ManifestEvidence",
    "Section",
    "StepEvidence",
]
