"""pytest glue for cross-framework agreement: a terminal section listing, for every item checked
against a ``reference``, its agreement and largest score difference (pass or fail alike).

Registered by ``plugin/__init__.py``; the check itself runs in the accuracy item
(``_items.py``, with ``goldens/_reference.py``).
"""

from __future__ import annotations

from typing import Any

import pytest

from ._session import PROPERTY_PREFIX


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("mlrepro").addoption(
        "--mlrepro-update-despite-reference",
        action="store_true",
        dest="mlrepro_update_despite_reference",
        help="with --mlrepro-update, record goldens even when the results disagree with the "
        "manifest's reference (by default they are not recorded: the reference says the two "
        "must agree); the item still fails on the disagreement",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("mlrepro_update_despite_reference") and not config.getoption(
        "mlrepro_update"
    ):
        raise pytest.UsageError(
            "--mlrepro-update-despite-reference only applies with --mlrepro-update"
        )


def reference_row(report: pytest.TestReport) -> dict[str, Any] | None:
    """The reference properties of an item checked against a reference; None for other reports
    and items."""
    if report.when != "call":
        return None
    props = {
        k[len(PROPERTY_PREFIX) :]: v
        for k, v in report.user_properties
        if isinstance(k, str) and k.startswith(PROPERTY_PREFIX)
    }
    if "reference_verdict" in props:
        return {**props, "outcome": report.outcome}
    return None


def summary_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per item: manifest [device] vs reference, agreement, max score difference."""
    lines = []
    for r in sorted(rows, key=lambda r: (str(r.get("manifest")), str(r.get("device")))):
        head = f"{r.get('manifest')} [{r.get('device')}] vs {r.get('reference', '?')}"
        if "reference_agreement" not in r:
            lines.append(f"{head}: {r.get('reference_verdict')}")
            continue
        diff = r.get("reference_max_score_diff")
        lines.append(
            f"{head}: top-1 agreement {r['reference_agreement']:.4f} "
            f"over {r.get('reference_samples')} samples, max |Δ "
            f"{r.get('reference_score_space', 'score')}| "
            f"{'-' if diff is None else f'{diff:.3g}'}, top-1 ratio "
            f"{r.get('reference_top1_ratio', float('nan')):.4f}: {r.get('reference_verdict')}"
        )
    return lines
