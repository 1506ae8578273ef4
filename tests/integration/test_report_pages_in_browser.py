"""The three report pages opened in a real headless browser (Debian's ``chromium``): a session's
report (``--mlrepro-html``), a merged matrix (``mlrepro merge --html``) and a history
(``mlrepro history --html``), each made by the plugin and the commands from real runs of the tiny
project. Each page loads with no error and every image decodes; the failing item's cause,
manifest diff and changed samples are on the page, the merged matrix names the machine whose
pipeline differs apart from the one whose settings differ, and the trend chart has a point per
night. What the page must say is read from the results files, not written into the test.

With ``MLREPRO_REPORT_SCREENSHOTS=DIR`` the three pages' screenshots are kept in DIR
(docs/report.md shows them).
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from browser_helpers import needs_chromium, open_page, screenshot
from helpers import PREPROCESS_BGR, Project

from pytest_mlrepro.cli import main

pytest.importorskip("onnxruntime")
pytest.importorskip("jinja2")
pytest.importorskip("matplotlib")

pytestmark = needs_chromium
MANIFEST = "manifests/tiny_onnx.yaml"
RUNTIME = "runtime: {batch_size: 8, devices: [cpu]}"
ONE_THREAD = "runtime: {batch_size: 8, devices: [cpu], intra_op_threads: 1}"


@pytest.fixture(autouse=True, scope="module")
def _report_libraries_loaded() -> None:
    """Render a page with every chart before any in-process run (see test_html_report.py: a
    matplotlib imported afresh by a later run would mix its classes with the first import's)."""
    from pytest_mlrepro.report import html as report

    point = report.TrendPoint("2026-11-01", 1.0, 0.5, 1.5)
    report.render_html(
        report.ReportView(
            title="warm-up",
            matrix=report.MatrixTable(("manifest",), ()),
            accuracy=(
                report.AccuracyPoint("m", "a", "cpu", 50.0, 90.0, 50.0, 90.0, top1_tolerance=1),
            ),
            cross_machine=report.CrossMachine((report.MachineAgreement("m", "a", "b", 0.9),)),
            trends=(report.Trend("m", "a", "cpu", (point,), (point,), (point,), anchor="t"),),
        )
    )


def _open(page: Path, tmp_path: Path, fragment: str = "") -> str:
    """The DOM after the load event; the page's own checks (no error, every image decoded)
    asserted."""
    opened = open_page(page.resolve().as_uri() + fragment, tmp_path)
    opened.assert_healthy()
    return opened.dom


def _screenshot(page: Path, tmp_path: Path, name: str) -> None:
    """A screenshot of the page's top, checked not blank; kept (reduced to a palette, so that
    docs/images stays small) where MLREPRO_REPORT_SCREENSHOTS says."""
    picture = screenshot(page.resolve().as_uri(), tmp_path, tmp_path / f"{name}.png", 1280, 1500)
    target = os.environ.get("MLREPRO_REPORT_SCREENSHOTS")
    if target:
        from PIL import Image

        reduced = picture.convert("RGB").quantize(colors=64, dither=Image.Dither.NONE)
        reduced.save(Path(target) / f"report-{name}.png", optimize=True)


def _block(dom: str, css_class: str, **attributes: str) -> str:
    """The element ``<div class="css_class" …attributes…>`` up to the next one of its class."""
    where = "".join(
        f'(?=[^>]*{k.replace("_", "-")}="{re.escape(v)}")' for k, v in attributes.items()
    )
    found = re.search(
        rf'<div class="{css_class}"{where}[^>]*>.*?(?=<div class="{css_class}" |</section>)',
        dom,
        re.S,
    )
    assert found is not None, (css_class, attributes)
    return found.group(0)


def _accuracy_row(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    (row,) = [r for r in data["results"] if "::accuracy[" in r["nodeid"]]
    return row


def _changed_rows(block: str) -> list[tuple[str, str]]:
    """(sample id, the row's tag attributes) of each changed sample in a section."""
    tags = re.findall(r'<tr class="changed-sample"[^>]*>', block)
    return [(re.search(r'data-sample="([^"]+)"', t).group(1), t) for t in tags]  # type: ignore[union-attr]


def _run(project: Project, machine: str, *, decode: str | None = None, threads: bool = False,
         html_report: bool = False) -> Path:  # fmt: skip
    text = project.manifest("tiny_onnx", **({"decode": decode} if decode else {}))
    if threads:
        assert RUNTIME in text
        text = text.replace(RUNTIME, ONE_THREAD)
    (project.path / MANIFEST).write_text(text)
    args = ["--mlrepro-json", f"{machine}.json", "--mlrepro-machine", machine]
    if html_report:
        args += ["--mlrepro-html", "session.html"]
    project.run(*args)
    return project.path / f"{machine}.json"


def _cli(*args: str) -> None:
    assert main(list(args)) in (0, 1), args


@pytest.fixture
def drifted(serial_project: Project) -> Project:
    return serial_project.make({"tiny_onnx.yaml": serial_project.manifest("tiny_onnx")},
                               goldens=["tiny_onnx"])  # fmt: skip


def test_the_session_report_shows_why_the_item_failed(drifted: Project, tmp_path: Path) -> None:
    results = _run(drifted, "ci-1", decode=PREPROCESS_BGR, html_report=True)
    row = _accuracy_row(results)
    summary, changed = row["diagnosis_summary"], row["changed_samples"]
    page = drifted.path / "session.html"
    dom = _open(page, tmp_path)
    block = _block(dom, "drift", data_manifest="tiny_onnx")
    text = html.unescape(block)
    # The cause: the diagnosis' sentence and cause, as the results file keeps them.
    assert f'data-cause="{row["diagnosis"]}"' in block and row["diagnosis"] == "colour order"
    assert summary["lead"] in text
    # The manifest diff, line by line.
    (diff,) = [s for s in summary["sections"] if s["title"].startswith("manifest diff")]
    assert any("decode.order" in line for line in diff["lines"])
    section = re.search(r'data-section="manifest-diff">(.*?)</details>', text, re.S)
    assert section is not None and all(line in section.group(1) for line in diff["lines"])
    # Golden → now.
    top1 = re.search(
        r'<tr data-level="top-1 %" class="row-fail"><td>top-1 %</td>'
        r'<td class="num">([^<]+)</td><td class="num">([^<]+)</td>',
        block,
    )
    assert top1 is not None and (float(top1.group(1)), float(top1.group(2))) == (
        row["golden_top1"],
        round(row["top1"], 2),
    )
    # The changed samples, each with a thumbnail, filterable.
    rows = _changed_rows(block)
    assert [s for s, _ in rows] == [s["id"] for s in changed["samples"]]
    assert len(rows) == changed["count"] == 16
    assert block.count('<img class="thumbnail"') == 16
    one = changed["samples"][3]["id"]
    filtered = _block(_open(page, tmp_path, f"#filter={one}"), "drift", data_manifest="tiny_onnx")
    visible = [s for s, attrs in _changed_rows(filtered) if "hidden" not in attrs]
    assert visible == [s["id"] for s in changed["samples"] if one in s["id"]]
    assert "1 shown" in filtered or f"{len(visible)} shown" in filtered
    _screenshot(page, tmp_path, "session")


def test_the_merged_matrix_names_the_cause_and_tells_pipeline_from_settings(
    drifted: Project, tmp_path: Path
) -> None:
    alpha = _run(drifted, "alpha")
    beta = _run(drifted, "beta", decode=PREPROCESS_BGR)
    gamma = _run(drifted, "gamma", threads=True)
    assert _accuracy_row(gamma)["verdict"] == "pass"
    page = drifted.path / "matrix.html"
    _cli("merge", str(alpha), str(beta), str(gamma), "--html", str(page), "-q")
    dom = _open(page, tmp_path)
    from pytest_mlrepro.report.html import MATRIX_COLUMNS

    found = re.findall(
        r'<tr class="matrix-row[^"]*"[^>]*data-machine="([^"]+)"[^>]*>(.*?)</tr>', dom, re.S
    )
    rows = {
        machine: dict(
            zip(MATRIX_COLUMNS, map(html.unescape, re.findall(r"<td[^>]*>(.*?)</td>", body, re.S)))
        )
        for machine, body in found
    }
    assert set(rows) == {"alpha", "beta", "gamma"}
    beta_row = _accuracy_row(beta)
    assert rows["beta"]["likely cause"] == beta_row["diagnosis"] == "colour order"
    assert rows["beta"]["pipeline / settings"] == "another pipeline: decode.order"
    assert rows["gamma"]["pipeline / settings"] == "other settings: runtime.intra_op_threads"
    # In full, on top of the page (and as the cells' hover text).
    notes = html.unescape(dom.split('<ul class="notes">', 1)[1].split("</ul>", 1)[0])
    assert "tiny_onnx on beta [cpu]: another pipeline: inputs[0].preprocess[0].decode.order: " \
        "'RGB' → 'BGR'" in notes  # fmt: skip
    assert "tiny_onnx on gamma [cpu]: other settings (the same pipeline, run otherwise): " \
        "runtime.intra_op_threads 1 (the others' unset)" in notes  # fmt: skip
    assert "gamma [cpu]: another pipeline" not in notes
    assert rows["alpha"]["pipeline / settings"] == "-" and rows["alpha"]["likely cause"] == "-"
    block = html.unescape(_block(dom, "drift", data_machine="beta"))
    assert beta_row["diagnosis_summary"]["lead"] in block
    assert len(_changed_rows(block)) == beta_row["changed_samples"]["count"]
    _screenshot(page, tmp_path, "matrix")


def _points(dom: str, anchor: str, panel: str) -> int:
    uri = re.search(
        rf'<img src="data:image/svg\+xml;base64,([^"]+)"[^>]*data-trend="{anchor}"', dom
    )
    assert uri is not None, anchor
    root = ET.fromstring(base64.b64decode(uri.group(1)))
    group = next(e for e in root.iter() if e.get("id") == f"{anchor}-{panel}")
    return sum(1 for e in group.iter() if e.tag.endswith("}use"))


def test_the_history_page_has_a_point_per_night_and_what_changed(
    drifted: Project, tmp_path: Path
) -> None:
    nights = []
    for day, kwargs in enumerate(
        ({}, {"threads": True}, {"decode": PREPROCESS_BGR}, {"decode": PREPROCESS_BGR}), 1
    ):
        path = _run(drifted, f"night{day}", **kwargs)  # type: ignore[arg-type]
        data = json.loads(path.read_text())
        data["machine"]["name"] = "ci-1"
        data["created"] = f"2026-11-{day:02d}T02:00:00Z"  # the nights it stands for
        path.write_text(json.dumps(data))
        nights.append(str(path))
    page = drifted.path / "history.html"
    assert main(["history", *reversed(nights), "--html", str(page)]) == 0
    dom = _open(page, tmp_path)
    trend = _block(dom, "trend", data_machine="ci-1")
    assert 'data-nights="4"' in trend
    assert 'data-first-outside="2026-11-03 02:00 UTC"' in trend
    anchor = re.search(r'id="(trend-\d+)"', trend)
    assert anchor is not None
    for panel in ("top1", "agreement"):
        assert _points(dom, anchor.group(1), panel) == 4
    nights_listed = re.findall(r'<tr class="row-(\w+)" data-night="([^"]+)">', trend)
    assert [n for _, n in nights_listed] == [f"2026-11-0{d} 02:00 UTC" for d in (1, 2, 3, 4)]
    assert [m for m, _ in nights_listed] == ["pass", "pass", "fail", "fail"]
    changes = dict(re.findall(r'<li data-what="(\w+)"><strong>\w+</strong>: ([^<]+)</li>', trend))
    assert html.unescape(changes["pipeline"]) == (
        "inputs[0].preprocess[0].decode.order: 'RGB' → 'BGR'"
    )
    assert html.unescape(changes["settings"]) == "runtime.intra_op_threads: 1 → (none)"
    _screenshot(page, tmp_path, "history")
