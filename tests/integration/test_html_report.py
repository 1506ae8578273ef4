"""The HTML report (``--mlrepro-html``): one self-contained page with the session's matrix, its
charts and, for a drifted item, the preprocessing pictures of the first differing step; opened
in a real headless browser (Debian's ``chromium``) where one is installed. Which step the
pictures show, and how, for each kind of edit: tests/unit/test_drift_pictures.py."""

from __future__ import annotations

import base64
import html
import io
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from browser_helpers import needs_chromium, open_page, screenshot
from helpers import Project, drifted_project, pitfall_table, short_reference

from pytest_mlrepro.cli import main
from pytest_mlrepro.diagnosis import PitfallRow
from pytest_mlrepro.report.html import MATRIX_COLUMNS as COLUMNS

pytest.importorskip("onnxruntime")
pytest.importorskip("jinja2")
pytest.importorskip("matplotlib")


@pytest.fixture(autouse=True, scope="module")
def _report_libraries_loaded() -> None:
    """Render one small page before any in-process run: pytester drops the modules a run
    imported, and matplotlib, imported afresh in a later run, mixes its classes with those of
    the first import (as onnx would: tests/conftest.py). Loaded here, they outlive the runs."""
    from pytest_mlrepro.report import html as report

    view = report.ReportView(
        title="warm-up",
        matrix=report.MatrixTable(("manifest",), ()),
        accuracy=(
            report.AccuracyPoint(
                "m", "host", "cpu", 50.0, 90.0, 50.0, 90.0, top1_tolerance=1, top5_tolerance=1
            ),
        ),
        latency=(report.LatencySeries("m", (1.0, 2.0, 3.0), golden_p50_ms=2.0),),
        sensitivity=(("x", pitfall_table(50.0, PitfallRow("p", "p", "d", 1.0, 2.0, 0.5))),),
        cross_machine=report.CrossMachine((report.MachineAgreement("m", "a", "b", 0.9),)),
    )
    report.render_html(view)


@pytest.fixture(autouse=True)
def _short_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    short_reference(monkeypatch)  # the latency item of _full_project


PNG = re.compile(r'<img class="drift-image (drift-\w+)" src="data:image/png;base64,([^"]+)"')


LATENCY = (
    "latency: {batch_sizes: [1], min_rounds: 5, min_time: 0.05, max_time: 2,"
    " warmup_rounds: 2, warmup_time: 0, attempts: 2, tolerance: {p50: 4.0}}\n"
)


def _full_project(project: Project) -> Project:
    """The drifted project, with a latency golden for tiny_loose and its pitfall table."""
    drifted_project(project)
    path = project.path / "manifests" / "tiny_loose.yaml"
    path.write_text(path.read_text() + LATENCY)
    with open(project.path / "pytest.ini", "a") as fh:
        fh.write("mlrepro_latency_max_contention = 1\n")  # no verdict is asserted on
    project.run("--mlrepro-update", "-k", "latency").assert_outcomes(passed=1)
    # The command in this process (pytester's folder is the current one): what it saves is
    # the subject here, the command itself is test_pitfalls.py's.
    command = ["pitfalls", "manifests/tiny_loose.yaml", "--save"]
    assert main([*command, "--only", "colour order", "--only", "resize"]) == 0
    assert (project.path / "golden" / "pitfalls" / "tiny_loose.json").is_file()
    return project


def _matrix_rows(page: str) -> dict[str, str]:
    rows = re.findall(r'(<tr class="matrix-row[^"]*" data-manifest="([^"]+)".*?</tr>)', page, re.S)
    return {name: row for row, name in rows}


def _decode(data: str) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(base64.b64decode(data))))


