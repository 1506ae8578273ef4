"""The HTML report's view model: plain typed data between the page's builders and its rendering
(percent, milliseconds, base64 PNGs; no pytest, no goldens)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from ...diagnosis import PitfallTable

Mark = Literal["", "pass", "fail", "skip", "warn"]
"""How a table cell or row is marked: "" neutral, "fail" red, "warn" amber, "skip" grey."""


@dataclass(frozen=True)
class TableCell:
    text: str
    status: Mark = ""
    title: str = ""


@dataclass(frozen=True)
class MatrixRow:
    """``cells`` line up with :attr:`MatrixTable.columns`; ``status`` marks the whole row."""

    manifest: str
    machine: str
    device: str
    cells: tuple[TableCell, ...]
    status: Mark = ""
    anchor: str = ""  # the id of this row's drift pictures on the page, when it has some


@dataclass(frozen=True)
class MatrixTable:
    columns: tuple[str, ...]
    rows: tuple[MatrixRow, ...] = ()


@dataclass(frozen=True)
class AccuracyPoint:
    """Top-1/top-5 (percent) of one manifest on one machine and device, with its golden's."""

    manifest: str
    machine: str
    device: str
    top1: float | None
    top5: float | None
    golden_top1: float | None = None
    golden_top5: float | None = None
    agreement: float | None = None  # fraction of samples whose top-1 is the golden's
    failed: bool = False
    top1_tolerance: float | None = None  # percentage points either side of the golden
    top5_tolerance: float | None = None


@dataclass(frozen=True)
class LatencySeries:
    """The measured rounds (milliseconds) of one latency measurement, for a distribution plot."""

    label: str  # e.g. "tiny_onnx cpu b1 model"
    rounds_ms: tuple[float, ...]
    machine: str = ""
    golden_p50_ms: float | None = None
    verdict: str = ""
    failed: bool = False


@dataclass(frozen=True)
class OperatorSection:
    """A latency regression's operators: which took the added time."""

    manifest: str
    machine: str
    device: str
    batch: int | None
    lead: str  # one sentence (``report.operators_lead``)
    lines: tuple[str, ...]


@dataclass(frozen=True)
class MachineAgreement:
    """Two machines' results of the same manifest, sample by sample."""

    manifest: str
    machine_a: str
    machine_b: str
    top1_agreement: float  # fraction of shared samples whose top-1 agrees
    max_score_diff: float | None = None
    samples: int = 0
    flagged: bool = False  # one of them disagrees with the majority


@dataclass(frozen=True)
class CrossMachine:
    """Pairs of machines, and per manifest the machines that disagree with the majority."""

    pairs: tuple[MachineAgreement, ...] = ()
    flagged: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (manifest, machines)


@dataclass(frozen=True)
class DriftImage:
    """One probe sample at the first differing step: golden, now and |Δ| as base64 PNG."""

    sample: str
    golden_png: str = ""
    now_png: str = ""
    diff_png: str = ""
    golden_shape: tuple[int, ...] = ()
    now_shape: tuple[int, ...] = ()
    value_range: tuple[float, float] | None = None  # the values mapped to black..white
    max_abs_diff: float | None = None
    changed_fraction: float | None = None  # of the values
    note: str = ""
    # The difference picture's scale: ``level`` is one level of the output (1 for 8-bit
    # values; the range / 255 for floats), ``full`` the difference drawn white (the range).
    level: float | None = None
    full: float | None = None
    reduced: int = 1  # the pictures are 1/reduced of the output's size (block mean; |Δ|: max)


