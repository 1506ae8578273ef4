"""``matrix.build_history`` and its page: results files of many nights, ordered by their
``created`` time, each manifest × machine × device followed over the nights with its tolerance
bands, the first night outside tolerance and what changed that night."""

from __future__ import annotations

import base64
import copy
import random
import re
from typing import Any

import pytest

from pytest_mlrepro.matrix import HistoryError, build_history
from pytest_mlrepro.results import FORMAT, ResultsFileError, manifest_identity, validate_results

TOL = {"top1": 0.5, "top5": 0.5, "agreement": 0.99, "score": 0.01}
CONTENT: dict[str, Any] = {
    "name": "tiny",
    "inputs": [{"preprocess": [{"resize": {"method": "bilinear"}}]}],
    "runtime": {"intra_op_threads": None},
}


def _content(method: str = "bilinear", threads: int | None = None) -> dict[str, Any]:
    content = copy.deepcopy(CONTENT)
    content["inputs"][0]["preprocess"][0]["resize"]["method"] = method
    content["runtime"]["intra_op_threads"] = threads
    return content


def _accuracy(top1: float, content: dict[str, Any], *, failed: bool = False) -> dict[str, Any]:
    return {
        "kind": "accuracy",
        "manifest": "tiny",
        "device": "cpu",
        "nodeid": "manifests/tiny.yaml::accuracy[cpu]",
        "framework": "onnxruntime",
        "framework_version": "1.20.0",
        "top1": top1,
        "top5": 99.0,
        "golden_top1": 76.0,
        "golden_top5": 99.0,
        "agreement": 0.97 if failed else 1.0,
        "tolerances": TOL,
        "outcome": "failed" if failed else "passed",
        "verdict": "drift" if failed else "pass",
        **({"outside_tolerance": ["agreement"]} if failed else {}),
        **manifest_identity(content),
    }


def _latency(p50: float) -> dict[str, Any]:
    return {
        "kind": "latency",
        "manifest": "tiny",
        "device": "cpu",
        "batch": 1,
        "nodeid": "manifests/tiny.yaml::latency[cpu-b1]",
        "framework_version": "1.20.0",
        "outcome": "passed",
        "verdict": "pass",
        "p50_ms": p50,
        "golden_p50_ms": 2.0,
        "ratio_to_golden": p50 / 2.0,
        "latency_tolerance": {"p50": 1.25},
    }


def _night(
    day: int, rows: list[dict[str, Any]], env: dict[str, Any] | None = None, machine: str = "t4"
) -> Any:
    document = {
        "format": FORMAT,
        "created": f"2026-11-{day:02d}T02:30:00Z",
        "machine": {"name": machine, "environment": env or {"numeric_packages": {"ort": "1.20"}}},
        "shard": None,
        "results": rows,
    }
    return validate_results(document, f"night-{day}-{machine}.json")


def _nights() -> list[Any]:
    """Four nights of one machine: a thread-count change on the 2nd (inside tolerance), a
    resize change and a new onnxruntime on the 3rd (outside), still outside on the 4th."""
    return [
        _night(1, [_accuracy(76.0, _content()), _latency(2.0)]),
        _night(2, [_accuracy(76.1, _content(threads=1)), _latency(2.1)]),
        _night(
            3,
            [_accuracy(75.2, _content("bicubic", 1), failed=True), _latency(2.2)],
            {"numeric_packages": {"ort": "1.21"}},
        ),
        _night(
            4,
            [_accuracy(75.1, _content("bicubic", 1), failed=True), _latency(2.3)],
            {"numeric_packages": {"ort": "1.21"}},
        ),
    ]


def test_the_nights_are_ordered_by_their_time_not_by_the_order_given() -> None:
    files = _nights()
    shuffled = files[:]
    random.Random(3).shuffle(shuffled)
    history = build_history(shuffled)
    assert [n.day for n in history.nights] == [f"2026-11-0{d}" for d in (1, 2, 3, 4)]
    (series,) = history.series
    assert [p.top1 for p in series.points] == [76.0, 76.1, 75.2, 75.1]
    assert [p.p50_ms for p in series.points] == [2.0, 2.1, 2.2, 2.3]