def _assert_self_contained(page: str) -> None:
    """Nothing on the page is fetched from anywhere: no URL in a src or href, no @import, no
    url() but data: ones."""
    assert not re.search(r'(?:src|href)\s*=\s*["\']?\s*(?:https?:)?//', page, re.I), "remote link"
    assert "@import" not in page
    assert all(u.startswith("data:") for u in re.findall(r"url\(([^)]*)\)", page))
    srcs = re.findall(r'src="([^"]*)"', page)
    assert srcs and all(s.startswith("data:image/") for s in srcs), srcs[:3]


@pytest.mark.about_xdist  # the pictures travel with an xdist worker's report
def test_a_drifted_manifest_gets_its_preprocessing_pictures(project: Project) -> None:
    drifted_project(project)
    result = project.run("--mlrepro-html", "out/report.html")
    result.assert_outcomes(passed=1, failed=1)
    page = (project.path / "out" / "report.html").read_text(encoding="utf-8")
    _assert_self_contained(page)

    rows = _matrix_rows(page)
    assert set(rows) == {"tiny_onnx", "tiny_loose"}
    assert 'class="matrix-row row-fail"' in rows["tiny_onnx"]
    cells = dict(zip(COLUMNS, re.findall(r"<td([^>]*)>(.*?)</td>", rows["tiny_onnx"], re.S)))
    # The levels outside tolerance are marked (top-1, agreement, score), top-5 is not: the
    # swap moves classes 0 and 2 within the top 3 of 3 classes.
    failed = {name for name, (attrs, _) in cells.items() if "cell-fail" in attrs}
    assert failed == {"top-1 %", "agreement", "max score diff", "likely cause", "verdict"}, cells
    assert cells["likely cause"][1] == "colour order"  # the diagnosis' cause, on the row
    assert "drift" in cells["verdict"][1] and cells["top-1 %"][1] == "33.33"
    assert 'class="matrix-row row-pass"' in rows["tiny_loose"] and ">pass<" in rows["tiny_loose"]
    assert "cell-fail" not in rows["tiny_loose"]
    assert "onnxruntime" in rows["tiny_onnx"] and "cpu" in rows["tiny_onnx"]

    # The drifted item's pictures: the first differing step (the decode that now gives BGR),
    # three probe samples, each with the golden's output, the current one and the difference.
    block = re.search(
        r'<div class="drift" id="(drift-\d+)" data-manifest="tiny_onnx"'
        r'.*?(?=<div class="drift" |</section>)',
        page,
        re.S,
    )
    assert block is not None, "no pictures for the drifted manifest"
    assert f'href="#{block.group(1)}"' in rows["tiny_onnx"]  # its verdict links to them
    text = block.group(0)
    assert '<span class="step first-step">decode</span>' in text
    assert "channels in the order of each output: golden RGB, now BGR; layout HWC; uint8" in text
    assert "colour order" in text  # the diagnosis' cause
    probes = [
        tuple(part.split('">', 1)) for part in text.split('<div class="probe" data-sample="')[1:]
    ]
    assert len(probes) == 3, text[:2000]
    for sample, body in probes:
        kinds = [k for k, _ in PNG.findall(body)]
        assert kinds == ["drift-golden", "drift-now", "drift-diff"], (sample, kinds)
        golden, now, diff = (_decode(d) for _, d in PNG.findall(body))
        # The pictures are the decoded image as RGB and as BGR: the same pixels, red and
        # blue swapped; the difference is bright where red and blue differ.
        assert golden.shape == now.shape == (40, 48, 3)
        assert np.array_equal(golden[:, :, ::-1], now)
        assert not np.array_equal(golden, now)
        assert diff.shape[:2] == (40, 48) and diff.max() == 255
        peak = float(np.abs(golden.astype(int) - now.astype(int)).max())
        shown = re.search(r"max \|Δ\| = ([0-9.e+]+)", html.unescape(body))
        assert shown is not None and float(shown.group(1)) == peak
    # No picture on the passing manifest.
    section = page.split('<section id="drift">', 1)[1].split("</section>", 1)[0]
    assert "tiny_loose" not in section