@dataclass(frozen=True)
class DriftSet:
    """One drifted item's section: its pictures are made where the item runs and travel with its
    report (as JSON across xdist); the controller fills the rest from the results row."""

    manifest: str
    machine: str
    device: str
    step: str  # the first differing step's op ("" when none was found: see note)
    status: str = ""  # differs | added | removed
    description: str = ""  # how it differs, in words
    golden_index: int | None = None
    now_index: int | None = None
    channels: str = ""  # e.g. "golden RGB, now BGR, shown in the step output's order"
    layout: str = ""  # e.g. "HWC"
    dtype: str = ""
    diagnosis: str = ""  # the diagnosis' likely cause, when there is one
    probes: tuple[DriftImage, ...] = ()
    # The model compared layer by layer (layer fingerprints): (depth, layer, difference relative
    # to the golden's std), in the model's order; () when the golden keeps none.
    layers: tuple[tuple[int, str, float], ...] = ()
    note: str = ""
    anchor: str = ""
    verdict: str = ""
    lead: str = ""  # the diagnosis' sentence
    sections: tuple[tuple[str, tuple[str, ...]], ...] = ()  # its evidence, titled
    metrics: tuple[MetricChange, ...] = ()  # golden → now
    changed: tuple[ChangedRow, ...] = ()  # the samples whose top-1 changed
    changed_count: int = 0  # all of them (``changed`` lists the first few)
    other_pipeline: str = ""
    other_settings: str = ""
    thumbnails: Mapping[str, str] = field(default_factory=dict)  # changed sample id: base64 PNG


@dataclass(frozen=True)
class MetricChange:
    """One line of the golden → now table."""

    level: str  # "top-1 %", "top-5 %", "top-1 agreement", "max score diff"
    golden: str
    now: str
    change: str
    tolerance: str
    failed: bool = False


@dataclass(frozen=True)
class ChangedRow:
    """A sample whose top-1 changed, with a thumbnail of its image ("" where none was made)."""

    sample: str
    label: str
    golden: str
    now: str
    golden_score: float | None = None
    now_score: float | None = None
    thumbnail_png: str = ""


@dataclass(frozen=True)
class TrendPoint:
    """One night of a trend (UTC, in words): the value and its tolerance band (None: unknown)."""

    night: str
    value: float | None
    low: float | None = None
    high: float | None = None
    failed: bool = False


@dataclass(frozen=True)
class Trend:
    """One manifest × machine × device over the nights."""

    manifest: str
    machine: str
    device: str
    top1: tuple[TrendPoint, ...] = ()
    agreement: tuple[TrendPoint, ...] = ()
    latency_p50_ms: tuple[TrendPoint, ...] = ()
    first_outside: str | None = None  # the night, as in the points
    first_outside_why: str = ""  # what was outside (a level, a verdict)
    changes: tuple[tuple[str, str], ...] = ()  # (what, how) between that night and the one before
    anchor: str = ""


@dataclass
class ReportView:
    """Everything one report page shows; every section but the matrix is optional."""

    title: str
    matrix: MatrixTable
    subtitle: str = ""
    generated: str = ""  # when, in words (UTC)
    accuracy: tuple[AccuracyPoint, ...] = ()
    latency: tuple[LatencySeries, ...] = ()
    operators: tuple[OperatorSection, ...] = ()  # latency regressions: which operators
    # The pitfall tables kept beside the goldens, each with the file it was read from, as shown.
    sensitivity: tuple[tuple[str, PitfallTable], ...] = ()
    cross_machine: CrossMachine | None = None
    drift: tuple[DriftSet, ...] = ()
    notes: tuple[str, ...] = ()
    trends: tuple[Trend, ...] = ()
    nights: tuple[tuple[str, str], ...] = ()  # (night, its results files)
    environment: tuple[tuple[str, str], ...] = ()
    summary: dict[str, int] = field(default_factory=dict)  # e.g. {"pass": 3, "fail": 1}
    top_k: str = "top-5"  # the top-5 columns' header: ``top-3`` where every row's k is 3
    # Where each item's time went: a header and its rows of text (``report.phase_table``).
    phases: tuple[tuple[str, ...], tuple[tuple[str, ...], ...]] = ((), ())
