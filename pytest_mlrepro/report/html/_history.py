"""The page of ``mlrepro history --html``: the latest night's matrix, then each series' trend."""

from __future__ import annotations

from ...matrix import History, Matrix, Series
from ._model import ReportView, Trend, TrendPoint
from ._view import matrix_view


def _trend(history: History, series: Series, anchor: str) -> Trend:
    labels = [n.label for n in history.nights]
    top1, agreement, latency = [], [], []
    for p in series.points:
        night = labels[p.night]
        low, high = p.top1_band or (None, None)
        top1.append(TrendPoint(night, p.top1, low, high, p.outside))
        # The agreement as a percentage: its band from the floor up to 100%.
        floor = None if p.agreement_floor is None else 100.0 * p.agreement_floor
        share = None if p.agreement is None else 100.0 * p.agreement
        agreement.append(
            TrendPoint(night, share, floor, None if floor is None else 100.0, p.outside)
        )
        latency.append(TrendPoint(night, p.p50_ms, None, p.p50_ceiling_ms, p.outside))
    first = None if series.first_outside is None else series.points[series.first_outside]
    return Trend(
        manifest=series.manifest,
        machine=series.machine,
        device=series.device,
        top1=tuple(top1),
        agreement=tuple(agreement),
        latency_p50_ms=tuple(latency),
        first_outside=None if first is None else labels[first.night],
        first_outside_why="" if first is None else first.why,
        changes=series.changes,
        anchor=anchor,
    )


def history_view(
    history: History, *, title: str = "pytest-mlrepro history", generated: str = ""
) -> ReportView:
    # No night: an empty page that says so.
    latest = history.nights[-1].matrix if history.nights else Matrix((), (), ())
    view = matrix_view(latest, title=title, generated=generated)
    files = sum(len(n.files) for n in history.nights)
    span = f"{history.nights[0].day} … {history.nights[-1].day}" if history.nights else "no nights"
    view.subtitle = (
        f"{len(history.nights)} nights ({span}) · {files} results files · the matrix of the "
        "latest night, then each manifest × machine over the nights"
    )
    view.trends = tuple(_trend(history, s, f"trend-{i + 1}") for i, s in enumerate(history.series))
    view.nights = tuple((n.label, ", ".join(str(f.path) for f in n.files)) for n in history.nights)
    outside = [t for t in view.trends if t.first_outside is not None]
    view.notes = (
        *view.notes,
        *(
            f"{t.manifest} on {t.machine} [{t.device}]: first outside tolerance on "
            f"{t.first_outside} ({t.first_outside_why})"
            for t in outside
        ),
    )
    return view
