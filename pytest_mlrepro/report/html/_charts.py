"""The report's charts: matplotlib figures (no pyplot, no global backend: each figure has its own
Agg canvas), saved as SVG and inlined as ``data:`` URIs (an ``<img>`` each, so that the ids inside
one SVG never clash with another's). Text is drawn as paths: the page needs no font.
"""

from __future__ import annotations

import base64
import functools
import io
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from ._model import (
    AccuracyPoint,
    CrossMachine,
    DriftSet,
    LatencySeries,
    SensitivityTable,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

WIDTH = 11.0  # inches at 100 dpi: the page's width at 1280 pixels
PASS, FAIL, GOLDEN, MUTED = "#2e7d32", "#c62828", "#9e9e9e", "#607d8b"
TOP1, TOP5 = "#1565c0", "#64b5f6"


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _plain_text(chart: Callable[_P, _R]) -> Callable[_P, _R]:
    """Build and save the chart with matplotlib's mathtext and usetex off: every text artist
    (tick labels, titles, legends, annotations) reads these settings when it is made or drawn.

    Names in a chart (machine, manifest, class, sample) come from results files, other jobs'
    artifacts, and are drawn as the text they are: with mathtext on, a machine named ``$\\foo{$``
    is parsed as TeX and crashes the report (``$x$`` would be drawn as a formula); with usetex,
    LaTeX would run on it."""

    @functools.wraps(chart)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        import matplotlib

        with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}):
            return chart(*args, **kwargs)

    return wrapper


