"""The one HTML builder (``report.html``): a pure function of results rows. A session's rows and a
merged matrix give the same view; a failed comparison's section carries the diagnosis, the
golden → now table and the changed samples; a thread-count-only difference is "other
settings", never "another pipeline"; the charts are honest (the change against the golden on
its tolerance band, axes that end at 100 %)."""

from __future__ import annotations

import base64
import copy
import re
from typing import Any

import pytest
from helpers import pitfall_table

from pytest_mlrepro.diagnosis import PitfallRow
from pytest_mlrepro.matrix import build_matrix
from pytest_mlrepro.report import html as report
from pytest_mlrepro.results import (
    FORMAT,
    manifest_identity,
    row_of,
    validate_results,
)

pytest.importorskip("jinja2")
pytest.importorskip("matplotlib")

IDS = [f"s{i}.png" for i in range(6)]
TOL = {"top1": 0.5, "top5": 0.5, "agreement": 0.99, "score": 0.001}
MANIFEST: dict[str, Any] = {
    "name": "tiny",
    "version": "1",
    "framework": {"name": "onnxruntime"},
    "inputs": [{"name": "input", "preprocess": [{"decode": {"backend": "pil", "order": "RGB"}}]}],
    "runtime": {"batch_size": 8, "intra_op_threads": None},
    "tolerances": TOL,
}
SUMMARY = {
    "cause": "colour order",
    "lead": "Likely cause: colour order — the manifest changed decode.order from 'RGB' to 'BGR'.",
    "sections": [
        {
            "title": "manifest diff against the manifest the golden was recorded with:",
            "lines": ["inputs[0].preprocess[0].decode.order: 'RGB' → 'BGR'"],
        },
        {"title": "environment diff against the golden's:", "lines": ["none"]},
    ],
}


def _results(top1: list[int]) -> dict[str, Any]:
    return {
        "ids": IDS,
        "labels": [0, 1, 2, 0, 1, 2],
        "topk": [[c, (c + 1) % 3] for c in top1],
        "topk_scores": [[0.7, 0.2] for _ in IDS],
    }


def _manifest(**runtime: Any) -> dict[str, Any]:
    content = copy.deepcopy(MANIFEST)
    content["runtime"].update(runtime)
    return content


def _row(content: dict[str, Any], *, drifted: bool = False) -> dict[str, Any]:
    golden = [0, 1, 2, 0, 1, 2]
    now = [2, 1, 0, 2, 1, 0] if drifted else golden
    row: dict[str, Any] = {
        "kind": "accuracy",
        "manifest": "tiny",
        "device": "cpu",
        "framework": "onnxruntime",
        "framework_version": "1.20.0",
        "nodeid": "manifests/tiny.yaml::accuracy[cpu]",
        "samples": 6,
        "top1": 33.3333 if drifted else 100.0,
        "top5": 100.0,
        "golden_top1": 100.0,
        "golden_top5": 100.0,
        "agreement": 0.333333 if drifted else 1.0,
        "max_score_diff": 0.5 if drifted else 0.0,
        "tolerances": TOL,
        "outcome": "failed" if drifted else "passed",
        "verdict": "drift" if drifted else "pass",
        "per_sample": {
            "now": _results(now),
            "golden": _results(golden),
            "score_diff": {s: 0.5 if a != b else 0.0 for s, a, b in zip(IDS, now, golden)},
        },
        **manifest_identity(content),
    }
    if drifted:
        row["diagnosis"] = "colour order"
        row["diagnosis_summary"] = SUMMARY
        row["outside_tolerance"] = ["top1", "agreement", "score"]
        row["changed_samples"] = {
            "count": 4,
            "samples": [
                {"id": s, "label": f"{g} c{g}", "golden": f"{g} c{g}", "now": f"{n} c{n}"}
                for s, g, n in zip(IDS, golden, now)
                if g != n
            ],
        }
    return row


