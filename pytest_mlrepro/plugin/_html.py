"""pytest glue for ``--mlrepro-html``: a drifted item's pictures and the page."""

from __future__ import annotations

import math
from dataclasses import asdict, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from .._files import check_writable_folder
from ..diagnosis import PitfallTable, first_step_outputs, read_sensitivity, sensitivity_table_path
from ..errors import MlreproError, OutputError
from ..fingerprint import environment
from ..report import phase_table
from ..report.html import (
    DriftSet,
    ReportUnavailable,
    SessionParts,
    environment_rows,
    from_plain,
    latency_series,
    require_libraries,
    step_pictures,
    thumbnail,
    write_html,
)
from ..report.html import session_view as build
from ..results import Row
from ._base import display_path, machine_name, output_path, report_output_error, settings_key

if TYPE_CHECKING:
    from ..report.html import ReportView
    from ._base import RunState

REPORT_ATTRIBUTE = "mlrepro_drift"  # the attribute of a report that carries an item's pictures
THUMBNAILS = 48  # changed samples given a thumbnail (the report's table lists up to 100)


def html_path(config: pytest.Config) -> Path | None:
    """The report's path: the option's relative to where pytest runs, the ini key's relative
    to the rootdir; None when no report is asked for."""
    ini = str(config.getini("mlrepro_html") or "").strip()
    # Path's "/" keeps an absolute ini path as it is.
    return output_path(config, "mlrepro_html") or (config.rootpath / ini if ini else None)


def check_html_target(config: pytest.Config) -> None:
    """A usage error before anything runs: no report libraries, or a folder it cannot be
    written to (asked on the controller; the workers write no report)."""
    target = html_path(config)
    if target is None or hasattr(config, "workerinput"):
        return
    try:
        require_libraries("--mlrepro-html")
        check_writable_folder(target.parent, "report file (--mlrepro-html)")
    except (ReportUnavailable, OutputError) as exc:
        raise pytest.UsageError(f"{exc}. Nothing was run.") from None


# --- the drifted item's pictures ----------------------------------------------------------------


def collect_drift(item: Any, drifted: Any, comparison: Any) -> dict[str, Any] | None:
    """A drifted item's pictures (its first differing step's outputs on a few probe samples) and
    layer comparison, as plain data. Never fails the item (a failed picture is a note)."""
    if html_path(item.config) is None:
        return None
    samples, changed = drifted.result.samples, [c.id for c in comparison.changed]
    pictures = DriftSet(item.manifest.name, "", item.device, "")
    try:
        outputs = first_step_outputs(item.manifest, drifted.golden, samples, prefer=changed)
        pictures = step_pictures(outputs, pictures)
    except Exception as exc:  # the report is a bonus: the verdict stands on its own
        pictures = replace(pictures, note=f"no pictures ({type(exc).__name__}: {exc})")
    # inf (a shape change) is kept as a large number: the data crosses to the xdist
    # controller as JSON.
    layers = tuple((d, n, v if math.isfinite(v) else 1e6) for d, n, v in drifted.layers)
    thumbnails = _thumbnails(samples, changed)
    return asdict(replace(pictures, layers=layers, thumbnails=thumbnails))


def _thumbnails(samples: list[Any], changed: list[str]) -> dict[str, str]:
    """Small pictures of the first changed samples (by id): read through the sample's verified
    read; one that cannot be read has none (its row shows the id alone)."""
    wanted = set(changed[:THUMBNAILS])
    out = {}
    for sample in samples:
        if sample.id in wanted:
            try:
                out[sample.id] = thumbnail(sample.read())
            except Exception:  # a picture is a bonus: an unreadable file is the verdict's matter
                out[sample.id] = ""
    return out


def drift_row(report: pytest.TestReport) -> DriftSet | None:
    data = getattr(report, REPORT_ATTRIBUTE, None)
    return from_plain(data) if report.when == "call" and isinstance(data, dict) else None


# --- the page at the end of the session ---------------------------------------------------------


def write_html_report(
    session: pytest.Session, state: RunState, fallback: Path | None = None
) -> Path | None:
    """The report when one is asked for, else at ``fallback`` (a page for the tracking store)
    when the report's libraries are installed; the page written, if any."""
    path = html_path(session.config) or fallback
    if path is None:
        return None
    if path == fallback:
        try:
            require_libraries()
        except ReportUnavailable:
            return None
    try:
        write_html(path, _page(session.config, state), what="report file (--mlrepro-html)")
    except Exception as exc:  # a report that cannot be made is said, not a traceback at exit
        made = f"the HTML report {path} could not be made ({type(exc).__name__}: {exc})"
        # An MlreproError (OutputError, ReportUnavailable) says what went wrong itself.
        report_output_error(session, str(exc) if isinstance(exc, MlreproError) else made)
        return None
    return path


def _sensitivity(
    config: pytest.Config, rows: list[Row], notes: list[str]
) -> list[tuple[str, PitfallTable]]:
    """The pitfall sensitivity tables kept beside the goldens of these rows (golden/pitfalls/),
    each with its path as shown; one that cannot be read is a note, not shown."""
    golden_dir = config.stash[settings_key].golden_dir
    found: dict[Path, tuple[str, PitfallTable]] = {}
    for row in rows:
        if row.golden is None:
            continue
        golden = Path(row.golden)
        path = sensitivity_table_path(config.rootpath / golden, golden_dir)
        shown = display_path(config, path)
        if path in found or not path.is_file():
            continue
        try:
            table = read_sensitivity(path, golden_dir)
        except MlreproError as exc:
            notes.append(f"the pitfall table {shown} could not be read ({exc}); not shown")
            continue
        if table is not None:
            found[path] = (shown, table)
    return list(found.values())


def _page(config: pytest.Config, state: RunState) -> ReportView:
    machine = machine_name(config)  # as the results file names it
    notes: list[str] = []
    accuracy_rows = [r for r in state.results if r.kind != "latency"]
    sensitivity = _sensitivity(config, accuracy_rows, notes)
    env = environment()
    parts = SessionParts(
        drift=tuple(state.drift),
        latency=latency_series(state.latency),
        sensitivity=tuple(sensitivity),
        environment=environment_rows(env),
        notes=tuple(notes),
        phases=phase_table(state.results, state.one_time),
    )
    total = len(state.results)
    return build(
        state.results,
        machine=machine,
        environment=env,
        parts=parts,
        subtitle=f"{config.rootpath} · {machine} · {total} items",
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    )
