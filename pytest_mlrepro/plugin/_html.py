"""pytest glue for the HTML report (``--mlrepro-html PATH``): the option, the pictures a drifted
accuracy item collects (carried on its report, also across xdist), and the page written at the
end of the session from the session's rows (on the controller only under xdist).

The page itself is :mod:`pytest_mlrepro.report.html` (jinja2 and matplotlib, the ``report``
extra): imported only when a report is asked for, so that importing the plugin imports neither.
A passing item pays nothing for the report; a drifted one re-runs its preprocessing (golden and
current pipeline) on a few probe samples, only when a report is asked for.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ._base import Row, machine_name, report_output_error

if TYPE_CHECKING:
    from ..report.html import (
        AccuracyPoint,
        DriftSet,
        LatencySeries,
        MatrixRow,
        ReportView,
        SensitivityTable,
        Status,
    )
    from ._base import RunState

REPORT_ATTRIBUTE = "mlrepro_drift"  # the attribute of a report that carries an item's pictures
_drift_key = pytest.StashKey[dict[str, Any]]()


def html_path(config: pytest.Config) -> Path | None:
    """The report's path: the option's relative to where pytest runs, the ini key's relative
    to the rootdir; None when no report is asked for."""
    given = config.getoption("mlrepro_html", default=None)
    if given:
        path = Path(given)
        return path if path.is_absolute() else Path(os.getcwd()) / path
    ini = str(config.getini("mlrepro_html") or "").strip()
    if ini:
        path = Path(ini)
        return path if path.is_absolute() else config.rootpath / path
    return None


def check_html_target(config: pytest.Config) -> None:
    """A usage error before anything runs: no report libraries, or a folder it cannot be
    written to (asked on the controller; the workers write no report)."""
    target = html_path(config)
    if target is None or hasattr(config, "workerinput"):
        return
    from .._files import check_writable_folder
    from ..errors import OutputError
    from ..report.html import ReportUnavailable, require_libraries

    try:
        require_libraries("--mlrepro-html")
        check_writable_folder(target.parent, "report file (--mlrepro-html)")
    except (ReportUnavailable, OutputError) as exc:
        raise pytest.UsageError(f"{exc}. Nothing was run.") from None


# --- the drifted item's pictures ----------------------------------------------------------------


def collect_drift(item: Any, golden: Any, comparison: Any, result: Any) -> None:
    """For a drifted accuracy item, when a report is asked for: the first differing step's
    outputs on a few probe samples, as pictures, kept for its report. Never fails the item (a
    picture that cannot be made is a note in the report)."""
    if html_path(item.config) is None:
        return
    data: dict[str, Any] = {
        "manifest": item.manifest.name,
        "device": item.device,
        "failures": list(comparison.failures),  # the levels outside tolerance: marked cells
    }
    try:
        from ..diagnosis import first_step_outputs
        from ..report.html import drift_image, plain

        changed = [c.id for c in comparison.changed]
        outputs = first_step_outputs(item.manifest, golden, result.samples, prefer=changed)
        data.update(
            step=outputs.step,
            status=outputs.status,
            description=outputs.description,
            golden_index=outputs.golden_index,
            now_index=outputs.now_index,
            note=outputs.note,
            channels=_channels(outputs.golden_order, outputs.now_order),
            layout=_layouts(outputs.golden_layout, outputs.now_layout),
            dtype=_dtypes(outputs.probes),
            probes=[
                plain(
                    drift_image(
                        p.sample, p.golden, p.now, outputs.golden_layout, outputs.now_layout
                    )
                )
                for p in outputs.probes
            ],
        )
    except Exception as exc:  # the report is a bonus: the verdict stands on its own
        data.update(step="", probes=[], note=f"no pictures ({type(exc).__name__}: {exc})")
    item.stash[_drift_key] = data


def _channels(golden: str, now: str) -> str:
    if golden == now:
        return f"channels in {now} order"
    return f"channels in the order of each output: golden {golden}, now {now}"


def _layouts(golden: str, now: str) -> str:
    return now if golden == now else f"golden {golden}, now {now}"


def _dtypes(probes: list[Any]) -> str:
    kinds = []
    for p in probes[:1]:
        for side, array in (("golden", p.golden), ("now", p.now)):
            if array is not None:
                kinds.append((side, str(array.dtype)))
    if len({k for _, k in kinds}) == 1:
        return kinds[0][1]
    return ", ".join(f"{side} {kind}" for side, kind in kinds)


def keep_layers(item: Any, layers: list[tuple[int, str, float]]) -> None:
    """The diagnosis's layer comparison, for the drifted item's chart (when a report is asked
    for: collect_drift made its entry). inf (a shape change) is kept as a large number: the
    report's data crosses to the xdist controller as JSON."""
    data = item.stash.get(_drift_key, None)
    if data is not None and layers:
        data["layers"] = [[d, n, v if math.isfinite(v) else 1e6] for d, n, v in layers]


