"""A view rendered as one self-contained HTML page (it works opened from a CI artifact); jinja2 and
matplotlib, the ``report`` extra, are imported only when a report is made."""

from __future__ import annotations

import importlib
import statistics
from pathlib import Path

from ...errors import MlreproError
from ._images import LEGEND, level_colour
from ._matrix import NUMERIC_COLUMNS
from ._model import ReportView

EXTRA = "pip install 'pytest-mlrepro[report]'"
LIBRARIES = ("jinja2", "matplotlib")


class ReportUnavailable(MlreproError):
    """The HTML report's libraries are not installed."""


def require_libraries(what: str = "the HTML report") -> None:
    """ReportUnavailable naming the missing libraries. Imported, not only looked for: a broken
    install is as missing as an absent one."""
    missing = []
    for name in LIBRARIES:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise ReportUnavailable(
            f"{what} needs {' and '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} "
            f"not installed: {EXTRA}"
        )


def render_html(view: ReportView) -> str:
    require_libraries()
    import jinja2

    from ._charts import charts

    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("pytest_mlrepro.report.html", "templates"),
        autoescape=True,  # every text of the view model is data (names, paths, messages)
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    template = environment.get_template("report.html.j2")
    legend = [
        (f"{levels:g} level{'' if levels == 1 else 's'}", level_colour(levels)) for levels in LEGEND
    ]
    return template.render(
        view=view,
        charts=charts(view),
        fmt=fmt,
        median=lambda values: statistics.median(values) if values else None,
        numeric_columns=NUMERIC_COLUMNS,
        legend=legend,
    )


def write_html(path: Path, view: ReportView, what: str = "HTML report") -> None:
    """Render ``view`` and write it to ``path`` atomically."""
    from ..._files import atomic_write_bytes

    text = render_html(view)
    atomic_write_bytes(path, text.encode("utf-8"), what=what)


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)
