"""The pitfall sensitivity tables kept beside the goldens (``golden/pitfalls/``, written by
``mlrepro pitfalls --save``) as the HTML report shows them: read, and made view data."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ... import goldens as golden_store
from ...errors import MlreproError
from ._model import SensitivityBar, SensitivityTable


def pitfall_tables(
    tables: Sequence[tuple[Path, str, str]], golden_dir: Path, notes: list[str]
) -> list[SensitivityTable]:
    """The tables at ``(path, path as shown, manifest name)``, each read by the golden store's
    bounded reader (a golden of its own kind); one that cannot be read is a note, not shown."""
    out = []
    for path, shown, manifest in tables:
        try:
            data = golden_store.read_json(path, "pitfall table", golden_dir)
            if data is None:
                continue
            bars = tuple(
                SensitivityBar(
                    pitfall=str(r["pitfall"]),
                    description=str(r["description"]),
                    top1=None if r.get("top1") is None else float(r["top1"]),
                    agreement=None if r.get("agreement") is None else float(r["agreement"]),
                    error=None if r.get("error") is None else str(r["error"]),
                )
                for r in data["rows"]
            )
            out.append(
                SensitivityTable(
                    manifest=str(data.get("name", manifest)),
                    source=shown,
                    samples=int(data["samples"]),
                    declared_top1=float(data["declared"]["top1"]),
                    bars=bars,
                )
            )
        except (MlreproError, OSError, ValueError, KeyError, TypeError) as exc:
            notes.append(f"the pitfall table {shown} could not be read ({exc}); not shown")
    return out


__all__ = ["pitfall_tables"]
