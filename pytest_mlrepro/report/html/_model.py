"""The HTML report's view model: plain, typed data that says what the page shows.

Whoever makes a report (the plugin at the end of a session, ``mlrepro merge --html`` for a merged
matrix) fills a :class:`ReportView`; :func:`~._render.render_html` turns it into one
self-contained page. Nothing here knows about pytest, goldens or results files: numbers are
plain floats (accuracies in percent, latencies in milliseconds), images are base64 PNG.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Status = Literal["", "pass", "fail", "skip", "warn"]
"""How a cell or row is marked: "" neutral, "fail" red, "warn" amber, "skip" grey."""


@dataclass(frozen=True)
class Cell:
    """One cell of the matrix: its text, how it is marked, and a hover text."""

    text: str
    status: Status = ""
    title: str = ""


@dataclass(frozen=True)
class MatrixRow:
    """One row of the matrix, keyed by manifest × machine × device; ``cells`` line up with
    :attr:`Matrix.columns`. ``status`` marks the whole row (a failed cell in it: "fail")."""

    manifest: str
    machine: str
    device: str
    cells: tuple[Cell, ...]
    status: Status = ""
    anchor: str = ""  # the id of this row's drift pictures on the page, when it has some


@dataclass(frozen=True)
class Matrix:
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
class SensitivityBar:
    """One pitfall variant of the sensitivity table (percentages; agreement a fraction)."""

    pitfall: str
    description: str
    top1: float | None
    agreement: float | None
    error: str | None = None


@dataclass(frozen=True)
class SensitivityTable:
    """A manifest's pitfall sensitivity table (``mlrepro pitfalls --save``), as a chart."""

    manifest: str
    source: str  # the file it was read from, as shown
    samples: int
    declared_top1: float
    bars: tuple[SensitivityBar, ...] = ()


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
    """Cross-machine agreement: pairs, and per manifest the machines that disagree with the
    majority."""

    pairs: tuple[MachineAgreement, ...] = ()
    flagged: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (manifest, machines)


@dataclass(frozen=True)
class DriftImage:
    """One probe sample at the first differing step: the golden pipeline's output, the current
    one and their absolute difference, as base64 PNG ("" where there is none)."""

    sample: str
    golden_png: str = ""
    now_png: str = ""
    diff_png: str = ""
    golden_shape: tuple[int, ...] = ()
    now_shape: tuple[int, ...] = ()
    value_range: tuple[float, float] | None = None  # the values mapped to black..white
    max_abs_diff: float | None = None
    changed_fraction: float | None = None  # of the values
    amplification: float | None = None  # the difference image is |Δ| × this (clipped)
    note: str = ""
    reduced: int = 1  # the pictures are 1/reduced of the output's size (block mean; |Δ|: max)


@dataclass(frozen=True)
class DriftSet:
    """The preprocessing pictures of one drifted item."""

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
    layer_tolerance: float = 1e-3
    note: str = ""
    anchor: str = ""


@dataclass
class ReportView:
    """Everything one report page shows; every section but the matrix is optional."""

    title: str
    matrix: Matrix
    subtitle: str = ""
    generated: str = ""  # when, in words (UTC)
    accuracy: tuple[AccuracyPoint, ...] = ()
    latency: tuple[LatencySeries, ...] = ()
    sensitivity: tuple[SensitivityTable, ...] = ()
    cross_machine: CrossMachine | None = None
    drift: tuple[DriftSet, ...] = ()
    notes: tuple[str, ...] = ()
    environment: tuple[tuple[str, str], ...] = ()
    summary: dict[str, int] = field(default_factory=dict)  # e.g. {"pass": 3, "fail": 1}