def _file(machine: str, rows: list[dict[str, Any]], env: dict[str, Any] | None = None) -> Any:
    document = {
        "format": FORMAT,
        "machine": {"name": machine, "environment": env or {"python": "3.11"}},
        "shard": None,
        "results": rows,
    }
    return validate_results(document, f"{machine}.json")


def _thumbnail() -> str:
    import io

    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 30, 30)).save(buffer, format="PNG")
    return report.thumbnail(buffer.getvalue())


def test_a_session_view_is_the_matrix_view_of_its_own_results_document() -> None:
    """The view of the session's typed rows is the one ``mlrepro merge --html`` makes of the same
    rows as a file."""
    rows = [_row(MANIFEST, drifted=True)]
    parts = report.SessionParts()
    session = report.session_view(
        [row_of(r) for r in rows], machine="ci-1", environment={"python": "3.11"}, parts=parts
    )
    merged = report.matrix_view(build_matrix([_file("ci-1", rows)]), parts=parts)
    assert session.matrix == merged.matrix
    assert session.drift == merged.drift
    assert session.accuracy == merged.accuracy


def test_a_failed_comparison_gets_its_why_the_diagnosis_the_table_and_the_changed_samples() -> None:
    picture = _thumbnail()
    parts = report.SessionParts(
        drift=(report.DriftSet("tiny", "", "cpu", "", thumbnails={"s0.png": picture}),)
    )
    view = report.session_view(
        [row_of(_row(MANIFEST, drifted=True))], machine="ci-1", environment={}, parts=parts
    )
    (section,) = view.drift
    assert section.diagnosis == "colour order" and section.lead == SUMMARY["lead"]
    assert section.sections[0][1] == ("inputs[0].preprocess[0].decode.order: 'RGB' → 'BGR'",)
    table = {m.level: m for m in section.metrics}
    assert (table["top-1 %"].golden, table["top-1 %"].now, table["top-1 %"].change) == (
        "100.00",
        "33.33",
        "-66.67",
    )
    assert table["top-1 %"].failed and not table["top-5 %"].failed
    assert table["top-1 agreement"].failed and table["max score diff"].failed
    assert [c.sample for c in section.changed] == ["s0.png", "s2.png", "s3.png", "s5.png"]
    assert section.changed_count == 4
    assert section.changed[0].thumbnail_png == picture and section.changed[1].thumbnail_png == ""
    (row,) = view.matrix.rows
    cells = dict(zip(report.MATRIX_COLUMNS, row.cells))
    assert cells["likely cause"].text == "colour order"
    assert cells["likely cause"].title == SUMMARY["lead"]
    assert row.anchor == section.anchor
    page = report.render_html(view)
    assert html_text(page).count(SUMMARY["lead"]) >= 1
    assert 'data-section="manifest-diff"' in page
    assert len(re.findall(r'<tr class="changed-sample" data-sample=', page)) == 4
    assert f'src="data:image/png;base64,{picture}"' in page


def html_text(page: str) -> str:
    import html

    return html.unescape(page)


def test_a_passing_view_has_no_section_and_says_no_cause() -> None:
    view = report.session_view(
        [row_of(_row(MANIFEST))], machine="ci-1", environment={}, parts=report.SessionParts()
    )
    assert view.drift == ()
    (row,) = view.matrix.rows
    cells = dict(zip(report.MATRIX_COLUMNS, row.cells))
    assert cells["likely cause"].text == "-" and cells["verdict"].text == "pass"


