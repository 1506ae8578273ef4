"""The identity of the data a golden was measured on, so that a drift names a data change as one
instead of blaming an unrelated difference."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ._metrics import Results
from ._store import Golden

SHOWN = 3  # files or labels named in one sentence


@dataclass(frozen=True)
class LabelChange:
    id: str
    golden: int
    now: int


@dataclass(frozen=True)
class DataChange:
    """What differs between the data of a golden and the data of this run."""

    samples: int  # samples in both
    files: list[str] = field(default_factory=list)  # in both, with another sha256
    labels: list[LabelChange] = field(default_factory=list)
    added: list[str] = field(default_factory=list)  # in this run only
    removed: list[str] = field(default_factory=list)  # in the golden only
    # Whether the golden records its files' checksums (older goldens do not: only labels and
    # the sample set can be compared).
    files_known: bool = True

    @property
    def changed(self) -> bool:
        return bool(self.files or self.labels or self.added or self.removed)

    @property
    def ids(self) -> set[str]:
        """Samples whose data (file or label) is not the golden's."""
        return set(self.files) | {c.id for c in self.labels} | set(self.added)

    def parts(self) -> list[str]:
        """One phrase per kind of change, most telling first."""
        out = []
        if self.files:
            out.append(
                f"{_count(len(self.files), 'file')} of {self.samples} "
                f"{'has' if len(self.files) == 1 else 'have'} other content (sha256) than the "
                f"golden's ({_names(self.files)})"
            )
        if self.labels:
            shown = ", ".join(f"{c.id} {c.golden} → {c.now}" for c in self.labels[:SHOWN])
            more = ", …" if len(self.labels) > SHOWN else ""
            out.append(
                f"the label of {_count(len(self.labels), 'sample')} of {self.samples} changed "
                f"({shown}{more})"
            )
        if self.added:
            out.append(f"{_count(len(self.added), 'sample')} added ({_names(self.added)})")
        if self.removed:
            out.append(f"{_count(len(self.removed), 'sample')} removed ({_names(self.removed)})")
        return out

    def summary(self) -> str:
        """One sentence for the failure: ``the data changed since the golden was recorded: …``."""
        return "the data changed since the golden was recorded: " + "; ".join(self.parts())


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _names(ids: Sequence[str]) -> str:
    return ", ".join(ids[:SHOWN]) + (", …" if len(ids) > SHOWN else "")


def data_change(golden: Golden, now: Results, now_files: Mapping[str, str]) -> DataChange:
    """``now_files``: the sha256 of each sample's file (``ResolvedDataset.checksums``)."""
    recorded = {
        sample: int(label) for sample, label in zip(golden.results.ids, golden.results.labels)
    }
    current = {sample: int(label) for sample, label in zip(now.ids, now.labels)}
    shared = sorted(set(recorded) & set(current))
    files = golden.data
    return DataChange(
        samples=len(shared),
        files=[]
        if files is None
        else [s for s in shared if s in now_files and s in files and files[s] != now_files[s]],
        labels=[
            LabelChange(s, recorded[s], current[s]) for s in shared if recorded[s] != current[s]
        ],
        added=sorted(set(current) - set(recorded)),
        removed=sorted(set(recorded) - set(current)),
        files_known=files is not None,
    )
