"""The terminal's sections as text (report/_terminal.py, report/_text.py): pure functions of the
session's rows, tested without a pytest run (the runs that produce the rows are tested through
pytester in tests/integration)."""

from __future__ import annotations

from typing import Any

from pytest_mlrepro.data import Shard
from pytest_mlrepro.report import (
    aligned,
    audit_lines,
    latency_table,
    reference_lines,
    shard_lines,
    summary_table,
)
from pytest_mlrepro.results import Row, row_of


def test_aligned_columns_start_at_the_same_place_and_lines_end_without_spaces() -> None:
    lines = aligned([("a", "long header", "x"), ("longer cell", "b", "")], indent="  ")
    assert lines == ["  a            long header  x", "  longer cell  b"]
    assert lines[0].index("long header") == lines[1].index("b")


def test_aligned_puts_each_mark_after_its_row() -> None:
    lines = aligned([("top-1", "1"), ("top-5", "22")], marks=["", "  ✗"])
    assert lines == ["top-1  1", "top-5  22  ✗"]
    assert aligned([]) == []


LATENCY_ROW = {
    "nodeid": "m.yaml::latency[cpu-b8]",
    "outcome": "failed",
    "manifest": "m",
    "device": "cpu",
    "batch": 8,
    "verdict": "regression",
    "decided_by": "model p50 ×1.60 > ×1.25",
    "measurements": {
        "model": {
            "rounds": 50,
            "p50_ms": 16.0,
            "judgements": [
                {"statistic": "p50", "golden_ms": 10.0, "now_ms": 16.0, "ratio": 1.6,
                 "normalised": 1.55},
            ],
        },
        "end_to_end": {"rounds": 20, "p50_ms": 30.0},
    },
}  # fmt: skip


def test_latency_table_one_line_per_measurement_verdict_on_the_first() -> None:
    lines = latency_table([row_of(LATENCY_ROW)])
    header, model, end_to_end = lines
    assert header.split()[:4] == ["manifest", "device", "batch", "measure"]
    assert model.split()[:4] == ["m", "cpu", "8", "model"]
    assert "10.0 ms p50" in model and "16.0 ms" in model and "×1.60" in model and "×1.55" in model
    assert "regression" in model and "model p50 ×1.60 > ×1.25" in model
    assert "regression" not in end_to_end and "30.0 ms" in end_to_end
    assert model.index("×1.60") == header.index("×golden")


def test_latency_table_names_a_stale_golden_and_the_command_that_re_records_it() -> None:
    command = "pytest 'm.yaml::latency' --mlrepro-update"
    row = {**LATENCY_ROW, "verdict": "pass", "stale_golden": {"ratio": 0.4, "command": command}}
    lines = latency_table([row_of(row)])
    assert "pass (stale golden)" in lines[1]
    assert lines[-2].startswith("stale latency golden: m [cpu, batch 8] runs at ×0.40")
    assert lines[-1] == "  pytest 'm.yaml::latency' --mlrepro-update"


def test_reference_lines_show_agreement_or_why_it_was_not_checked() -> None:
    rows: list[dict[str, Any]] = [
        {"nodeid": "b", "outcome": "passed", "manifest": "b", "device": "cpu", "reference": "ref",
         "reference_verdict": "agree",
         "reference_agreement": 0.995, "reference_samples": 200, "reference_max_score_diff": 0.012,
         "reference_score_space": "probability", "reference_top1_ratio": 1.0},
        {"nodeid": "a", "outcome": "passed", "manifest": "a", "device": "cpu",
         "reference": "ref",
         "reference_verdict": "not checked: no golden"},
    ]  # fmt: skip
    assert reference_lines([row_of(r) for r in rows]) == [
        "a [cpu] vs ref: not checked: no golden",
        "b [cpu] vs ref: top-1 agreement 0.9950 over 200 samples, max |Δ probability| 0.012, "
        "top-1 ratio 1.0000: agree",
    ]


def test_audit_lines_list_unused_goldens_and_hedge_when_a_manifest_did_not_load() -> None:
    assert audit_lines([], [], []) == []
    plain = audit_lines(["golden/old.json", "golden/latency/old/"], [], [])
    assert plain[0] == "2 golden(s) that no manifest uses (delete them if that is intended):"
    assert plain[1:] == ["  golden/old.json", "  golden/latency/old/"]
    hedged = audit_lines(["golden/old.json"], ["manifests/broken.yaml"], [".x.tmp"])
    assert hedged[0].startswith("1 golden(s) look unused, but 1 manifest(s) failed to load")
    assert hedged[0].endswith("manifests/broken.yaml")
    assert hedged[-2].startswith("1 temporary file(s) left by interrupted golden writes")
    assert hedged[-1] == "  .x.tmp"


def test_shard_lines_only_for_a_run_that_is_one_shard() -> None:
    assert shard_lines(None, "out.json") == []
    lines = shard_lines(Shard(2, 4), "out.json")
    assert lines[0].startswith("this run is shard 2/4 of every data set")
    assert "all 4 shards" in lines[1] and "(this run's: out.json)" in lines[1]


def test_summary_table_aligns_its_numbers_under_their_headers() -> None:
    rows = [
        row_of({"nodeid": "m", "outcome": "passed", "manifest": "m", "device": "cpu",
                "framework": "torch", "samples": 1000, "top1": 75.1234, "top5": 92.0,
                "agreement": 0.99876, "verdict": "pass"}),
        row_of({"nodeid": "l", "outcome": "skipped", "manifest": "longer_name", "device": "cuda",
                "verdict": "skipped"}),
    ]  # fmt: skip
    header, first, second = summary_table(rows)
    assert first.split() == ["m", "cpu", "torch", "1000", "75.12", "92.00", "0.9988", "pass"]
    assert second.split() == ["longer_name", "cuda", "-", "-", "-", "skipped"]
    assert first.index("75.12") == header.index("top-1")


def test_the_top_k_column_is_headed_by_its_k() -> None:
    """With postprocess.top_k 3 the column holds top-3 accuracy: it says so."""

    def row(name: str, k: int) -> Row:
        per_sample = {
            "now": {
                "ids": ["a"],
                "labels": [0],
                "topk": [list(range(k))],
                "topk_scores": [[0.5] * k],
            },
            "golden": None,
            "score_diff": {},
        }
        return row_of({"nodeid": name, "outcome": "passed", "manifest": name, "samples": 1,
                       "top1": 100.0, "top5": 100.0, "verdict": "pass",
                       "per_sample": per_sample})  # fmt: skip

    header = summary_table([row("m", 3)])[0]
    assert "top-3" in header.split() and "top-5" not in header
    header, three, five = summary_table([row("m", 3), row("n", 10)])
    assert "top-5" in header.split()
    assert "100.00 (top-3)" in three and "(top-" not in five
