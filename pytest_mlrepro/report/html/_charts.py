"""The report's charts: matplotlib on its own Agg canvas (no pyplot, no global backend), each an
SVG ``data:`` URI in its own ``<img>`` (ids never clash), text as paths (no font needed)."""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...diagnosis import LAYER_TOLERANCE, PitfallTable
from ._model import (
    AccuracyPoint,
    CrossMachine,
    DriftSet,
    LatencySeries,
    Trend,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

WIDTH = 11.0  # inches at 100 dpi: the page's width at 1280 pixels
PASS, FAIL, GOLDEN, MUTED = "#2e7d32", "#c62828", "#9e9e9e", "#607d8b"
TOP1, TOP5 = "#1565c0", "#64b5f6"
BAND = "#cfd8dc"  # a tolerance band


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


def _label(*parts: str) -> str:
    return " · ".join(p for p in parts if p)


def _rows(
    axes: Any, ticks: tuple[Sequence[float], Sequence[str], Sequence[bool]], x: str, title: str
) -> str:
    """A one-row-per-item chart finished (a failed row's label red), as a ``data:`` URI."""
    at, labels, failed = ticks
    axes.set_yticks(at, labels, fontsize=8)
    for tick, bad in zip(axes.get_yticklabels(), failed):
        if bad:
            tick.set_color(FAIL)
    axes.set_xlabel(x)
    axes.set_title(title, fontsize=10)
    axes.grid(axis="x", alpha=0.3)
    return _data_uri(axes.figure)


def accuracy_chart(points: Sequence[AccuracyPoint]) -> str | None:
    """Top-1 and top-5 as their change against the golden, on their tolerance bands: a 0.2-point
    drift is as visible as it is against a 0.5-point tolerance, which a 0–100 axis hides."""
    points = [p for p in points if p.golden_top1 is not None and p.top1 is not None]
    if not points:
        return None
    figure = _figure(WIDTH, _height(len(points), 0.42, 1.6))
    axes = figure.add_subplot()
    labels = [_label(p.manifest, p.machine, p.device) for p in points]
    y = list(range(len(points)))
    reach = 0.1  # percentage points: the smallest half-width of the axis
    for yy, p in zip(y, points):
        for offset, tol in ((-0.18, p.top1_tolerance), (0.18, p.top5_tolerance)):
            if tol is not None:
                axes.barh(
                    yy + offset, 2 * tol, height=0.3, left=-tol, color=BAND, zorder=1, linewidth=0
                )
                reach = max(reach, tol)
    series = (
        (-0.18, "top-1", TOP1, "o", [_delta(p.top1, p.golden_top1) for p in points]),
        (0.18, "top-5", TOP5, "D", [_delta(p.top5, p.golden_top5) for p in points]),
    )
    for offset, name, colour, marker, deltas in series:
        shown = [(yy + offset, d, p) for yy, d, p in zip(y, deltas, points) if d is not None]
        if not shown:
            continue
        axes.scatter(
            [d for _, d, _ in shown],
            [yy for yy, _, _ in shown],
            marker=marker,
            s=28,
            color=[FAIL if p.failed else colour for _, _, p in shown],
            edgecolor="black",
            linewidth=0.4,
            zorder=3,
            label=f"{name} now − golden",
        )
        for at, d, _ in shown:
            axes.annotate(
                f"{d:+.2f}", (d, at), xytext=(6, -3), textcoords="offset points", fontsize=7
            )
            reach = max(reach, abs(d))
    axes.axvline(0.0, color="black", linewidth=0.8)
    axes.set_xlim(-reach * 1.3, reach * 1.3)
    axes.set_ylim(len(points) - 0.5, -0.5)
    figure.legend(fontsize=7, loc="outside lower center", ncols=2)
    return _rows(
        axes,
        (y, labels, [p.failed for p in points]),
        "change against the golden (percentage points); grey: the tolerance band",
        "Accuracy: the change against the golden",
    )


def _delta(now: float | None, golden: float | None) -> float | None:
    return None if now is None or golden is None else now - golden


def latency_chart(series: Sequence[LatencySeries]) -> str | None:
    """Every latency measurement's rounds as a box plot, the golden's p50 a diamond."""
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
    # A verdict without its parenthesised detail (``faster (vs <hardware key>)``): an axis
    # label has room for the word; the matrix has the rest.
    labels = [
        f"{_label(s.label, s.machine)}  ({s.verdict.split(' (', 1)[0]})" if s.verdict else s.label
        for s in series
    ]
    axes.invert_yaxis()
    values = [v for s in series for v in s.rounds_ms if v > 0]
    if values and max(values) / min(values) > 30:  # very different models: a log scale
        axes.set_xscale("log")
    ticks = (range(1, len(series) + 1), labels, [s.failed for s in series])
    return _rows(axes, ticks, "milliseconds per round", "Latency distributions (rounds)")


def _horizontal() -> dict[str, Any]:
    """``orientation`` from matplotlib 3.10 (which deprecates ``vert``), ``vert`` before it."""
    import matplotlib

    major, minor = (int(p) for p in matplotlib.__version__.split(".")[:2])
    return {"orientation": "horizontal"} if (major, minor) >= (3, 10) else {"vert": False}


def sensitivity_chart(table: PitfallTable) -> str:
    """Top-1 and agreement with the declared pipeline under each pitfall, worst first."""
    bars = sorted(
        table.rows,
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
    declared = table.declared.top1 or 0.0  # a table without it is not read (diagnosis.read)
    left.axvline(declared, color="black", linestyle="--", linewidth=1)
    for yy, bar, value in zip(y, bars, agreement):
        text = "cannot run" if bar.error else f"{value:.1f}%"
        # Inside the bar's end when it is long: the axis stops at 100 %.
        inside = value > 80
        right.text(
            value - 1 if inside else value + 1,
            yy,
            text,
            va="center",
            ha="right" if inside else "left",
            fontsize=7,
            color="white" if inside else "black",
        )
    left.set_yticks(y, labels, fontsize=7)
    left.invert_yaxis()
    left.set_xlim(0, 100)
    right.set_xlim(0, 100)
    left.set_xlabel("top-1 (%)")
    right.set_xlabel("agreement with the declared top-1 (%)")
    figure.suptitle(
        f"Pitfall sensitivity of {table.name} ({table.samples} samples; dashed: the declared "
        f"pipeline's top-1, {declared:.2f}%)",
        fontsize=10,
    )
    for axes in (left, right):
        axes.grid(axis="x", alpha=0.3)
    return _data_uri(figure)


def agreement_chart(cross: CrossMachine) -> str | None:
    pairs = list(cross.pairs)
    if not pairs:
        return None
    figure = _figure(WIDTH, _height(len(pairs), 0.32, 1.4))
    axes = figure.add_subplot()
    y = list(range(len(pairs)))
    values = [100.0 * p.top1_agreement for p in pairs]
    axes.barh(y, values, color=[FAIL if p.flagged else PASS for p in pairs])
    low = min(values)
    start = max(0.0, math.floor(low / 10.0) * 10.0 - 10.0) if low > 50 else 0.0
    for yy, p, value in zip(y, pairs, values):
        diff = "" if p.max_score_diff is None else f", max score diff {p.max_score_diff:.3g}"
        # The label inside the bar, at its start: the axis ends at 100 %, where a bar can.
        axes.text(start + 0.5, yy, f"{value:.2f}%{diff}", va="center", fontsize=7, color="white")
    axes.set_xlim(start, 100)
    axes.invert_yaxis()
    labels = [_label(p.manifest, f"{p.machine_a} vs {p.machine_b}") for p in pairs]
    ticks = (y, labels, ())  # a flagged pair's bar is red: its label is not
    return _rows(axes, ticks, "samples whose top-1 agrees (%)", "Cross-machine agreement")


def layer_chart(drift: DriftSet) -> str:
    """The difference from the golden by layer depth: where it starts, and whether it grows."""
    floor = LAYER_TOLERANCE / 100  # identical layers drawn on the axis, not at zero
    depth = [d for d, _, _ in drift.layers]
    values = [max(v, floor) if math.isfinite(v) else 1e6 for _, _, v in drift.layers]
    figure = _figure(WIDTH, 2.6)
    axes = figure.add_subplot()
    colours = [FAIL if v > LAYER_TOLERANCE else PASS for v in values]
    axes.plot(depth, values, color=MUTED, linewidth=1)
    axes.scatter(depth, values, color=colours, s=12, zorder=3)
    axes.axhline(LAYER_TOLERANCE, color="black", linestyle="--", linewidth=1)
    axes.set_yscale("log")
    first = next(((d, name) for d, name, v in drift.layers if v > LAYER_TOLERANCE), None)
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


def trend_chart(trend: Trend) -> str | None:
    """A panel per measure over the nights, on its tolerance band; each panel's points are one
    SVG group ``<anchor>-<panel>``, so that the page's points can be checked."""
    panels = [
        (name, unit, points)
        for name, unit, points in (
            ("top1", "top-1 (%)", trend.top1),
            ("agreement", "agreement (%)", trend.agreement),
            ("latency", "latency p50 (ms)", trend.latency_p50_ms),
        )
        if any(p.value is not None for p in points)
    ]
    if not panels:
        return None
    nights = list(dict.fromkeys(p.night for _, _, ps in panels for p in ps))
    x_of = {night: i for i, night in enumerate(nights)}
    figure = _figure(WIDTH, 1.0 + 1.55 * len(panels))
    axes_list = figure.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
    first = None if trend.first_outside is None else x_of.get(trend.first_outside)
    for axes, (name, unit, points) in zip(axes_list, panels):
        shown = [p for p in points if p.value is not None]
        xs = [x_of[p.night] for p in shown]
        values = [float(p.value) for p in shown if p.value is not None]
        lows = [math.nan if p.low is None else p.low for p in shown]
        highs = [math.nan if p.high is None else p.high for p in shown]
        if any(not math.isnan(v) for v in lows + highs):
            bottom = [lo if not math.isnan(lo) else 0.0 for lo in lows]
            axes.fill_between(
                xs, bottom, highs, color=BAND, step="mid", linewidth=0, label="tolerance"
            )
        axes.plot(xs, values, color=MUTED, linewidth=1, zorder=2)
        axes.scatter(
            xs,
            values,
            color=[FAIL if p.failed else PASS for p in shown],
            s=22,
            zorder=3,
            gid=f"{trend.anchor}-{name}",
        )
        if first is not None:
            axes.axvline(first, color=FAIL, linestyle="--", linewidth=1)
        if name == "agreement":
            top = 100.0
            bottom_value = min([*values, *[v for v in lows if not math.isnan(v)]])
            axes.set_ylim(max(0.0, bottom_value - (top - bottom_value) * 0.15 - 0.01), top)
        axes.set_ylabel(unit, fontsize=8)
        axes.grid(alpha=0.3)
    if first is not None:
        axes_list[0].annotate(
            "first outside tolerance",
            (first, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(4, -10),
            textcoords="offset points",
            fontsize=7,
            color=FAIL,
        )
    axes_list[-1].set_xticks(range(len(nights)), [n[:10] for n in nights], fontsize=7)
    axes_list[-1].set_xlim(-0.5, len(nights) - 0.5)
    figure.suptitle(
        f"{trend.manifest} · {trend.machine} [{trend.device}] over {len(nights)} nights",
        fontsize=10,
    )
    return _data_uri(figure)


def charts(view: Any) -> dict[str, Any]:
    """Every chart of a view (None where it has no data), with mathtext and usetex off: a machine
    named ``$\\foo{$`` in another job's results file would be parsed as TeX and crash the report."""
    import matplotlib

    with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}):
        cross = view.cross_machine
        return {
            "accuracy": accuracy_chart(view.accuracy),
            "latency": latency_chart(view.latency),
            "sensitivity": [(s, t, sensitivity_chart(t)) for s, t in view.sensitivity],
            "agreement": None if cross is None else agreement_chart(cross),
            "layers": {d.anchor: layer_chart(d) for d in view.drift if d.layers},
            "trends": {t.anchor: trend_chart(t) for t in view.trends},
        }
