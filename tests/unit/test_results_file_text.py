"""The results file's text (results.results_text): the JSON of the rows' document, indented to be
read, each row's per-sample block on one compact line (json's C encoder: issue 34)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pytest_mlrepro.results import FORMAT, Document, Row, record, results_text, row_json, row_of

TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=30)


def text(rows: list[Row], environment: dict[str, Any], **fields: Any) -> str:
    given = {"format": FORMAT, "machine": {"name": "m", "environment": environment}, **fields}
    return results_text(record(Document, given, shard=None, results=tuple(rows)))


def rows(verdicts: list[str], per_sample: bool) -> list[Row]:
    out = []
    for i, verdict in enumerate(verdicts):
        row: dict[str, Any] = {"nodeid": f"m{i}.yaml::a", "outcome": "passed", "verdict": verdict}
        if per_sample:
            now = {"ids": [f"s{i}", "t"], "labels": [1, 3], "topk": [[1, 2], [3, 4]]}
            row["per_sample"] = {
                "now": {**now, "topk_scores": [[0.5, 0.25], [0.75, 0.125]]},
                "golden": None,
                "score_diff": {},
            }
        out.append(row_of(row))
    return out


@given(st.lists(TEXT, max_size=4), st.booleans())
def test_the_text_is_the_rows_document(verdicts: list[str], per_sample: bool) -> None:
    given_rows = rows(verdicts, per_sample)
    document = json.loads(text(given_rows, {"python": "3.11"}, created="x"))
    assert document["results"] == [row_json(row) for row in given_rows]
    assert {k: v for k, v in document.items() if k != "results"} == {
        "format": 2,
        "machine": {"name": "m", "environment": {"python": "3.11"}},
        "shard": None,
        "created": "x",
    }


def test_text_that_looks_like_the_placeholder_stays_text() -> None:
    tricky = ['"per_sample": "\\u00000\\u0000"', "\x000\x00", '"per_sample": "\x000\x00"']
    given_rows = rows(tricky, per_sample=True)
    document = json.loads(text(given_rows, {}))
    assert document["results"] == [row_json(row) for row in given_rows]


def test_per_sample_is_one_line_and_the_rest_indented() -> None:
    written = text(rows(["passed", "drift"], per_sample=True), {})
    blocks = [line for line in written.splitlines() if '"per_sample"' in line]
    assert len(blocks) == 2
    assert all(json.loads(line.split(": ", 1)[1].rstrip(",")) for line in blocks)
    assert '\n  "machine": {\n    "environment": {},\n    "name": "m"\n  },' in written
