"""The matrix builder (pytest_mlrepro.matrix) on small hand-built results files, each validated
against the results-file contract (pytest_mlrepro.results.validate_results) first."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

import pytest

from pytest_mlrepro.matrix import (
    MatrixError,
    build_matrix,
    majority_top1,
    pair_agreement,
    status_of,
)
from pytest_mlrepro.report import csv_text, markdown
from pytest_mlrepro.report.html import matrix_view
from pytest_mlrepro.results import (
    Document,
    Row,
    Shard,
    derived_status,
    shard_of,
    shard_verdict,
    validate_results,
)

DIGEST_A = "a" * 64
DIGEST_B = "b" * 64
IDS = [f"s{i}" for i in range(6)]
LABELS = [0, 1, 2, 0, 1, 2]
GOLDEN = [0, 1, 2, 0, 1, 2]
TOL = {"top1": 1.0, "top5": 1.0, "agreement": 0.5, "score": 0.5}


def per_sample(
    top1: Sequence[int], ids: Sequence[str] = IDS, golden: Sequence[int] | None = GOLDEN
) -> dict[str, Any]:
    """Per-sample results over 3 classes: top-2 ``[t, (t+1)%3]`` with scores 0.7 / 0.2 (0.6 /
    0.3 for samples whose top-1 is not the golden's)."""
    index = {s: i for i, s in enumerate(IDS)}

    def results(classes: Sequence[int], reference: Sequence[int] | None) -> dict[str, Any]:
        rows = [[c, (c + 1) % 3] for c in classes]
        scores = [
            [0.7, 0.2] if reference is None or c == reference[index[s]] else [0.6, 0.3]
            for s, c in zip(ids, classes)
        ]
        return {
            "ids": list(ids),
            "labels": [LABELS[index[s]] for s in ids],
            "topk": rows,
            "topk_scores": scores,
        }

    now = results(top1, golden)
    gold = None
    if golden is not None:
        gold = results([golden[index[s]] for s in ids], None)
    return {
        "now": now,
        "golden": gold,
        "score_diff": {} if gold is None else {s: 0.1 for s in ids},
    }


def accuracy_row(
    top1: Sequence[int],
    *,
    manifest: str = "tiny",
    digest: str = DIGEST_A,
    device: str = "cpu",
    verdict: str = "pass",
    outcome: str = "passed",
    ids: Sequence[str] = IDS,
    shard: dict[str, int] | None = None,
) -> dict[str, Any]:
    agree = sum(t == GOLDEN[IDS.index(s)] for s, t in zip(ids, top1)) / len(ids)
    row: dict[str, Any] = {
        "kind": "accuracy",
        "manifest": manifest,
        "manifest_file": f"manifests/{manifest}.yaml",
        "manifest_digest": digest,
        "device": device,
        "framework": "onnxruntime",
        "framework_version": "1.20.0",
        "samples": len(ids),
        "top1": 100 * agree,
        "top5": 100.0,
        "agreement": agree,
        "max_score_diff": 0.1,
        "tolerances": TOL,
        "verdict": verdict,
        "outcome": outcome,
        "nodeid": f"manifests/{manifest}.yaml::accuracy[{device}]",
        "per_sample": per_sample(top1, ids),
    }
    if shard is not None:
        row["shard"] = shard
        row["nodeid"] += f"[shard{shard['index']}of{shard['count']}]"
    return row


def latency_row(
    ratio: float | None, verdict: str = "pass", outcome: str = "passed"
) -> dict[str, Any]:
    return {
        "kind": "latency",
        "manifest": "tiny",
        "manifest_digest": DIGEST_A,
        "device": "cpu",
        "batch": 1,
        "framework": "onnxruntime",
        "framework_version": "1.20.0",
        "nodeid": "manifests/tiny.yaml::latency[cpu-b1]",
        "outcome": outcome,
        "verdict": verdict,
        "p50_ms": 2.0,
        "golden_p50_ms": None if ratio is None else 2.0 / ratio,
        "ratio_to_golden": ratio,
        "decided_by": "both ratios within ≤×1.25: model p50: absolute ×1.00",
        "stale_golden": None
        if ratio is None or ratio >= 0.5
        else {"ratio": ratio, "command": "pytest 'x::latency[cpu-b1]' --mlrepro-update"},
    }


def results_file(
    machine: str,
    rows: list[dict[str, Any]],
    shard: dict[str, int] | None = None,
    environment: dict[str, Any] | None = None,
) -> Document:
    document = {
        "format": 2,
        "machine": {"name": machine, "environment": environment or {"python": "3.12"}},
        "shard": shard,
        "results": rows,
    }
    return validate_results(document, f"{machine}.json")


def _gate(status: Any, verdict: str, outcome: Any) -> tuple[str, str]:
    return status_of(Row("n", outcome, status=status, verdict=verdict))


def test_status_of_decides_the_gate_from_the_status_field() -> None:
    assert _gate("passed", "pass", "passed") == ("pass", "")
    for verdict in ("drift", "error", "non-finite outputs", "regression", "classes changed"):
        assert _gate("failed", verdict, "failed") == ("fail", verdict)
    assert _gate("failed", "", "failed") == ("fail", "failed")
    assert _gate("failed", "", "passed") == ("fail", "no verdict (passed)")
    assert _gate("no golden", "no golden", "skipped") == ("fail", "no golden")
    recorded = _gate("recorded", "golden recorded", "passed")
    assert recorded[0] == "fail" and "nothing was compared" in recorded[1]
    assert _gate("skipped", "contended", "skipped") == ("not compared", "contended")
    part = _gate("partial", "shard 1/2 compared (verdict at the merge)", "passed")
    assert part[0] == "not compared" and "merge every shard" in part[1]
    assert _gate("something new", "pass", "passed")[0] == "fail"  # never a pass by default


def test_derived_status_reads_the_verdict_of_a_row_older_than_the_field() -> None:
    assert derived_status("pass", "passed") == "passed"
    assert derived_status("pass (vs cpu-other)", "passed") == "passed"
    assert derived_status("faster", "passed") == "passed"
    assert derived_status("identical runs", "passed") == "passed"
    for verdict in ("drift", "error", "non-finite outputs", "regression", "classes changed"):
        assert derived_status(verdict, "failed") == "failed"
    assert derived_status("no golden", "skipped") == "no golden"
    assert derived_status("golden recorded", "passed") == "recorded"
    assert derived_status("contended", "skipped") == "skipped"
    assert derived_status("skipped", "skipped") == "skipped"
    assert derived_status("not recorded", "skipped") == "failed"
    assert derived_status("shard 1/2 compared (verdict at the merge)", "passed") == "partial"
    # The verdict a compared shard writes is the one read back as partial (one wording).
    assert derived_status(shard_verdict(Shard(12, 40)), "passed") == "partial"
    assert derived_status("shard x/2 compared (verdict at the merge)", "passed") == "failed"
    assert derived_status("something new", "passed") == "failed"  # never a pass by default
    assert derived_status("pass", "failed") == "failed"


def test_the_gate_reads_the_status_field_not_the_verdict_wording() -> None:
    """A verdict reworded by a later version does not change a result's standing: the row's
    status does; a row without one (an older file) has it derived on reading."""
    reworded = {**accuracy_row(GOLDEN, verdict="all within tolerance"), "status": "passed"}
    contradicted = {**accuracy_row(GOLDEN, verdict="pass", manifest="other"), "status": "failed"}
    older = accuracy_row(GOLDEN, verdict="all within tolerance", manifest="third")
    file = results_file("alpha", [reworded, contradicted, older])
    assert [row.status for row in file.results] == ["passed", "failed", "failed"]
    cells = {c.manifest: c for c in build_matrix([file]).cells}
    assert cells["tiny"].status == "pass"
    assert cells["other"].status == "fail" and cells["other"].verdict == "accuracy: pass"
    assert cells["third"].status == "fail"


def test_cells_carry_metrics_latency_and_the_gate_passes_when_all_pass() -> None:
    a = results_file("alpha", [accuracy_row(GOLDEN), latency_row(1.02)])
    b = results_file("beta", [accuracy_row(GOLDEN)])
    matrix = build_matrix([a, b])
    assert [(c.machine, c.device, c.status) for c in matrix.cells] == [
        ("alpha", "cpu", "pass"),
        ("beta", "cpu", "pass"),
    ]
    alpha = matrix.cells[0]
    assert alpha.accuracy is not None and alpha.accuracy.top1 == 100.0
    (lat,) = alpha.latency
    assert (lat.p50_ms, lat.ratio_to_golden, lat.stale_golden) == (2.0, 1.02, None)
    assert lat.decided_by is not None and lat.decided_by.startswith("both ratios within")
    assert matrix.ok and not matrix.failed
    (agreement,) = matrix.agreement
    (pair,) = agreement.pairs
    assert (pair.shared, pair.agree, pair.fraction, pair.same_pipeline) == (6, 6, 1.0, True)
    assert pair.max_score_diff == 0.0
    assert agreement.flagged == ()


def test_the_machine_that_departs_from_the_majority_is_flagged_and_the_golden_breaks_ties() -> None:
    # beta's top-1 differs on s1 and s4; with the golden as the third voter the majority is
    # alpha's (and the golden's) class there.
    beta_top1 = [0, 2, 2, 0, 2, 2]
    a = results_file("alpha", [accuracy_row(GOLDEN)])
    b = results_file(
        "beta", [accuracy_row(beta_top1, digest=DIGEST_B, verdict="drift", outcome="failed")]
    )
    matrix = build_matrix([a, b])
    (agreement,) = matrix.agreement
    (pair,) = agreement.pairs
    assert (pair.first, pair.second) == ("alpha [cpu]", "beta [cpu]")
    assert (pair.shared, pair.agree) == (6, 4)
    # s1: alpha [1 0.7, 2 0.2], beta [2 0.6, 0 0.3]: class 2 in both, |0.2 - 0.6| = 0.4.
    assert pair.max_score_diff == pytest.approx(0.4)
    assert pair.same_pipeline is False and agreement.pipelines_differ
    assert agreement.flagged == ("beta [cpu]",)
    beta = {d.participant: d for d in agreement.dissent}["beta [cpu]"]
    assert (beta.disagree, beta.judged, beta.examples) == (2, 6, ("s1", "s4"))
    # The differing pipeline is flagged in beta's cell (alpha's digest is as common: the first
    # in sort order is the reference), and the failed cell fails the gate.
    cells = {c.machine: c for c in matrix.cells}
    assert cells["alpha"].other_pipeline is None
    assert (
        cells["beta"].other_pipeline is not None and "bbbbbbbbbbbb" in cells["beta"].other_pipeline
    )
    assert cells["beta"].status == "fail" and cells["beta"].verdict == "accuracy: drift"
    assert not matrix.ok and matrix.failed == (cells["beta"],)
    text = markdown(matrix)
    assert (
        "**FAILED**: 1 of 2 cells failed; disagrees with the other machines: beta [cpu] on tiny"
        in text
    )
    assert (
        "**beta [cpu]** disagrees with the per-sample majority on 2 of 6 samples (e.g. s1, s4)"
        in text
    )
    assert "| alpha [cpu] | beta [cpu] | 6 | 66.67% (4/6) | 0.4 | **no** |" in text


def test_three_machines_without_a_golden_vote_by_majority() -> None:
    files = [
        results_file(name, [accuracy_row(top1)])
        for name, top1 in (
            ("a", [0, 1, 2, 0, 1, 2]),
            ("b", [0, 1, 2, 0, 1, 2]),
            ("c", [1, 1, 2, 0, 1, 2]),
        )
    ]
    (agreement,) = build_matrix(files).agreement
    assert [p.agree for p in agreement.pairs] == [6, 5, 5]
    assert agreement.flagged == ("c [cpu]",)


def test_shards_of_one_machine_merge_before_the_matrix_and_a_missing_shard_fails_the_cell() -> None:
    parts = []
    for index in (1, 2):
        ids = [s for s in IDS if shard_of(s, 2) == index]
        top1 = [GOLDEN[IDS.index(s)] for s in ids]
        row = accuracy_row(
            top1,
            ids=ids,
            shard={"index": index, "count": 2},
            verdict=f"shard {index}/2 compared (verdict at the merge)",
        )
        parts.append(results_file("alpha", [row], shard={"index": index, "count": 2}))
    matrix = build_matrix(parts)
    (cell,) = matrix.cells
    assert cell.accuracy is not None
    assert (cell.accuracy.samples, cell.accuracy.top1, cell.accuracy.shards) == (6, 100.0, 2)
    assert cell.status == "pass" and cell.sources == ("alpha.json",)
    lonely = build_matrix(parts[:1])
    (cell,) = lonely.cells
    assert cell.status == "fail" and "missing shard 2/2" in cell.verdict


def test_one_machine_name_twice_for_one_item_is_an_error() -> None:
    a = results_file("alpha", [accuracy_row(GOLDEN)])
    with pytest.raises(MatrixError, match="machine 'alpha' has this result twice"):
        build_matrix([a, a])


def test_stale_latency_goldens_and_skips_in_the_matrix_and_its_texts() -> None:
    a = results_file("alpha", [accuracy_row(GOLDEN), latency_row(0.25, "faster")])
    b = results_file("beta", [accuracy_row(GOLDEN), latency_row(None, "contended", "skipped")])
    matrix = build_matrix([a, b])
    assert matrix.ok  # a stale golden is flagged, not failed; a contended latency not compared
    ((cell, stale),) = matrix.stale_goldens
    assert cell.machine == "alpha" and stale.stale_golden is not None
    assert stale.stale_golden.command == "pytest 'x::latency[cpu-b1]' --mlrepro-update"
    assert [c.machine for c in matrix.not_compared] == ["beta"]
    text = markdown(matrix)
    assert (
        "## Stale latency goldens" in text
        and "`pytest 'x::latency[cpu-b1]' --mlrepro-update`" in text
    )
    assert "(1 not compared)" in text
    rows = list(csv.DictReader(io.StringIO(csv_text(matrix))))
    latency = [r for r in rows if r["kind"] == "latency"]
    assert [(r["machine"], r["ratio_to_golden"], r["status"]) for r in latency] == [
        ("alpha", "0.25", "pass"),
        ("beta", "", "not compared"),
    ]
    assert latency[0]["stale_golden_command"].endswith("--mlrepro-update")
    (pair,) = [r for r in rows if r["row"] == "agreement"]
    assert (pair["machine"], pair["other_machine"], pair["agreement"]) == (
        "alpha [cpu]",
        "beta [cpu]",
        "1.0",
    )


def test_a_matrix_of_skips_proves_nothing() -> None:
    a = results_file("alpha", [latency_row(None, "contended", "skipped")])
    matrix = build_matrix([a])
    assert not matrix.failed and not matrix.ok
    assert "no result was compared" in markdown(matrix)


def test_pair_agreement_and_majority_definitions() -> None:
    first = {"x": (0, {0: 0.9, 1: 0.1}), "y": (1, {1: 0.8, 2: 0.2}), "z": (0, {0: 1.0})}
    second = {"x": (0, {0: 0.5, 2: 0.5}), "y": (2, {2: 0.6, 0: 0.4}), "w": (0, {0: 1.0})}
    shared, agree, largest = pair_agreement(first, second)
    assert (shared, agree) == (2, 1)
    assert largest == pytest.approx(0.4)  # x: class 0, |0.9 - 0.5|; y: class 2, |0.2 - 0.6|
    assert pair_agreement({"x": (0, {0: 1.0})}, {"x": (1, {1: 1.0})}) == (1, 0, None)
    assert majority_top1([1, 1, 2]) == 1
    assert majority_top1([1, 2]) is None and majority_top1([]) is None


def test_an_invalid_manifest_or_a_row_without_a_manifest_fails_the_gate() -> None:
    bad = {
        "nodeid": "manifests/bad.yaml::bad.yaml",
        "outcome": "failed",
        "manifest": "manifests/bad.yaml",
        "verdict": "invalid manifest",
    }
    nameless = {"nodeid": "manifests/odd.yaml::thing", "outcome": "failed"}
    matrix = build_matrix([results_file("alpha", [accuracy_row(GOLDEN), bad, nameless])])
    failed = {c.manifest: c.verdict for c in matrix.failed}
    assert failed == {
        "manifests/bad.yaml": "item: invalid manifest",
        "manifests/odd.yaml::thing": "item: failed",
    }
    assert not matrix.ok


def _environment(cpu: str, vendor: str, flags: list[str], onnxruntime: str) -> dict[str, Any]:
    return {
        "python": "3.12",
        "cpu": cpu,
        "cpu_vendor": vendor,
        "cpu_flags": flags,
        "numeric_packages": {"numpy": "2.1.0", "onnxruntime": onnxruntime},
        "numeric_settings": {"OMP_NUM_THREADS": "4"} if vendor == "GenuineIntel" else {},
    }


def test_the_machines_table_shows_each_cpu_its_isa_flags_and_the_packages_that_differ() -> None:
    amd = _environment("AMD EPYC 7763", "AuthenticAMD", ["avx", "avx2", "fma"], "1.20.0")
    intel = _environment(
        "Intel Xeon 8480+",
        "GenuineIntel",
        ["avx", "avx2", "avx512_vnni", "avx512f", "fma"],
        "1.21.0",
    )
    matrix = build_matrix(
        [
            results_file("amd", [accuracy_row(GOLDEN)], environment=amd),
            results_file("intel", [accuracy_row(GOLDEN)], environment=intel),
            results_file("old", [accuracy_row(GOLDEN)]),  # written before the fields existed
        ]
    )
    assert matrix.flags_not_everywhere == {"avx512_vnni": ("intel",), "avx512f": ("intel",)}
    assert matrix.differing_packages == ("onnxruntime",)
    text = markdown(matrix)
    table = text[text.index("## Machines") :]
    assert "| amd | AMD EPYC 7763 (AuthenticAMD) | avx avx2 fma | onnxruntime 1.20.0 | - |" in table
    assert (
        "| intel | Intel Xeon 8480+ (GenuineIntel) | avx avx2 avx512_vnni avx512f fma "
        "| onnxruntime 1.21.0 | OMP_NUM_THREADS=4 |" in table
    )
    assert "| old | - | not recorded | not recorded | - |" in table
    assert "- ISA flags not on every machine: avx512_vnni (intel), avx512f (intel)" in table
    assert "- numeric packages the same on every machine: numpy 2.1.0" in table
    rows = dict(matrix_view(matrix).environment)
    assert rows["intel"] == (
        "Intel Xeon 8480+ (GenuineIntel) · ISA flags: avx avx2 avx512_vnni avx512f fma · numeric "
        "packages that differ: onnxruntime 1.21.0 · numeric settings: OMP_NUM_THREADS=4"
    )
    assert "old" not in rows


def test_results_files_without_the_cpu_fields_show_no_machines_table() -> None:
    matrix = build_matrix([results_file("alpha", [accuracy_row(GOLDEN)])])
    assert "## Machines" not in markdown(matrix)
    assert [m.environment.cpu_flags for m in matrix.machines] == [None]