def test_a_thread_count_is_a_setting_not_another_pipeline() -> None:
    """Three machines: alpha and gamma run the manifest as is, beta with one intra-op thread:
    beta is named for its settings, and every pair is the same pipeline. A changed decode is
    another pipeline, named with the field that differs."""
    same = _row(MANIFEST)
    threads = _row(_manifest(intra_op_threads=1))
    matrix = build_matrix(
        [_file("alpha", [same]), _file("beta", [threads]), _file("gamma", [copy.deepcopy(same)])]
    )
    cells = {c.machine: c for c in matrix.cells}
    assert all(c.other_pipeline is None for c in cells.values())
    assert cells["alpha"].other_settings is None and cells["gamma"].other_settings is None
    assert cells["beta"].other_settings is not None
    assert "runtime.intra_op_threads 1 (the others' unset)" in cells["beta"].other_settings
    (agreement,) = matrix.agreement
    assert all(p.same_pipeline for p in agreement.pairs) and not agreement.pipelines_differ

    bgr = _manifest()
    bgr["inputs"][0]["preprocess"][0]["decode"]["order"] = "BGR"
    matrix = build_matrix(
        [_file("alpha", [same]), _file("beta", [_row(bgr, drifted=True)]), _file("gamma", [same])]
    )
    cells = {c.machine: c for c in matrix.cells}
    assert cells["beta"].other_pipeline is not None
    assert "inputs[0].preprocess[0].decode.order: 'RGB' → 'BGR'" in cells["beta"].other_pipeline
    assert cells["beta"].other_settings is None
    view = report.matrix_view(matrix)
    row = next(r for r in view.matrix.rows if r.machine == "beta")
    differs = dict(zip(report.MATRIX_COLUMNS, row.cells))["pipeline / settings"]
    assert differs.text == "another pipeline: decode.order" and differs.status == "warn"
    assert "decode.order: 'RGB' → 'BGR'" in differs.title
    assert any(n.startswith("tiny on beta [cpu]: another pipeline: inputs[0]") for n in view.notes)
    assert dict(zip(report.MATRIX_COLUMNS, row.cells))["likely cause"].text == "colour order"


def test_a_thread_variable_of_the_machine_is_a_setting_too() -> None:
    matrix = build_matrix(
        [
            _file("alpha", [_row(MANIFEST)], {"numeric_settings": {}}),
            _file("beta", [_row(MANIFEST)], {"numeric_settings": {"OMP_NUM_THREADS": "1"}}),
            _file("gamma", [_row(MANIFEST)], {"numeric_settings": {}}),
        ]
    )
    cells = {c.machine: c for c in matrix.cells}
    assert cells["beta"].other_pipeline is None
    assert "environment OMP_NUM_THREADS '1' (the others' unset)" in str(
        cells["beta"].other_settings
    )


def _svg(uri: str) -> str:
    return base64.b64decode(uri.split(",", 1)[1]).decode()


def _axis_limits(svg: str) -> list[str]:
    """The tick labels' texts are drawn as paths: read them from the SVG comments matplotlib
    writes for each text artist."""
    return re.findall(r"<!-- ([^>]*?) -->", svg)


def test_the_accuracy_chart_is_the_change_against_the_golden_on_its_tolerance() -> None:
    """A 0.2-point drift against a ±0.5 tolerance: the axis spans about ±0.65 points, not 0–100
    (on which 0.2 is invisible), and a row without a golden's numbers is left out."""
    points = [
        report.AccuracyPoint("m", "a", "cpu", 76.3, 93.0, 76.1, 93.0, top1_tolerance=0.5,
                             top5_tolerance=0.5),
        report.AccuracyPoint("n", "a", "cpu", 50.0, 80.0),  # no golden: not on the chart
    ]  # fmt: skip
    from pytest_mlrepro.report.html._charts import accuracy_chart

    svg = _svg(accuracy_chart(points) or "")
    texts = _axis_limits(svg)
    assert "+0.20" in texts and "m · a · cpu" in texts and "n · a · cpu" not in texts
    ticks = [float(t.replace("−", "-")) for t in texts if re.fullmatch(r"[−-]?\d+\.\d+", t)]
    assert ticks and max(abs(t) for t in ticks) < 1.0  # a ±0.65 axis, not 0–100
    assert accuracy_chart([points[1]]) is None