def _figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=100, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _data_uri(figure: Figure) -> str:
    import matplotlib

    buffer = io.BytesIO()
    # A fixed hash salt and no date: the same data gives the same bytes (reviewable, cacheable).
    with matplotlib.rc_context({"svg.hashsalt": "mlrepro", "svg.fonttype": "path"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _height(rows: int, per_row: float = 0.32, base: float = 1.3) -> float:
    return min(40.0, base + per_row * max(1, rows))


def _short(verdict: str) -> str:
    """A verdict without its parenthesised detail (``faster (vs <hardware key>)``): an axis label
    has room for the word; the matrix has the rest."""
    return verdict.split(" (", 1)[0]


def _label(*parts: str) -> str:
    return " · ".join(p for p in parts if p)


@_plain_text
def accuracy_chart(points: Sequence[AccuracyPoint]) -> str | None:
    """Top-1 and top-5 per manifest × machine × device, now (solid) and the golden's (grey
    outline); a failed row's label in red."""
    points = [p for p in points if p.top1 is not None or p.top5 is not None]
    if not points:
        return None
    figure = _figure(WIDTH, _height(len(points) * 2, 0.22, 1.6))
    axes = figure.add_subplot()
    labels = [_label(p.manifest, p.machine, p.device) for p in points]
    y = list(range(len(points)))
    h = 0.38
    series = (
        (-h / 2, "top-1", TOP1, [p.top1 for p in points], [p.golden_top1 for p in points]),
        (h / 2, "top-5", TOP5, [p.top5 for p in points], [p.golden_top5 for p in points]),
    )
    for offset, name, colour, now, golden in series:
        ys = [v + offset for v in y]
        values = [v or 0.0 for v in now]
        axes.barh(ys, values, height=h, color=colour, label=f"{name} now")
        goldens = [(yy, g) for yy, g in zip(ys, golden) if g is not None]
        if goldens:
            axes.barh(
                [g[0] for g in goldens],
                [g[1] for g in goldens],
                height=h,
                fill=False,
                edgecolor="#424242",
                linestyle="--",
                linewidth=1.0,
                label=f"{name} golden",
            )
        for yy, value in zip(ys, values):
            axes.text(value + 0.5, yy, f"{value:.2f}", va="center", fontsize=7)
    axes.set_yticks(y, labels, fontsize=8)
    for tick, p in zip(axes.get_yticklabels(), points):
        if p.failed:
            tick.set_color(FAIL)
    axes.invert_yaxis()
    axes.set_xlim(0, 108)
    axes.set_xlabel("accuracy (%)")
    axes.set_title("Accuracy now and the golden's (dashed)", fontsize=10)
    figure.legend(fontsize=7, loc="outside lower center", ncols=4)
    axes.grid(axis="x", alpha=0.3)
    return _data_uri(figure)


@_plain_text
def latency_chart(series: Sequence[LatencySeries]) -> str | None:
    """The distribution of every latency measurement's rounds (box plot, milliseconds), with the
    golden's p50 as a diamond; a failed one in red."""
    series = [s for s in series if s.rounds_ms]
    if not series:
        return None
    figure = _figure(WIDTH, _height(len(series), 0.45, 1.5))
    axes = figure.add_subplot()
    data = [list(s.rounds_ms) for s in series]
    boxes = axes.boxplot(
        data,
        **_horizontal(),
        patch_artist=True,
        widths=0.55,
        showfliers=True,
        flierprops={"markersize": 2, "alpha": 0.5},
        medianprops={"color": "black"},
    )
    for box, s in zip(boxes["boxes"], series):
        box.set_facecolor("#ef9a9a" if s.failed else "#a5d6a7")
    goldens = [(i + 1, s.golden_p50_ms) for i, s in enumerate(series) if s.golden_p50_ms]
    if goldens:
        axes.scatter(
            [g[1] for g in goldens],
            [g[0] for g in goldens],
            marker="D",
            color="#37474f",
            zorder=3,
            s=22,
            label="golden p50",
        )
        axes.legend(fontsize=7, loc="lower right")
    labels = [
        f"{_label(s.label, s.machine)}  ({_short(s.verdict)})" if s.verdict else s.label
        for s in series
    ]
    axes.set_yticks(range(1, len(series) + 1), labels, fontsize=8)
    for tick, s in zip(axes.get_yticklabels(), series):
        if s.failed:
            tick.set_color(FAIL)
    axes.invert_yaxis()
    values = [v for s in series for v in s.rounds_ms if v > 0]
    if values and max(values) / min(values) > 30:  # very different models: a log scale
        axes.set_xscale("log")
    axes.set_xlabel("milliseconds per round")
    axes.set_title("Latency distributions (rounds)", fontsize=10)
    axes.grid(axis="x", alpha=0.3)
    return _data_uri(figure)


def _horizontal() -> dict[str, Any]:
    """A horizontal box plot's argument: ``orientation`` from matplotlib 3.10 (which deprecates
    ``vert``), ``vert`` before it."""
    import matplotlib

    major, minor = (int(p) for p in matplotlib.__version__.split(".")[:2])
    return {"orientation": "horizontal"} if (major, minor) >= (3, 10) else {"vert": False}


@_plain_text
def sensitivity_chart(table: SensitivityTable) -> str:
    """Top-1 and agreement with the declared pipeline under each pitfall, worst agreement
    first; variants that cannot run are listed with "cannot run"."""
    bars = sorted(
        table.bars,
        key=lambda b: (b.agreement is None, b.agreement if b.agreement is not None else 0.0),
    )
    figure = _figure(WIDTH, _height(len(bars), 0.3, 1.6))
    left, right = figure.subplots(1, 2, sharey=True, width_ratios=[1, 1])
    y = list(range(len(bars)))
    labels = [_label(b.pitfall, b.description) for b in bars]
    labels = [text if len(text) <= 60 else text[:57] + "…" for text in labels]
    agreement = [100.0 * (b.agreement or 0.0) for b in bars]
    top1 = [b.top1 or 0.0 for b in bars]
    colours = [
        MUTED if b.agreement is None else (FAIL if (b.agreement or 0) < 0.99 else PASS)
        for b in bars
    ]
    right.barh(y, agreement, color=colours)
    left.barh(y, top1, color=TOP1)
    left.axvline(table.declared_top1, color="black", linestyle="--", linewidth=1)
    for yy, bar, value in zip(y, bars, agreement):
        text = "cannot run" if bar.error else f"{value:.1f}%"
        right.text(min(value, 100) + 1, yy, text, va="center", fontsize=7)
    left.set_yticks(y, labels, fontsize=7)
    left.invert_yaxis()
    left.set_xlim(0, 105)
    right.set_xlim(0, 115)
    left.set_xlabel("top-1 (%)")
    right.set_xlabel("agreement with the declared top-1 (%)")
    figure.suptitle(
        f"Pitfall sensitivity of {table.manifest} ({table.samples} samples; dashed: the declared "
        f"pipeline's top-1, {table.declared_top1:.2f}%)",
        fontsize=10,
    )
    for axes in (left, right):
        axes.grid(axis="x", alpha=0.3)
    return _data_uri(figure)


@_plain_text
def agreement_chart(cross: CrossMachine) -> str | None:
    """Cross-machine top-1 agreement per manifest and pair of machines; a flagged pair red."""
    pairs = list(cross.pairs)
    if not pairs:
        return None
    figure = _figure(WIDTH, _height(len(pairs), 0.32, 1.4))
    axes = figure.add_subplot()
    y = list(range(len(pairs)))
    values = [100.0 * p.top1_agreement for p in pairs]
    axes.barh(y, values, color=[FAIL if p.flagged else PASS for p in pairs])
    for yy, p, value in zip(y, pairs, values):
        diff = "" if p.max_score_diff is None else f", max score diff {p.max_score_diff:.3g}"
        axes.text(value + 0.3, yy, f"{value:.2f}%{diff}", va="center", fontsize=7)
    axes.set_yticks(y, [_label(p.manifest, f"{p.machine_a} vs {p.machine_b}") for p in pairs])
    for tick in axes.get_yticklabels():
        tick.set_fontsize(8)
    low = min(values)
    axes.set_xlim(max(0.0, math.floor(low / 10.0) * 10.0 - 10.0) if low > 50 else 0.0, 112)
    axes.invert_yaxis()
    axes.set_xlabel("samples whose top-1 agrees (%)")
    axes.set_title("Cross-machine agreement", fontsize=10)
    axes.grid(axis="x", alpha=0.3)
    return _data_uri(figure)


def layer_chart(drift: DriftSet) -> str | None:
    """The difference from the golden by layer depth (log scale): where the model's outputs
    start to differ, and whether the difference grows after it; the tolerance dashed."""
    if not drift.layers:
        return None
    floor = drift.layer_tolerance / 100  # identical layers drawn on the axis, not at zero
    depth = [d for d, _, _ in drift.layers]
    values = [max(v, floor) if math.isfinite(v) else 1e6 for _, _, v in drift.layers]
    figure = _figure(WIDTH, 2.6)
    axes = figure.add_subplot()
    colours = [FAIL if v > drift.layer_tolerance else PASS for v in values]
    axes.plot(depth, values, color=MUTED, linewidth=1)
    axes.scatter(depth, values, color=colours, s=12, zorder=3)
    axes.axhline(drift.layer_tolerance, color="black", linestyle="--", linewidth=1)
    axes.set_yscale("log")
    first = next(((d, name) for d, name, v in drift.layers if v > drift.layer_tolerance), None)
    if first is not None:
        axes.annotate(
            f"first: {first[1]}",
            (first[0], values[depth.index(first[0])]),
            xytext=(6, -12),
            textcoords="offset points",
            fontsize=7,
        )
    axes.set_xlabel("layer depth (the model's order)")
    axes.set_ylabel("difference / golden std")
    axes.set_title(
        f"{drift.manifest} · {drift.device}: difference from the golden by layer", fontsize=10
    )
    axes.grid(alpha=0.3)
    return _data_uri(figure)


def charts(view: Any) -> dict[str, Any]:
    """Every chart of a :class:`~._model.ReportView` (None where it has no data)."""
    return {
        "accuracy": accuracy_chart(view.accuracy),
        "latency": latency_chart(view.latency),
        "sensitivity": [(t, sensitivity_chart(t)) for t in view.sensitivity],
        "agreement": None if view.cross_machine is None else agreement_chart(view.cross_machine),
        "layers": {d.anchor: layer_chart(d) for d in view.drift if d.layers},
    }
