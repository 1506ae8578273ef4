"""Why a result drifted, as facts: step fingerprints, the pitfall catalogue, counterfactual probes,
the lead (a decision table) and the sensitivity table; report/ words them."""

from __future__ import annotations

from ._class_maps import ClassMap, ClassPermutation, ScoreTransform
from ._data_changes import check as check_pixel_identity
from ._data_changes import record as record_pixel_identity
from ._drift_images import FirstStepOutputs, ProbeOutputs, first_step_outputs
from ._environment_diff import EnvChange, EnvironmentStep
from ._explain import (
    DiagnosisWording,
    DriftDiagnosis,
    EnvironmentEvidence,
    Evidence,
    ManifestEvidence,
    Section,
    StepEvidence,
    diagnose,
    explain_class_count,
)
from ._layer_fingerprints import TOLERANCE as LAYER_TOLERANCE
from ._layer_fingerprints import LayerDiff, LayerReport, Precision
from ._layer_fingerprints import record as record_layer_fingerprints
from ._lead import DataFacts, Lead, Rule
from ._manifest_diff import ABSENT, Change
from ._pitfalls import Flip, backends_in_play, left_out_backends, show_value
from ._probe_trials import SCREEN, Counterfactual, CounterfactualEvidence
from ._sensitivity import PitfallRow, PitfallTable, sensitivity
from ._sensitivity import read as read_sensitivity
from ._sensitivity import save as save_sensitivity
from ._sensitivity import table_path as sensitivity_table_path
from ._step_fingerprints import Delta, StepDiff, StepReport
from ._step_fingerprints import record as record_step_fingerprints
from ._step_fingerprints import same_outputs as same_step_outputs
from ._step_fingerprints import up_to_date as step_fingerprints_up_to_date

__all__ = [
    "ABSENT",
    "LAYER_TOLERANCE",
    "SCREEN",
    "Change",
    "ClassMap",
    "ClassPermutation",
    "Counterfactual",
    "CounterfactualEvidence",
    "DataFacts",
    "Delta",
    "DiagnosisWording",
    "DriftDiagnosis",
    "EnvChange",
    "EnvironmentEvidence",
    "EnvironmentStep",
    "Evidence",
    "FirstStepOutputs",
    "Flip",
    "LayerDiff",
    "LayerReport",
    "Lead",
    "ManifestEvidence",
    "PitfallRow",
    "PitfallTable",
    "Precision",
    "ProbeOutputs",
    "Rule",
    "ScoreTransform",
    "Section",
    "StepDiff",
    "StepEvidence",
    "StepReport",
    "backends_in_play",
    "check_pixel_identity",
    "diagnose",
    "explain_class_count",
    "first_step_outputs",
    "left_out_backends",
    "read_sensitivity",
    "record_layer_fingerprints",
    "record_pixel_identity",
    "record_step_fingerprints",
    "same_step_outputs",
    "save_sensitivity",
    "sensitivity",
    "sensitivity_table_path",
    "show_value",
    "step_fingerprints_up_to_date",
]