def test_the_bands_the_first_night_outside_and_what_changed_that_night() -> None:
    (series,) = build_history(_nights()).series
    first = series.points[0]
    assert first.top1_band == (75.5, 76.5) and first.agreement_floor == 0.99
    assert first.p50_ceiling_ms == pytest.approx(2.5)
    assert [p.outside for p in series.points] == [False, False, True, True]
    assert series.first_outside == 2 and "drift" in series.points[2].why
    changes = dict(series.changes)
    # The 3rd night against the 2nd: the resize (pipeline) and onnxruntime (environment); the
    # thread count changed the night before, inside tolerance, and is not repeated.
    assert changes["pipeline"] == "inputs[0].preprocess[0].resize.method: 'bilinear' → 'bicubic'"
    assert changes["environment"] == "numeric_packages.ort: '1.20' → '1.21'"
    assert "settings" not in changes


def test_a_thread_change_is_named_as_settings() -> None:
    files = [*_nights()[:1], _night(2, [_accuracy(70.0, _content(threads=1), failed=True)])]
    (series,) = build_history(files).series
    assert dict(series.changes) == {
        "settings": "runtime.intra_op_threads: (none) → 1",
    }


def test_a_series_that_fails_on_its_first_night_says_there_is_nothing_before_it() -> None:
    (series,) = build_history(_nights()[2:]).series
    assert series.first_outside == 0
    assert series.changes == (("history", "the first night of this series: no night before it"),)


def test_a_file_without_a_time_is_refused_naming_it() -> None:
    document = {
        "format": FORMAT,
        "machine": {"name": "t4", "environment": {}},
        "shard": None,
        "results": [],
    }
    old = validate_results(document, "old.json")
    with pytest.raises(HistoryError, match=r"^old\.json: the results file has no 'created' time"):
        build_history([*_nights(), old])


@pytest.mark.parametrize(
    ("created", "message"),
    [
        ("yesterday", "'yesterday' does not match"),
        ("2026-13-45T02:30:00Z", "not a valid time"),
        (20261101, "20261101 is not of type 'string'"),
    ],
)
def test_a_bad_time_is_a_field_error(created: object, message: str) -> None:
    document = {"format": FORMAT, "created": created, "machine": {"name": "t4", "environment": {}},
                "shard": None, "results": []}  # fmt: skip
    with pytest.raises(ResultsFileError, match=r"^n\.json: \$\.created: ") as raised:
        validate_results(document, "n.json")
    assert message in str(raised.value)


def test_two_files_of_one_machine_on_one_night_are_refused_as_merge_refuses_them() -> None:
    twice = _night(1, [_accuracy(76.0, _content())])
    with pytest.raises(HistoryError, match=r"^the night of 2026-11-01: .*has this result twice"):
        build_history([_nights()[0], twice])


def test_the_history_page_has_a_point_per_night_and_the_first_night_outside() -> None:
    pytest.importorskip("jinja2")
    pytest.importorskip("matplotlib")
    from pytest_mlrepro.report import html as report

    files = _nights() + [_night(d, [_accuracy(76.0, _content())], machine="a100") for d in (1, 3)]
    view = report.history_view(build_history(files))
    assert [t.machine for t in view.trends] == ["a100", "t4"]
    t4 = view.trends[1]
    assert t4.first_outside == "2026-11-03 02:30 UTC"
    assert [p.value for p in t4.top1] == [76.0, 76.1, 75.2, 75.1]
    assert [p.value for p in t4.agreement] == [100.0, 100.0, 97.0, 97.0]  # percent
    page = report.render_html(view)
    charts = dict(re.findall(r'src="(data:image/svg\+xml;base64,[^"]+)" alt="trend of [^"]+" '
                             r'data-trend="([^"]+)"', page))  # fmt: skip
    svg = {
        anchor: base64.b64decode(uri.split(",", 1)[1]).decode() for uri, anchor in charts.items()
    }
    for anchor, nights in (("trend-1", 2), ("trend-2", 4)):
        for panel in ("top1", "agreement", "latency"):
            markers = points_in(svg[anchor], f"{anchor}-{panel}")
            if anchor == "trend-1" and panel == "latency":
                assert markers is None  # a100 measured no latency: no panel
                continue
            assert markers == nights, (anchor, panel)
    assert 'data-first-outside="2026-11-03 02:30 UTC"' in page
    assert len(re.findall(r'<tr class="row-\w+" data-night="', page)) == 2 + 4


def points_in(svg: str, gid: str) -> int | None:
    """The markers drawn in the SVG group ``gid`` (a scatter: one ``<use>`` per point); None
    without the group."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(svg)
    for element in root.iter():
        if element.get("id") == gid:
            return sum(1 for e in element.iter() if e.tag.endswith("}use"))
    return None
