"""What logging a session to a tracking store costs (docs/tracking.md#cost): a results file of N
accuracy items (copies, under their own node ids, of the first row of ``tests/data/old/
results.json``, a real session's file) logged with ``pytest_mlrepro.tracking.log_results``, the
session's own path.

    python benchmarks/tracking_cost.py URI [N]     # e.g. sqlite:////tmp/t/mlflow.db, 100

Prints the seconds of MLflow's import and the store's opening (with a first file of one item)
apart from the logging of the N items. Each run logs a new file (its ``created`` time is now):
never the idempotent "already logged" path (the one-item file is, after the first run).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]


def main(argv: list[str]) -> int:
    from pytest_mlrepro.results import created_now, load_results, results_text

    uri, count = argv[0], int(argv[1]) if len(argv) > 1 else 100
    document = load_results(REPO / "tests" / "data" / "old" / "results.json")
    row = document.results[0]
    rows = tuple(dataclasses.replace(row, nodeid=f"{row.nodeid}-{i}") for i in range(count))
    document = dataclasses.replace(document, results=rows, created=created_now())
    data = (results_text(document) + "\n").encode()

    start = time.perf_counter()
    from pytest_mlrepro.tracking import log_results

    # MLflow imported and the store opened (made, the first time) by a one-item file first.
    first = dataclasses.replace(document, results=rows[:1], created="2000-01-01T00:00:00Z")
    log_results(uri, (results_text(first) + "\n").encode(), first)
    opened = time.perf_counter()
    logged = log_results(uri, data, document)
    done = time.perf_counter()
    print(
        f"import, open and one item: {opened - start:.2f} s; logging {count} items: "
        f"{done - opened:.2f} s (run {logged.run_id})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