def drift_of(item: pytest.Item) -> dict[str, Any] | None:
    """The pictures :func:`collect_drift` kept for ``item``, for its call's report (an attribute
    of plain data, which xdist's report serialisation carries to the controller)."""
    return item.stash.get(_drift_key, None)


def drift_row(report: pytest.TestReport) -> Row | None:
    """An item's pictures from its report; None for other reports."""
    data = getattr(report, REPORT_ATTRIBUTE, None)
    if report.when == "call" and isinstance(data, dict):
        return {**data, "nodeid": report.nodeid}
    return None


# --- the page at the end of the session ---------------------------------------------------------


def write_html_report(session: pytest.Session, state: RunState) -> None:
    """The report, when --mlrepro-html (or the ini key) asks for one (on the controller)."""
    path = html_path(session.config)
    if path is None:
        return
    from ..errors import MlreproError
    from ..report.html import write_html

    try:
        view = session_view(session.config, state)
        write_html(path, view, what="report file (--mlrepro-html)")
    except MlreproError as exc:  # OutputError, ReportUnavailable
        report_output_error(session, str(exc))
    except Exception as exc:  # a report that cannot be made is said, not a traceback at exit
        report_output_error(
            session, f"the HTML report {path} could not be made ({type(exc).__name__}: {exc})"
        )


def _status(outcome: object) -> Status:
    statuses: dict[str, Status] = {"passed": "pass", "failed": "fail", "skipped": "skip"}
    return statuses.get(str(outcome), "")


def _key(row: Row) -> tuple[str, str]:
    """(manifest, device) of a row ("-" for a manifest that did not load: no device)."""
    return str(row.get("manifest") or "-"), str(row.get("device") or "-")


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _num(value: object, spec: str) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-"
    return format(value, spec) if math.isfinite(value) else str(value)


@dataclass(frozen=True)
class _Latency:
    """What the matrix shows of a manifest × device's latency items."""

    p50_ms: float | None = None
    ratio: float | None = None
    failed: bool = False
    note: str = ""  # hover text: every measurement, which ratio decided
    verdicts: str = ""


def _latency(rows: list[Row]) -> _Latency:
    """The smallest batch's model measurement (the others in the hover text)."""
    if not rows:
        return _Latency()
    rows = sorted(rows, key=lambda r: int(r.get("batch", 0)))
    hover: list[str] = []
    first: tuple[Row, dict[str, Any], dict[str, Any]] | None = None
    for r in rows:
        for name, m in (r.get("measurements") or {}).items():
            judgement = (m.get("judgements") or [{}])[0]
            text = f"b{r.get('batch')} {name}: p50 {_num(m.get('p50_ms'), '.3g')} ms"
            if judgement.get("ratio") is not None:
                text += f", ×{judgement['ratio']:.2f} the golden's {judgement.get('statistic')}"
            hover.append(text + f" ({r.get('verdict', '')})")
            if first is None and name == "model":
                first = (r, m, judgement)
    if first is None:
        measured: dict[str, dict[str, Any]] = rows[0].get("measurements") or {}
        only: dict[str, Any] = next(iter(measured.values()), {})
        first = (rows[0], only, (only.get("judgements") or [{}])[0])
    r, m, judgement = first
    p50, ratio = m.get("p50_ms"), judgement.get("ratio")
    decided = str(r.get("decided_by") or "")  # format 2: the sentence that says which ratio
    return _Latency(
        p50_ms=float(p50) if isinstance(p50, (int, float)) else None,
        ratio=float(ratio) if isinstance(ratio, (int, float)) else None,
        failed=any(_status(x.get("outcome")) == "fail" for x in rows),
        note="; ".join([decided, *hover] if decided else hover),
        verdicts=", ".join(sorted({str(x["verdict"]) for x in rows if x.get("verdict")})),
    )


def _golden_metrics(config: pytest.Config, row: Row) -> tuple[float | None, float | None]:
    """The golden's top-1/top-5, read from the golden the row was compared with."""
    from .. import goldens as golden_store
    from ..errors import MlreproError
    from ._base import settings_key

    shown = row.get("golden")
    verdict = str(row.get("verdict", ""))
    if not isinstance(shown, str) or verdict.startswith("golden "):
        return None, None  # a golden written by this run holds this run's numbers
    path = Path(shown) if Path(shown).is_absolute() else config.rootpath / shown
    try:
        golden = golden_store.read(path, config.stash[settings_key].golden_dir)
    except (MlreproError, OSError):
        return None, None
    if golden is None:
        return None, None
    return golden.results.top1, golden.results.top5


