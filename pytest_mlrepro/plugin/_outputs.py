"""The files a session writes at its end: ``--mlrepro-json`` and ``--mlrepro-benchmark-json``."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from .._files import atomic_write_bytes
from ..errors import OutputError
from ..fingerprint import environment
from ..latency import document, head_commit
from ..results import FORMAT, Document, Row, created_now, record, results_text
from ._base import machine_name, options, output_path, report_output_error


@dataclass(frozen=True)
class ResultsFile:
    """The session's results file, and where it was written (None: not written)."""

    data: bytes
    document: Document
    path: Path | None


def write_results_file(
    session: pytest.Session, rows: list[Row], one_time: dict[str, dict[str, float]], needed: bool
) -> ResultsFile | None:
    """The results file when --mlrepro-json asks, or when ``needed`` (a tracking store logs it)."""
    path = output_path(session.config, "mlrepro_json")
    if path is None and not needed:
        return None
    config = session.config
    late: str | None = None
    try:
        found = environment()
    except Exception as exc:  # the results come first: an environment read must not cost them
        found = {}
        late = (
            f"the environment could not be read for the results file {path} "
            f"({type(exc).__name__}: {exc}); the file was written without it"
        )
    given = {"name": machine_name(config), "environment": found}
    document: dict[str, Any] = {"format": FORMAT, "machine": given, "created": created_now()}
    if one_time:
        document["one_time"] = one_time
    commit = head_commit(config.rootpath)
    if commit is not None:
        document["commit"] = commit
    made = record(Document, document, shard=options(config).shard, results=tuple(rows))
    data = (results_text(made) + "\n").encode()
    if path is not None:
        try:
            atomic_write_bytes(path, data, what="results file (--mlrepro-json)")
        except OutputError as exc:
            report_output_error(session, str(exc))
            path = None
    if late is not None:
        report_output_error(session, late)
    return ResultsFile(data, made, path)


def write_benchmark_file(
    session: pytest.Session, rows: list[tuple[Row, list[dict[str, Any]]]]
) -> None:
    config = session.config
    path = output_path(config, "mlrepro_benchmark_json")
    if path is None:
        return
    rows = sorted(rows, key=lambda r: r[0].nodeid)
    benchmarks = [b for _, entries in rows for b in entries]
    keys: list[dict[str, Any]] = []
    for row, entries in rows:
        if entries and row.hardware_key and row.hardware_key not in keys:
            keys.append(row.hardware_key)
    try:
        payload = document(benchmarks, root=config.rootpath, hardware_keys=keys)
        text = json.dumps(payload, indent=2, sort_keys=True) + "\n"
        atomic_write_bytes(path, text.encode(), what="benchmark file (--mlrepro-benchmark-json)")
    except Exception as exc:  # said, not a traceback at exit
        made = f"the benchmark file could not be made ({type(exc).__name__}: {exc})"
        report_output_error(session, str(exc) if isinstance(exc, OutputError) else made)
