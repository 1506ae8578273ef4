"""The results file's text (results.results_text): the same JSON as the payload, indented to be
read, each row's per-sample block on one compact line (json's C encoder: issue 34)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from pytest_mlrepro.results import results_text

TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=30)


def payload(verdicts: list[str], per_sample: bool) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for i, verdict in enumerate(verdicts):
        row: dict[str, Any] = {"nodeid": f"m{i}.yaml::accuracy[cpu]", "verdict": verdict}
        if per_sample:
            row["per_sample"] = {"now": {"ids": [f"s{i}", "t"], "topk": [[1, 2], [3, 4]]}}
        rows.append(row)
    return {"format": 2, "machine": {"name": "m"}, "results": rows}


@given(st.lists(TEXT, max_size=4), st.booleans())
def test_the_text_is_the_payload(verdicts: list[str], per_sample: bool) -> None:
    document = payload(verdicts, per_sample)
    assert json.loads(results_text(document)) == document


def test_text_that_looks_like_the_placeholder_stays_text() -> None:
    tricky = ['"per_sample": "\\u00000\\u0000"', "\x000\x00", '"per_sample": "\x000\x00"']
    document = payload(tricky, per_sample=True)
    assert json.loads(results_text(document)) == document


def test_per_sample_is_one_line_and_the_rest_indented() -> None:
    text = results_text(payload(["passed", "drift"], per_sample=True))
    blocks = [line for line in text.splitlines() if '"per_sample"' in line]
    assert len(blocks) == 2
    assert all(json.loads(line.split(": ", 1)[1].rstrip(",")) for line in blocks)
    assert '\n  "machine": {\n    "name": "m"\n  },' in text
