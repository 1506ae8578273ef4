"""The files a session writes at its end, from the session's rows: the results file
(``--mlrepro-json``, format 2: docs/results.md) and the latency results in pytest-benchmark's
format (``--mlrepro-benchmark-json``). The HTML page is :mod:`._html`'s."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from .._files import atomic_write_bytes
from ..errors import OutputError
from ..fingerprint import environment
from ..latency import document
from ..results import FORMAT, Row, created_now, row_json
from ._base import machine_name, options, output_path, report_output_error, results_path


def write_results_file(
    session: pytest.Session, rows: list[Row], one_time: dict[str, dict[str, float]] | None = None
) -> None:
    """The results file (format 2, docs/results.md), when --mlrepro-json asks for one;
    ``one_time``: the costs the process paid once for all its items (none: left out)."""
    path = results_path(session.config)
    if path is None:
        return
    # nodeid last: under xdist reports arrive in any order, and the file must not depend on it.
    rows = sorted(rows, key=lambda r: (str(r.manifest), str(r.device), r.nodeid))
    shard = options(session.config).shard
    payload = {
        "format": FORMAT,
        "created": created_now(),  # the history orders nights by it
        "machine": {"name": machine_name(session.config), "environment": environment()},
        "shard": None if shard is None else shard.as_json(),
        "results": [row_json(row) for row in rows],
    }
    if one_time:
        payload["one_time"] = one_time
    text = _results_text(payload)
    try:
        atomic_write_bytes(path, (text + "\n").encode(), what="results file (--mlrepro-json)")
    except OutputError as exc:
        report_output_error(session, str(exc))


_PER_SAMPLE = re.compile(r'"per_sample": "\\u0000(\d+)\\u0000"')
"""A row's per-sample block as :func:`_results_text` holds its place: a key and a string value
that no other text of the file can be (a quote inside a string is escaped there)."""


def _results_text(payload: dict[str, Any]) -> str:
    """The results file's text: indented to be read, except each row's ``per_sample`` block, one
    line of compact JSON. Why: the per-sample numbers are most of the file, and json's indenting
    encoder is pure Python, its compact one C: the main job's nine rows took 0.46 s indented
    whole against 0.16 s so (docs/measurements.md, issue 34), and the file is 2.6 times smaller."""
    blocks: list[str] = []
    rows = []
    for row in payload["results"]:
        if "per_sample" in row:
            blocks.append(json.dumps(row["per_sample"], sort_keys=True, allow_nan=False))
            row = {**row, "per_sample": f"\0{len(blocks) - 1}\0"}
        rows.append(row)
    text = json.dumps({**payload, "results": rows}, indent=2, sort_keys=True, allow_nan=False)
    return _PER_SAMPLE.sub(lambda m: f'"per_sample": {blocks[int(m[1])]}', text)


def write_benchmark_file(session: pytest.Session, rows: list[dict[str, Any]]) -> None:
    """The latency results in pytest-benchmark's format, when --mlrepro-benchmark-json asks."""
    config = session.config
    path = output_path(config, "mlrepro_benchmark_json")
    if path is None:
        return
    rows = sorted(rows, key=lambda r: str(r["nodeid"]))
    benchmarks = [b for r in rows for b in r.get("benchmarks", [])]
    keys: list[dict[str, Any]] = []
    for r in rows:
        if r.get("key") and r["key"] not in keys:
            keys.append(r["key"])
    payload = document(benchmarks, root=config.rootpath, hardware_keys=keys)
    text = json.dumps(payload, indent=2, sort_keys=True) + "\n"
    try:
        atomic_write_bytes(path, text.encode(), what="benchmark file (--mlrepro-benchmark-json)")
    except OutputError as exc:
        report_output_error(session, str(exc))