def test_agreement_and_sensitivity_axes_end_at_100_percent() -> None:
    from pytest_mlrepro.report.html._charts import agreement_chart, sensitivity_chart

    cross = report.CrossMachine((report.MachineAgreement("m", "a", "b", 1.0, 0.0, 6),))
    texts = _axis_limits(_svg(agreement_chart(cross) or ""))
    ticks = [float(t) for t in texts if re.fullmatch(r"\d+(\.\d+)?", t)]
    assert max(ticks) == 100.0, ticks
    table = pitfall_table(50.0, PitfallRow("p", "p", "d", 50.0, 60.0, 1.0))
    texts = _axis_limits(_svg(sensitivity_chart(table)))
    ticks = [float(t) for t in texts if re.fullmatch(r"\d+(\.\d+)?", t)]
    assert max(ticks) == 100.0, ticks


def test_the_difference_picture_has_a_fixed_scale_in_levels() -> None:
    """One level of an 8-bit output is the same dim red whatever else differs, a channel swap
    of the full range is white: the scale says what a level is, the largest difference does
    not set it."""
    import numpy as np

    golden = np.zeros((4, 4, 3), np.uint8)
    small, large = golden.copy(), golden.copy()
    small[0, 0, 0] = 1
    large[0, 0, 0] = 1
    large[3, 3, 0] = 255
    a = report.drift_image("a", golden, small, "HWC", "HWC")
    b = report.drift_image("b", golden, large, "HWC", "HWC")
    from PIL import Image

    def pixels(data: str) -> Any:
        import io

        return np.asarray(Image.open(io.BytesIO(base64.b64decode(data))))

    assert tuple(pixels(a.diff_png)[0, 0]) == tuple(pixels(b.diff_png)[0, 0]) == (96, 0, 0)
    assert tuple(pixels(b.diff_png)[3, 3]) == (255, 255, 255)
    assert a.level == b.level == 1.0
    # Floats: one level is the shown range / 255.
    zeros, twos = np.zeros((2, 2, 1), np.float32), np.full((2, 2, 1), 2.0, np.float32)
    f = report.drift_image("f", zeros, twos, "HWC", "HWC")
    assert f.full == pytest.approx(2.0) and f.level == pytest.approx(2.0 / 255)


def test_a_shard_runs_own_report_shows_its_part_as_not_compared_not_failed() -> None:
    """A session that ran shard 1/2 has no shard 2 to merge with: its row is shown as it is,
    not compared yet (the merge decides), never a failed merge."""
    row = _row(MANIFEST)
    row.update(shard={"index": 1, "count": 2}, verdict="shard 1/2 compared (verdict at the merge)")
    view = report.session_view(
        [row_of(row)], machine="ci-1", environment={}, parts=report.SessionParts()
    )
    (shown,) = view.matrix.rows
    assert shown.status == "skip" and view.summary == {"skip": 1}
    cells = dict(zip(report.MATRIX_COLUMNS, shown.cells))
    assert cells["verdict"].text == "shard 1/2 compared (verdict at the merge)"


def test_the_merged_markdown_says_the_cause_and_the_other_settings() -> None:
    from pytest_mlrepro.report import markdown

    bgr = _manifest()
    bgr["inputs"][0]["preprocess"][0]["decode"]["order"] = "BGR"
    matrix = build_matrix(
        [
            _file("alpha", [_row(MANIFEST)]),
            _file("beta", [_row(bgr, drifted=True)]),
            _file("gamma", [_row(_manifest(intra_op_threads=2))]),
            _file("delta", [_row(MANIFEST)]),
        ]
    )
    text = markdown(matrix)
    assert f"- tiny on beta [cpu]: failed: accuracy: drift — {SUMMARY['lead']}" in text
    assert (
        "- tiny on gamma [cpu]: other settings (the same pipeline, run otherwise): "
        "runtime.intra_op_threads 2 (the others' unset)"
    ) in text
    assert "- tiny on beta [cpu]: another pipeline: inputs[0].preprocess[0].decode.order" in text
    assert "gamma [cpu]: another pipeline" not in text
