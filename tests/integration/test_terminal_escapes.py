"""One rule for text from data on a terminal (issue 31, point 3): control characters in class
names, sample ids, machine and manifest names read from results files, a cache's origin record,
layer names and framework exception texts are shown escaped (``\\x1b``), never sent raw to a
terminal where they could retitle the window, clear the screen or hide lines."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
from helpers import Project, sha256
from test_history_command import history, night
from test_merge_hostile_inputs import document, merge, write

from pytest_mlrepro._visible import visible, visible_lines
from pytest_mlrepro.diagnosis._layer_fingerprints import LayerDiff, LayerReport
from pytest_mlrepro.goldens import Results, compare, rounded_scores, top_k
from pytest_mlrepro.manifest import Tolerances
from pytest_mlrepro.report import explain
from pytest_mlrepro.report._diagnosis_text import layer_section

TITLE = "\x1b]0;PWNED-TITLE\x07"
RED = "\x1b[31mRED"
CSI = "\x9b2J"  # the C1 form of "clear the screen"
HOSTILE = f"e{TITLE}img{RED}{CSI}\u202e"
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def assert_shown_not_obeyed(text: str) -> None:
    raw = sorted(set(RAW.findall(text)))
    assert not raw, f"raw control characters reach the terminal: {raw!r}"
    assert "\\x1b]0;PWNED-TITLE\\x07" in text, "the escape is shown, visibly"


def test_control_characters_are_written_as_visible_escapes() -> None:
    assert visible("a\x1b[31mb") == "a\\x1b[31mb"
    assert visible("bell\x07 del\x7f c1\x9b nul\x00") == "bell\\x07 del\\x7f c1\\x9b nul\\x00"
    assert visible("two\nlines\r") == "two\\x0alines\\x0d", "a value never forges a line"
    assert visible("right\u202eto left") == "right\\u202eto left"
    assert visible("plain ünïcode → ok") == "plain ünïcode → ok"
    assert visible_lines("a\x1b\nb\tc") == "a\\x1b\nb\\x09c", "a message keeps its own lines"


def test_class_names_and_sample_ids_in_the_drift_text() -> None:
    ids = (f"{HOSTILE}0.png", "b.png", "c.png")
    golden_scores = np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.1, 0.8]])
    now_scores = golden_scores.copy()
    now_scores[0] = [0.1, 0.1, 0.8]

    def results(scores: np.ndarray) -> Results:
        topk = top_k(scores, 3)
        return Results(
            ids=ids,
            labels=np.array([0, 1, 2]),
            topk=topk,
            topk_scores=rounded_scores(np.take_along_axis(scores, topk, axis=1)),
        )

    comparison = compare(results(golden_scores), results(now_scores), now_scores, Tolerances())
    classes = (f"cat{TITLE}", "dog", f"bird{RED}\nFAKE LINE")
    text = explain(comparison, "golden/t.json", classes, "pytest --mlrepro-update")
    assert_shown_not_obeyed(text)
    assert "bird\\x1b[31mRED\\x0aFAKE LINE" in text
    assert "\nFAKE LINE" not in text, "a class name cannot start a line of its own"


def test_layer_names_in_the_layer_table() -> None:
    row = [0, 0, [1, 3], "float32", 0.0, 1.0, 2.0]
    shifted = [0, 0, [1, 3], "float32", 5.0, 1.0, 9.0]
    diffs = [
        LayerDiff(0, f"conv{TITLE}", "Conv", row, shifted, 5.0),
        LayerDiff(1, f"relu{RED}", f"Relu{CSI}", row, shifted, 7.0),
    ]
    report = LayerReport(probes=2, layers=2, alignment="name", diffs=diffs, first=diffs[0])
    assert_shown_not_obeyed("\n".join(layer_section(report)[1]))


def test_machine_and_manifest_names_from_results_files_in_merge(tmp_path: Path) -> None:
    hostile = document(machine=f"ci{TITLE}")
    hostile["results"][0]["manifest"] = f"tiny{RED}"
    first = write(tmp_path / "a.json", hostile)
    second = write(tmp_path / "b.json", document(machine=f"gpu{CSI}"))
    done = merge(first, second)
    assert done.returncode in (0, 1), done.stderr
    assert_shown_not_obeyed(done.stdout)
    assert "\\x9b2J" in done.stdout


def test_machine_names_from_results_files_in_history(tmp_path: Path) -> None:
    files = []
    for day in (1, 2):
        doc = night(day, drifted=day == 2)
        doc["machine"]["name"] = f"t4{TITLE}"
        files.append(write(tmp_path / f"n{day}.json", doc))
    done = history(*files)
    assert done.returncode == 0, done.stderr
    assert_shown_not_obeyed(done.stdout)


def test_a_forged_origin_record_and_a_framework_exception_text_in_failures(
    serial_project: Project,
) -> None:
    p = serial_project
    sha = sha256(p.assets / "models" / "tiny.onnx")
    text = p.manifest("tiny_onnx").replace(
        f"    path: ../models/tiny.onnx\n    sha256: {sha}\n",
        f"    cache: m.onnx\n    build: hostile\n    sha256: {sha}\n",
    )
    p.make({"m.yaml": text})
    # A builder whose failure text (as a framework's exception would) carries escapes.
    (p.path / "conftest.py").write_text(
        "import pytest_mlrepro\n\n"
        "@pytest_mlrepro.artifact_builder('hostile')\n"
        "def build(target):\n"
        f"    raise RuntimeError({TITLE + RED!r})\n"
    )
    result = p.run("--mlrepro-update")
    result.assert_outcomes(failed=1)
    assert_shown_not_obeyed(result.stdout.str())

    # Another file in the cache under the name, with a forged record that explains it.
    models = Path(os.environ["MLREPRO_CACHE"]) / "models"
    models.mkdir(parents=True, exist_ok=True)
    (models / "m.onnx").write_bytes(b"not the pinned bytes")
    other = sha256(models / "m.onnx")
    record = {"sha256": other, "source": "build", "from": f"x{TITLE}", "manifest": RED}
    (models / "m.onnx.origin.json").write_text(json.dumps(record))
    result = p.run()
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert_shown_not_obeyed(out)
    assert "excuses nothing: the file is refused either way" in out