def test_the_report_costs_a_passing_item_nothing(project: Project) -> None:
    """Without a drift there are no pictures (nothing re-run), and the page still has the
    matrix (a manifest that does not load is a failed row) and the accuracy chart."""
    project.make(
        {
            "tiny_onnx.yaml": project.manifest("tiny_onnx"),
            "broken.yaml": project.manifest("broken").replace("classes: 3", "classes: three"),
        },
        goldens=["tiny_onnx"],
    )
    result = project.run("--mlrepro-html", "report.html")
    result.assert_outcomes(passed=1, failed=1)
    page = (project.path / "report.html").read_text(encoding="utf-8")
    rows = _matrix_rows(page)
    assert set(rows) == {"tiny_onnx", "manifests/broken.yaml"}
    assert 'class="matrix-row row-fail"' in rows["manifests/broken.yaml"]
    assert ">invalid manifest</td>" in rows["manifests/broken.yaml"]
    assert 'id="drift"' not in page and "drift-image" not in page
    assert 'alt="accuracy chart"' in page


def test_the_ini_key_and_an_unwritable_target(project: Project) -> None:
    drifted_project(project)
    (project.path / "pytest.ini").write_text(
        "[pytest]\nmlrepro_data = data\nmlrepro_html = reports/session.html\n"
    )
    result = project.run()
    result.assert_outcomes(passed=1, failed=1)
    page = (project.path / "reports" / "session.html").read_text(encoding="utf-8")
    assert set(_matrix_rows(page)) == {"tiny_onnx", "tiny_loose"}
    (project.path / "blocked").write_text("a file, not a folder")
    refused = project.run("--mlrepro-html", "blocked/report.html")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert "report file (--mlrepro-html)" in refused.stderr.str()
    assert "Traceback" not in refused.stderr.str() + refused.stdout.str()


def test_a_report_that_cannot_be_written_at_the_end_fails_the_run(
    serial_project: Project,
) -> None:
    """The folder is writable (checked before the run), the target itself is a folder: the
    run says so in red and its exit status is non-zero, as for --mlrepro-json."""
    serial_project.make(
        {"tiny_onnx.yaml": serial_project.manifest("tiny_onnx")}, goldens=["tiny_onnx"]
    )
    (serial_project.path / "report.html").mkdir()
    result = serial_project.run("--mlrepro-html", "report.html")
    result.assert_outcomes(passed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["mlrepro: *report.html is a folder*report file (--mlrepro-html)*"])
    assert "Traceback" not in result.stdout.str()


def test_without_the_report_libraries_the_option_is_a_usage_error(serial_project: Project) -> None:
    """jinja2 or matplotlib missing: a usage error naming the extra, never a traceback."""
    serial_project.make(
        {"tiny_onnx.yaml": serial_project.manifest("tiny_onnx")}, goldens=["tiny_onnx"]
    )
    blocker = serial_project.path / "blocker"
    blocker.mkdir()
    # A module finder that refuses jinja2, first on sys.path of the subprocess.
    (blocker / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'jinja2':\n"
        "            raise ModuleNotFoundError(name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, _Block())\n"
    )
    env = os.environ.get("PYTHONPATH", "")
    serial_project.pytester._monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(blocker), env]) if env else str(blocker)
    )
    result = serial_project.run("--mlrepro-html", "report.html", subprocess=True)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "--mlrepro-html needs jinja2" in err and "pip install 'pytest-mlrepro[report]'" in err
    assert "Traceback" not in err + result.stdout.str()
    assert not (serial_project.path / "report.html").exists()


