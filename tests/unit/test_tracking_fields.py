"""What a results file becomes in a tracking store, before any store (``tracking._fields``), and
how a tracking URI is shown: never with its credentials."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from pytest_mlrepro.results import load_results
from pytest_mlrepro.tracking import (
    chosen_uri,
    default_uri,
    file_digest,
    item_run,
    scrubbed,
    session_run,
    shown_uri,
)

OLD = Path(__file__).resolve().parents[1] / "data" / "old" / "results.json"


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        ("https://alice:s3cret@mlflow.example:5000/x", "https://mlflow.example:5000/x"),
        ("http://token@127.0.0.1:5000", "http://127.0.0.1:5000"),
        ("postgresql+psycopg2://u:p@db/mlflow", "postgresql+psycopg2://db/mlflow"),
        ("sqlite:////tmp/p/mlflow.db", "sqlite:////tmp/p/mlflow.db"),
        ("http://127.0.0.1:5000", "http://127.0.0.1:5000"),
    ],
)
def test_a_uri_is_shown_without_its_credentials(uri: str, shown: str) -> None:
    assert shown_uri(uri) == shown


def test_an_error_text_loses_the_credentials_it_quotes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "hunter22")
    uri = "https://alice:hunter22@mlflow.example"
    text = f"failed: {uri}/api and https://bob:pw@other/x; basic auth hunter22 refused"
    out = scrubbed(text, uri)
    assert "hunter22" not in out and "alice" not in out and "bob:pw" not in out
    assert "https://mlflow.example/api" in out and "https://other/x" in out


def test_the_uri_chosen(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert chosen_uri(None, None, tmp_path) == default_uri(tmp_path)
    assert default_uri(tmp_path) == f"sqlite:///{tmp_path.resolve()}/mlflow.db"
    assert chosen_uri(None, "http://ini", tmp_path) == "http://ini"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://env")
    assert chosen_uri(None, "http://ini", tmp_path) == "http://env"
    assert chosen_uri("http://given", "http://ini", tmp_path) == "http://given"


def test_the_session_run_and_an_item_run_of_a_real_results_file() -> None:
    document = load_results(OLD)
    data = OLD.read_bytes()
    session = session_run(document, file_digest(data), "results.json")
    assert session.tags["mlrepro.kind"] == "session"
    assert session.tags["mlrepro.night"] == document.created[:10]  # type: ignore[index]
    assert len(session.tags["mlrepro.results_sha256"]) == 64
    assert session.metrics["items"] == len(document.results)
    failed = sum(r.status in ("failed", "no golden", "recorded") for r in document.results)
    assert session.metrics["failed"] == failed
    assert session.tags["mlrepro.verdict"] == ("failed" if failed else "passed")
    drifted = next(r for r in document.results if r.verdict == "drift")
    item = item_run(document, drifted)
    assert item.name == drifted.nodeid
    assert item.tags["likely_cause"] == "colour order"
    assert item.metrics["top1"] == drifted.top1
    assert item.metrics["phase.diagnosis.wall"] == drifted.timing.phases["diagnosis"].wall  # type: ignore[union-attr,index]
    assert item.params["model_sha256"] == drifted.manifest_content["model"]["file"]["sha256"]  # type: ignore[index]
    assert "shard" not in item.params  # not a sharded run: not logged


def test_names_and_values_keep_to_mlflows_rules() -> None:
    document = load_results(OLD)
    row = dataclasses.replace(
        document.results[0],
        extra={"model.p50_ms": 1.5, "weird name?*.rounds": 3, "bad.value": float("nan")},
        manifest_file="m" * 7000,
    )
    item = item_run(document, row)
    assert item.metrics["latency.model.p50_ms"] == 1.5
    assert item.metrics["latency.weird name__.rounds"] == 3
    assert "latency.bad.value" not in item.metrics  # not finite: not a metric
    assert len(item.params["manifest_file"]) == 6000
