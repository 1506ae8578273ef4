"""The HTML report's core without pytest: the view model rendered (escaping, every section,
determinism), tensors as pictures, and the usage error without the report's libraries."""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import re

import numpy as np
import pytest
from helpers import pitfall_table

from pytest_mlrepro.diagnosis import PitfallRow
from pytest_mlrepro.matrix import Cell
from pytest_mlrepro.report import html as report
from pytest_mlrepro.report.html import _render
from pytest_mlrepro.results import Row

pytest.importorskip("jinja2")
pytest.importorskip("matplotlib")


def _png(data: str) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(base64.b64decode(data))))


def _view(**changes: object) -> report.ReportView:
    """A merged matrix's view: two machines, one flagged."""
    columns = ("manifest", "machine", "device", "top-1 %", "verdict")
    rows = (
        report.MatrixRow(
            "resnet",
            "ci-a",
            "cpu",
            (
                report.TableCell("resnet"),
                report.TableCell("ci-a"),
                report.TableCell("cpu"),
                report.TableCell("76.10"),
                report.TableCell("pass", "pass"),
            ),
            "pass",
        ),
        report.MatrixRow(
            "resnet",
            "ci-b",
            "cuda",
            (
                report.TableCell("resnet"),
                report.TableCell("ci-b"),
                report.TableCell("cuda"),
                report.TableCell("74.90", "fail", "outside ±0.5"),
                report.TableCell("drift", "fail"),
            ),
            "fail",
        ),
    )
    values: dict[str, object] = {
        "title": "nightly matrix",
        "matrix": report.MatrixTable(columns, rows),
        "cross_machine": report.CrossMachine(
            pairs=(
                report.MachineAgreement("resnet", "ci-a", "ci-b", 0.97, 0.02, 1000, True),
                report.MachineAgreement("resnet", "ci-a", "ci-c", 1.0, 1e-6, 1000, False),
            ),
            flagged=(("resnet", ("ci-b",)),),
        ),
        "accuracy": (
            report.AccuracyPoint("resnet", "ci-a", "cpu", 76.1, 93.0, 76.1, 93.0, 1.0),
            report.AccuracyPoint("resnet", "ci-b", "cuda", 74.9, 92.0, 76.1, 93.0, 0.97, True),
        ),
        "notes": ("2 results files merged",),
        "summary": {"pass": 1, "fail": 1},
    }
    values.update(changes)
    return report.ReportView(**values)  # type: ignore[arg-type]


def test_a_merged_matrix_renders_with_its_cross_machine_agreement() -> None:
    page = report.render_html(_view())
    assert page.startswith("<!DOCTYPE html>")
    rows = re.findall(r'<tr class="matrix-row row-(\w+)" data-manifest="resnet" '
                      r'data-machine="([^"]+)" data-device="(\w+)"', page)  # fmt: skip
    assert rows == [("pass", "ci-a", "cpu"), ("fail", "ci-b", "cuda")]
    assert '<td class="cell-fail num" title="outside ±0.5">74.90</td>' in page
    assert 'id="cross-machine"' in page and 'alt="cross-machine agreement chart"' in page
    assert re.search(r'<li class="flagged"><strong>resnet</strong>: ci-b disagrees', page)
    pairs = re.findall(r'<tr class="row-(\w+)"><td>resnet</td><td>ci-a</td><td>(ci-\w)</td>', page)
    assert pairs == [("fail", "ci-b"), ("pass", "ci-c")]
    assert "2 results files merged" in page
    # The sections without data are left out, not shown empty.
    for absent in ('id="latency"', 'id="sensitivity"', 'id="drift"', 'id="environment"'):
        assert absent not in page


def test_the_page_is_the_same_for_the_same_view() -> None:
    """Charts carry no date and a fixed hash salt: a report can be diffed and cached."""
    assert report.render_html(_view()) == report.render_html(_view())


def test_every_text_of_the_view_is_escaped() -> None:
    hostile = '<script>alert("x")</script>'
    row = report.MatrixRow(
        hostile, "m", "cpu", (report.TableCell(hostile, "fail", hostile),), "fail", 'x" onclick="y'
    )
    view = _view(
        title=hostile,
        matrix=report.MatrixTable((hostile,), (row,)),
        notes=(hostile,),
        cross_machine=None,
        accuracy=(),
    )
    page = report.render_html(view)
    assert hostile not in page and 'x" onclick' not in page
    assert page.count("&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") >= 5