def _sensitivity(
    config: pytest.Config, rows: list[Row], notes: list[str]
) -> list[SensitivityTable]:
    """The pitfall sensitivity tables kept beside the goldens of these rows (golden/pitfalls/)."""
    from .. import goldens as golden_store
    from ..diagnosis import sensitivity_table_path
    from ..errors import MlreproError
    from ..report.html import SensitivityBar, SensitivityTable
    from ._base import display_path, settings_key

    golden_dir = config.stash[settings_key].golden_dir
    tables, seen = [], set()
    for row in rows:
        shown = row.get("golden")
        if not isinstance(shown, str) or shown in seen:
            continue
        seen.add(shown)
        golden = Path(shown) if Path(shown).is_absolute() else config.rootpath / shown
        path = sensitivity_table_path(golden, golden_dir)
        if not path.is_file():
            continue
        where = display_path(config, path)
        try:
            # A golden of its own kind: read by the golden store's bounded reader.
            data = golden_store.read_json(path, "pitfall table", golden_dir)
            if data is None:
                continue
            declared = data["declared"]
            bars = tuple(
                SensitivityBar(
                    pitfall=str(r["pitfall"]),
                    description=str(r["description"]),
                    top1=None if r.get("top1") is None else float(r["top1"]),
                    agreement=None if r.get("agreement") is None else float(r["agreement"]),
                    error=None if r.get("error") is None else str(r["error"]),
                )
                for r in data["rows"]
            )
            tables.append(
                SensitivityTable(
                    manifest=str(data.get("name", row.get("manifest"))),
                    source=where,
                    samples=int(data["samples"]),
                    declared_top1=float(declared["top1"]),
                    bars=bars,
                )
            )
        except (MlreproError, OSError, ValueError, KeyError, TypeError) as exc:
            notes.append(f"the pitfall table {where} could not be read ({exc}); not shown")
    return tables


def _drift_sets(rows: list[Row], machine: str) -> dict[tuple[str, str], DriftSet]:
    from ..report.html import DriftSet, from_plain

    sets = {}
    for index, d in enumerate(sorted(rows, key=lambda d: (str(d["manifest"]), str(d["device"])))):
        key = (str(d["manifest"]), str(d["device"]))
        sets[key] = DriftSet(
            manifest=key[0],
            machine=machine,
            device=key[1],
            step=str(d.get("step") or ""),
            status=str(d.get("status") or ""),
            description=str(d.get("description") or ""),
            golden_index=d.get("golden_index"),
            now_index=d.get("now_index"),
            channels=str(d.get("channels") or ""),
            layout=str(d.get("layout") or ""),
            dtype=str(d.get("dtype") or ""),
            probes=tuple(from_plain(p) for p in d.get("probes") or [] if isinstance(p, dict)),
            layers=tuple(
                (int(depth), str(name), float(delta))
                for depth, name, delta in d.get("layers") or []
            ),
            note=str(d.get("note") or ""),
            anchor=f"drift-{index + 1}",
        )
    return sets