def test_latency_distributions_and_the_pitfall_table_are_charted(serial_project: Project) -> None:
    project = _full_project(serial_project)
    project.run("--mlrepro-html", "report.html")
    page = (project.path / "report.html").read_text(encoding="utf-8")
    _assert_self_contained(page)
    rows = _matrix_rows(page)
    cells = dict(zip(COLUMNS, re.findall(r"<td[^>]*>(.*?)</td>", rows["tiny_loose"], re.S)))
    assert cells["latency p50"].endswith(" ms") and cells["×golden"].startswith("×")
    assert "latency:" in cells["verdict"]
    assert cells["latency p50"] == "-" or float(cells["latency p50"].split()[0]) > 0
    assert _matrix_rows(page)["tiny_onnx"].count("<td") == len(COLUMNS)
    # The latency chart, and its numbers: both measurements of the one latency item.
    assert 'alt="latency distributions"' in page
    series = re.findall(r'<tr class="row-\w+" data-series="([^"]+)">(.*?)</tr>', page, re.S)
    assert [name for name, _ in series] == [
        "tiny_loose cpu b1 model",
        "tiny_loose cpu b1 end_to_end",
    ]
    for _, body in series:
        numbers = re.findall(r'<td class="num">([^<]*)</td>', body)
        assert int(numbers[0]) >= 5 and float(numbers[4]) > 0  # rounds; the golden's p50
    # The pitfall table as a chart, read from where `mlrepro pitfalls --save` put it.
    assert 'alt="pitfall sensitivity of tiny_loose"' in page
    assert "from golden/pitfalls/tiny_loose.json" in page
    table = page.split('<details class="chart-data" data-manifest="tiny_loose">', 1)[1]
    table = table.split("</details>", 1)[0]
    pitfalls = re.findall(r'<tr data-pitfall="([^"]+)">', table)
    assert "colour order" in pitfalls and "resize" in pitfalls
    # Swapping red and blue moves every red and blue sample: agreement 1/3 on this data set.
    bgr = re.search(
        r'data-pitfall="colour order"><td>[^<]*</td><td>([^<]*)</td>.*?([0-9.]+)%', table, re.S
    )
    assert bgr is not None and float(bgr.group(2)) < 50.0, table[:1500]


# --- a real browser -----------------------------------------------------------------------------


@needs_chromium
def test_the_report_opens_in_a_headless_browser(serial_project: Project, tmp_path: Path) -> None:
    _full_project(serial_project)  # a drift, a latency chart, a pitfall chart
    serial_project.run("--mlrepro-html", "report.html")
    page = serial_project.path / "report.html"
    url = page.resolve().as_uri()

    opened = open_page(url, tmp_path)
    dom, attributes = opened.dom, opened.attributes
    # Nothing on the console (chromium logs every console message to stderr), and the page's
    # own script ran to its end (the load event) and recorded no error: no uncaught exception,
    # no console.error, no image that failed to load or decode.
    assert opened.console == []
    opened.assert_healthy()
    # Nine drift pictures, the accuracy, latency and pitfall charts and a thumbnail of each of
    # the 16 changed samples, all decoded.
    thumbnails = len(re.findall(r'<img class="thumbnail"', dom))
    assert thumbnails == 16
    assert int(attributes["data-images"]) == 3 * 3 + 3 + thumbnails
    assert set(_matrix_rows(dom)) == {"tiny_onnx", "tiny_loose"}
    assert len(re.findall(r'class="drift-image drift-diff"', dom)) == 3
    assert '<span class="step first-step">decode</span>' in dom

    # The checks can fail: the same page with an error and a broken picture is caught.
    broken = tmp_path / "broken.html"
    broken.write_text(
        page.read_text(encoding="utf-8").replace(
            "</body>",
            '<img src="data:image/png;base64,AAAA" alt="bad">'
            '<script>console.error("on purpose")</script></body>',
        ),
        encoding="utf-8",
    )
    bad = open_page(broken.as_uri(), tmp_path)
    assert bad.attributes["data-errors"] != "0" and bad.attributes["data-broken-images"] == "1"
    assert any("on purpose" in line for line in bad.console)

    shot = tmp_path / "report.png"
    screenshot(url, tmp_path, shot, 1280, 2000)
    target = os.environ.get("MLREPRO_REPORT_SCREENSHOT")  # keep it, for a person to look at
    if target:
        shutil.copyfile(shot, target)