def test_charts_of_every_kind_are_inline_svg() -> None:
    view = _view(
        latency=(report.LatencySeries("m cpu b1 model", (1.0, 1.2, 1.1), golden_p50_ms=1.0),),
        sensitivity=(
            (
                "golden/pitfalls/m.json",
                pitfall_table(
                    80.0,
                    PitfallRow("bgr", "colour order", "BGR instead of RGB", 40.0, 60.0, 0.5),
                    PitfallRow("crop", "crop", "no crop", error="shape mismatch"),
                ),
            ),
        ),
    )
    page = report.render_html(view)
    charts = re.findall(r'<img src="data:image/svg\+xml;base64,([^"]+)" alt="([^"]+)"', page)
    assert [alt for _, alt in charts] == [
        "accuracy chart",
        "cross-machine agreement chart",
        "latency distributions",
        "pitfall sensitivity of m",
    ]
    for data, _ in charts:
        svg = base64.b64decode(data).decode()
        assert "<svg" in svg and "<path" in svg
        assert not re.search(r'(?:href|src)="https?:', svg)  # the namespace URIs only
    assert "cannot run: shape mismatch" in page


def test_an_output_is_shown_in_its_own_channel_order_on_one_scale() -> None:
    hwc = np.zeros((4, 6, 3), np.float32)
    hwc[:, :, 0] = 2.0  # red
    chw = hwc[:, :, ::-1].transpose(2, 0, 1).copy()  # the same picture, BGR, channels first
    chw[0, 0, 0] = -1.0  # one value outside the golden's range
    image = report.drift_image("s", hwc, chw, "HWC", "CHW")
    assert image.value_range == (-1.0, 2.0) and image.max_abs_diff == 3.0
    assert image.golden_shape == (4, 6, 3) and image.now_shape == (3, 4, 6)
    golden, now, diff = _png(image.golden_png), _png(image.now_png), _png(image.diff_png)
    assert golden.shape == now.shape == (4, 6, 3) and diff.shape == (4, 6, 3)
    assert tuple(golden[1, 1]) == (255, 85, 85)  # red 2.0 → white end, zeros → 1/3 grey
    assert tuple(now[1, 1]) == (85, 85, 255)  # blue first: the channel order as it is
    assert tuple(diff[0, 0]) == (255, 255, 255)  # the largest difference is white
    assert image.changed_fraction == pytest.approx(2 / 3)  # red and blue differ, green not
    drift = report.DriftSet("m", "", "cpu", "decode", probes=(image,), layers=((1, "conv", 0.5),))
    assert report.from_plain(json.loads(json.dumps(dataclasses.asdict(drift)))) == drift


def test_outputs_that_cannot_be_compared_say_why() -> None:
    a = np.zeros((8, 8, 3), np.uint8)
    shapes = report.drift_image("s", a, np.zeros((4, 4, 3), np.uint8), "HWC", "HWC")
    assert shapes.golden_png and shapes.now_png and not shapes.diff_png
    assert "differ in shape" in shapes.note
    flat = report.drift_image("s", np.zeros(10), np.ones(10), "HWC", "HWC")
    assert not flat.golden_png and "not images" in flat.note
    nan = np.zeros((2, 2, 1), np.float32)
    nan[0, 0, 0] = np.nan
    odd = report.drift_image("s", np.ones((2, 2, 1), np.float32), nan, "HWC", "HWC")
    assert "non-finite" in odd.note and odd.max_abs_diff == 1.0
    same = report.drift_image("s", a, a, "HWC", "HWC")
    assert same.max_abs_diff == 0.0 and _png(same.diff_png).max() == 0


def test_without_the_libraries_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_render, "LIBRARIES", ("jinja2", "mlrepro_no_such_library"))
    with pytest.raises(report.ReportUnavailable) as info:
        report.render_html(_view())
    assert str(info.value) == (
        "the HTML report needs mlrepro_no_such_library, which is not installed: "
        "pip install 'pytest-mlrepro[report]'"
    )