def session_view(config: pytest.Config, state: RunState) -> ReportView:
    """The report of this session: one matrix row per manifest × device, the charts, the
    drifted items' pictures."""
    from dataclasses import replace

    from ..fingerprint import environment
    from ..report.html import (
        MATRIX_COLUMNS,
        AccuracyPoint,
        LatencySeries,
        Matrix,
        ReportView,
        matrix_row,
    )

    machine = machine_name(config)  # as the results file names it
    notes: list[str] = []
    accuracy_rows = [r for r in state.results if r.get("kind") != "latency"]
    latency_by_key: dict[tuple[str, str], list[Row]] = {}
    for r in state.latency:
        latency_by_key.setdefault(_key(r), []).append(r)
    by_key: dict[tuple[str, str], list[Row]] = {}
    for r in accuracy_rows:
        by_key.setdefault(_key(r), []).append(r)
    drift = _drift_sets(state.drift, machine)
    drift_failures = {
        (str(d["manifest"]), str(d["device"])): [str(f) for f in d.get("failures") or []]
        for d in state.drift
    }
    for key, d in list(drift.items()):
        rows = by_key.get(key, [])
        cause = next((str(r["diagnosis"]) for r in rows if r.get("diagnosis")), "")
        if cause:
            drift[key] = replace(d, diagnosis=cause)

    matrix_rows: list[MatrixRow] = []
    points: list[AccuracyPoint] = []
    counts: dict[str, int] = {}
    for key in sorted(set(by_key) | set(latency_by_key)):
        manifest, device = key
        rows = sorted(by_key.get(key, []), key=lambda r: str(r.get("nodeid")))
        latency = latency_by_key.get(key, [])
        main = next((r for r in rows if r.get("kind") in (None, "accuracy")), None)
        main = main or (rows[0] if rows else latency[0])
        statuses = [_status(r.get("outcome")) for r in [*rows, *latency]]
        row_status: Status = (
            "fail" if "fail" in statuses else "pass" if "pass" in statuses else "skip"
        )
        counts[row_status] = counts.get(row_status, 0) + 1
        verdicts = []
        for r in rows:
            kind = r.get("kind")
            text = str(r.get("verdict", r.get("outcome", "")))
            verdicts.append(text if kind in (None, "accuracy") else f"{kind}: {text}")
        timing = _latency(latency)
        if timing.verdicts:
            verdicts.append(f"latency: {timing.verdicts}")
        accuracy_status = _status(main.get("outcome")) if main in rows else ""
        matrix_rows.append(
            matrix_row(
                manifest=manifest,
                machine=machine,
                device=device,
                status=row_status,
                verdict="; ".join(v for v in verdicts if v),
                framework=str(main.get("framework") or ""),
                version=str(main.get("framework_version") or ""),
                samples=_int(main.get("samples")) if main in rows else None,
                top1=_float(main.get("top1")),
                top5=_float(main.get("top5")),
                agreement=_float(main.get("agreement")),
                max_score_diff=_float(main.get("max_score_diff")),
                failed_levels=drift_failures.get(key, ()),
                latency_p50_ms=timing.p50_ms,
                latency_ratio=timing.ratio,
                latency_failed=timing.failed,
                latency_note=timing.note,
                verdict_note=str(main.get("diagnosis") or ""),
                anchor=drift[key].anchor if key in drift else "",
            )
        )
        if main in rows and isinstance(main.get("top1"), (int, float)):
            golden_top1, golden_top5 = _golden_metrics(config, main)
            points.append(
                AccuracyPoint(
                    manifest,
                    machine,
                    device,
                    float(main["top1"]),
                    float(main["top5"]) if isinstance(main.get("top5"), (int, float)) else None,
                    golden_top1,
                    golden_top5,
                    main.get("agreement") if isinstance(main.get("agreement"), float) else None,
                    accuracy_status == "fail",
                )
            )

    series: list[LatencySeries] = []
    for r in sorted(state.latency, key=lambda r: str(r.get("nodeid"))):
        for bench in r.get("benchmarks") or []:
            name = str((bench.get("params") or {}).get("measurement", ""))
            data = (bench.get("stats") or {}).get("data") or []
            m = (r.get("measurements") or {}).get(name, {})
            golden = next(
                (
                    j.get("golden_ms")
                    for j in m.get("judgements") or []
                    if j.get("statistic") == "p50"
                ),
                None,
            )
            series.append(
                LatencySeries(
                    label=f"{r.get('manifest')} {r.get('device')} b{r.get('batch')} {name}",
                    rounds_ms=tuple(float(v) * 1e3 for v in data),
                    machine="",
                    golden_p50_ms=golden if isinstance(golden, (int, float)) else None,
                    verdict=str(r.get("verdict", "")),
                    failed=_status(r.get("outcome")) == "fail",
                )
            )

    sensitivity = _sensitivity(config, accuracy_rows, notes)
    for key in sorted(by_key):
        failed = any(
            _status(r.get("outcome")) == "fail" and r.get("verdict") == "drift" for r in by_key[key]
        )
        if failed and key not in drift:
            notes.append(
                f"{key[0]} [{key[1]}] drifted; no preprocessing pictures were made for it (its "
                "results could not be compared sample by sample)"
            )
    if not matrix_rows:
        notes.append("no manifest item ran in this session")
    env = environment()
    env_rows = tuple((k, _env_value(v)) for k, v in sorted(env.items()))
    total = len(state.results) + len(state.latency)
    return ReportView(
        title="pytest-mlrepro report",
        subtitle=f"{config.rootpath} · {machine} · {total} items",
        generated=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        matrix=Matrix(MATRIX_COLUMNS, tuple(matrix_rows)),
        accuracy=tuple(points),
        latency=tuple(series),
        sensitivity=tuple(sensitivity),
        drift=tuple(drift[k] for k in sorted(drift)),
        notes=tuple(notes),
        environment=env_rows,
        summary={k: counts[k] for k in ("fail", "pass", "skip") if k in counts},
    )


def _env_value(value: Any) -> str:
    """An environment value as the report shows it: ISA flags space-separated, packages and
    settings as ``name value`` pairs, anything else as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return " ".join(value) or "none"
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return ", ".join(f"{k} {v}" for k, v in value.items()) or "none"
    return json.dumps(value)
