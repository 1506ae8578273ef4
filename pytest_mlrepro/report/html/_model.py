"""The HTML report's view model: plain, typed data that says what the page shows.

One builder fills a :class:`ReportView` (:mod:`._view`: from a merged matrix, which a session's
report builds from its own results rows, and :mod:`._history` for the nights of a history);
:func:`~._render.render_html` turns it into one self-contained page. Nothing here knows about
pytest or goldens: numbers are plain floats (accuracies in percent, latencies in milliseconds),
images are base64 PNG.

The matrix's own ``Matrix``, ``Cell`` and ``CellVerdict`` (:mod:`pytest_mlrepro.matrix`) are the
results; these are how a table shows them: :class:`MatrixTable` of :class:`TableCell`, marked
with a :data:`Mark`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from ...diagnosis import PitfallTable

Mark = Literal["", "pass", "fail", "skip", "warn"]
"""How a table cell or row is marked: "" neutral, "fail" red, "warn" amber, "skip" grey."""


@dataclass(frozen=True)
class TableCell:
    """One cell of the matrix table: its text, how it is marked, and a hover text."""

    text: str
    status: Mark = ""
    title: str = ""


@dataclass(frozen=True)
class MatrixRow:
    """One row of the matrix, keyed by manifest × machine × device; ``cells`` line up with
    :attr:`MatrixTable.columns`. ``status`` marks the whole row (a failed cell in it: "fail")."""

    manifest: str
    machine: str
    device: str
    cells: tuple[TableCell, ...]
    status: Mark = ""
    anchor: str = ""  # the id of this row's drift pictures on the page, when it has some


@dataclass(frozen=True)
class MatrixTable:
    """The matrix as a table: its columns and rows."""

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
    """A latency regression's operators (``report.operators_text``): which took the added
    time."""

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
    note: str = ""
    # The difference picture's scale: ``level`` is one level of the output (1 for 8-bit
    # values; the range / 255 for floats), ``full`` the difference drawn white (the range).
    level: float | None = None
    full: float | None = None
    reduced: int = 1  # the pictures are 1/reduced of the output's size (block mean; |Δ|: max)


@dataclass(frozen=True)
class DriftSet:
    """One drifted item's section. A session's item makes the pictures' part where it runs
    (``step`` .. ``layers``, ``thumbnails``); its ``dataclasses.asdict`` travels with the item's
    report (across xdist as JSON) and :func:`~._images.from_plain` rebuilds it on the controller,
    where its results row fills the rest."""

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
    """One night of a trend: its time (UTC, in words), the value, the tolerance band around
    it (None where unknown) and whether the night's result failed."""

    night: str
    value: float | None
    low: float | None = None
    high: float | None = None
    failed: bool = False


@dataclass(frozen=True)
class Trend:
    """One manifest × machine × device over the nights: top-1, agreement, latency p50; the first
    night outside tolerance and what changed that night."""

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