def _cell(results: tuple[Row, ...] = (), latency: tuple[Row, ...] = ()) -> Cell:
    return Cell(
        manifest="m",
        manifest_digest=None,
        machine="ci-a",
        device="cuda",
        framework="onnxruntime" if results else None,
        framework_version="1.20.0" if results else None,
        hardware_slug=None,
        sources=(),
        results=results,
        latency=latency,
        other_pipeline=None,
    )


def test_a_matrix_row_marks_the_failed_levels_and_the_latency() -> None:
    accuracy = Row(
        nodeid="m.yaml::accuracy[cuda]",
        outcome="failed",
        status="failed",
        kind="accuracy",
        verdict="drift",
        samples=1000,
        top1=74.9,
        top5=92.0,
        agreement=0.97,
        max_score_diff=0.0123,
        top5_changed=5,  # results.LISTED
        outside_tolerance=("top1", "agreement"),
    )
    latency = Row(
        nodeid="m.yaml::latency[cuda]",
        outcome="failed",
        status="failed",
        kind="latency",
        verdict="regression",
        batch=1,
        p50_ms=12.345,
        ratio_to_golden=1.94,
        decided_by="p50 ×1.94 the golden's (normalised ×1.02: the machine was slower)",
    )
    row = report.matrix_row(_cell((accuracy,), (latency,)), anchor="drift-1")
    cells = dict(zip(report.MATRIX_COLUMNS, row.cells))
    assert [c.text for c in row.cells] == [
        "m", "ci-a", "cuda", "onnxruntime", "1.20.0", "1000", "74.90", "92.00", "0.9700",
        "0.0123", "5", "12.3 ms", "×1.94", "-", "-", "drift; latency: regression",
    ]  # fmt: skip
    marked = {name for name, cell in cells.items() if cell.status == "fail"}
    assert marked == {"top-1 %", "agreement", "latency p50", "×golden", "verdict"}
    assert cells["×golden"].title.startswith("p50 ×1.94")
    assert cells["×golden"].title.endswith("b1: p50 12.3 ms (regression)")
    empty = report.matrix_row(_cell())
    assert [c.text for c in empty.cells][3:] == ["-"] * 13
    page = report.render_html(_view(matrix=report.MatrixTable(report.MATRIX_COLUMNS, (row,))))
    assert '<a href="#drift-1">drift; latency: regression</a>' in page


def test_a_large_output_is_shown_reduced_and_a_single_differing_pixel_stays_visible() -> None:
    golden = np.full((1000, 700, 3), 100, np.uint8)
    now = golden.copy()
    now[501, 2, 1] = 101  # one value, off by one
    image = report.drift_image("photo", golden, now, "HWC", "HWC")
    assert image.reduced == 3 and image.max_abs_diff == 1.0
    assert image.golden_shape == (1000, 700, 3)  # the output's own shape is said
    diff = _png(image.diff_png)
    assert _png(image.golden_png).shape == (334, 234, 3) and diff.shape == (334, 234, 3)
    # The one differing pixel survives the reduction, on the fixed scale: one level of the
    # 0..255 range is the legend's "1 level" colour, a dim red (1/8 of the way to white), not
    # the white a largest-difference-is-white scale would make of it.
    one_level = report.level_colour(1.0)
    assert tuple(diff[167, 0]) == tuple(int(one_level[i : i + 2], 16) for i in (1, 3, 5))
    assert tuple(diff[167, 0]) == (96, 0, 0) and int(diff.sum()) == 96
    assert image.level == 1.0 and image.full == 255.0
    drift = report.DriftSet("m", "", "cpu", "decode", probes=(image,), layers=((1, "conv", 0.5),))
    assert report.from_plain(json.loads(json.dumps(dataclasses.asdict(drift)))) == drift
    page = report.render_html(
        _view(drift=(report.DriftSet("m", "a", "cpu", "decode", probes=(image,)),))
    )
    assert "shown at 1/3 size" in page


def test_a_tex_like_manifest_name_is_drawn_as_text_in_the_layer_chart() -> None:
    """Every chart is made with mathtext off (``charts``), the layer chart too: its title names
    the manifest, which a TeX-like name (``$\\foo{$``) would otherwise crash."""
    drift = report.DriftSet(
        "$\\foo{$", "a", "cpu", "decode", layers=((0, "conv", 0.5), (1, "fc", 2e-3)), anchor="d1"
    )
    page = report.render_html(_view(drift=(drift,)))
    assert 'alt="difference from the golden by layer depth"' in page
