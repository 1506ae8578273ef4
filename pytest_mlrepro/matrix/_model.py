"""The merged matrix as plain typed data, rendered as Markdown, CSV or HTML."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..results import DiagnosisSummary, Machine, Row

CellVerdict = Literal["pass", "fail", "not compared"]
"""A result's standing for the gate: ``fail`` makes ``mlrepro merge`` exit 1; ``not compared``
(skipped: a framework or device this machine lacks, a latency too busy to judge) is listed but
does not fail the gate on its own (see :func:`pytest_mlrepro.matrix.status_of`)."""


@dataclass(frozen=True)
class Source:
    """One results file: its path as given, the machine that wrote it and its shard (``"1/2"``)."""

    path: str
    machine: str
    shard: str | None


def status_of(result: Row) -> tuple[CellVerdict, str]:
    """A result's standing for the gate, from its row's ``status`` (derived from the verdict for
    files older than the field, on reading), and the reason when it is not a pass."""
    status, verdict, outcome = result.status, result.verdict or "", result.outcome
    if status == "passed":
        return "pass", ""
    if status == "skipped":
        return "not compared", verdict
    if status == "partial":
        return "not compared", f"{verdict}: merge every shard with mlrepro merge"
    if status == "recorded":
        return "fail", f"{verdict}: nothing was compared (a run that writes goldens is no check)"
    return "fail", verdict or ("failed" if outcome == "failed" else f"no verdict ({outcome})")


@dataclass(frozen=True)
class Cell:
    """One manifest on one machine, device and framework version: every result of it."""

    manifest: str
    manifest_digest: str | None
    machine: str
    device: str
    framework: str | None
    framework_version: str | None
    hardware_slug: str | None
    sources: tuple[str, ...]
    results: tuple[Row, ...]  # each of its items' row (a cell's: see matrix._build._result)
    latency: tuple[Row, ...]
    other_pipeline: str | None = None  # why this cell's pipeline differs from the manifest's others
    # Its run settings (threads, batch size… and the machine's numeric variables) where they
    # differ from the manifest's other cells: the same pipeline, run otherwise.
    other_settings: str | None = None
    manifest_content: dict[str, Any] | None = None  # the normalised manifest, where recorded
    # The fields of the pipeline (manifest paths) and of the settings that differ, in short.
    pipeline_fields: tuple[str, ...] = ()
    settings_fields: tuple[str, ...] = ()

    @property
    def diagnosis(self) -> DiagnosisSummary | None:
        """The diagnosis of its failed accuracy result, when it has one."""
        accuracy = self.accuracy
        return None if accuracy is None else accuracy.diagnosis_summary

    @property
    def accuracy(self) -> Row | None:
        return next((r for r in self.results if r.kind == "accuracy"), None)

    @property
    def status(self) -> CellVerdict:
        """The worst of its results: fail, then not compared, then pass."""
        statuses = [status_of(r)[0] for r in (*self.results, *self.latency)]
        if "fail" in statuses:
            return "fail"
        return "not compared" if "not compared" in statuses else "pass"

    @property
    def problems(self) -> tuple[str, ...]:
        """``accuracy: drift``, ``latency b1: regression``... for each result that did not pass."""
        out = []
        for r in (*self.results, *self.latency):
            gate, reason = status_of(r)
            if gate != "pass":
                what = r.kind if r.kind != "latency" or r.batch is None else f"latency b{r.batch}"
                # `` (shard 1/2)`` for the result of one shard run's own item
                shard = r.nodeid[r.nodeid.rindex(" (shard ") :] if " (shard " in r.nodeid else ""
                out.append(f"{what}{shard}: {reason}")
        return tuple(out)

    @property
    def verdict(self) -> str:
        """``pass``, or the problems joined."""
        return "; ".join(self.problems) if self.problems else "pass"

    @property
    def label(self) -> str:
        return f"{self.machine} [{self.device}]"


@dataclass(frozen=True)
class PairAgreement:
    """Two participants' top-1 compared over the samples both evaluated."""

    first: str
    second: str
    shared: int
    agree: int
    max_score_diff: float | None
    same_pipeline: bool

    @property
    def fraction(self) -> float | None:
        return self.agree / self.shared if self.shared else None


@dataclass(frozen=True)
class Dissent:
    """A participant's top-1 against the per-sample majority: ``disagree`` of ``judged`` samples
    (those with a strict majority), the first few sample ids."""

    participant: str
    disagree: int
    judged: int
    examples: tuple[str, ...]

    @property
    def flagged(self) -> bool:
        return self.disagree > 0


@dataclass(frozen=True)
class ManifestAgreement:
    """Cross-machine agreement of one manifest (by name): every participant (a cell with
    per-sample results), each pair, and each participant against the per-sample majority."""

    manifest: str
    participants: tuple[str, ...]
    digests: tuple[tuple[str, str | None], ...]  # (participant, manifest_digest)
    pairs: tuple[PairAgreement, ...]
    dissent: tuple[Dissent, ...]

    @property
    def flagged(self) -> tuple[str, ...]:
        return tuple(d.participant for d in self.dissent if d.flagged)

    @property
    def pipelines_differ(self) -> bool:
        return len({digest for _, digest in self.digests}) > 1


@dataclass(frozen=True)
class Matrix:
    """The merged matrix: one cell per manifest × machine × device × framework version, and each
    machine's environment (what its first results file records)."""

    sources: tuple[Source, ...]
    cells: tuple[Cell, ...]
    agreement: tuple[ManifestAgreement, ...]
    machines: tuple[Machine, ...] = ()

    @property
    def flags_not_everywhere(self) -> dict[str, tuple[str, ...]]:
        """``{flag: machines}`` for ISA flags some flag-recording machines have and others lack."""
        recorded = {
            m.name: flags for m in self.machines if (flags := m.environment.cpu_flags) is not None
        }
        out = {
            flag: tuple(name for name, flags in recorded.items() if flag in flags)
            for flag in sorted({f for flags in recorded.values() for f in flags})
        }
        return {f: names for f, names in out.items() if len(names) < len(recorded)}

    @property
    def package_versions(self) -> dict[str, dict[str, str | None]]:
        """``{package: {machine: version or None}}`` over the machines recording their packages."""
        known = {
            m.name: packages
            for m in self.machines
            if (packages := m.environment.numeric_packages) is not None
        }
        names = sorted({p for packages in known.values() for p in packages})
        return {p: {name: packages.get(p) for name, packages in known.items()} for p in names}

    @property
    def differing_packages(self) -> tuple[str, ...]:
        """The numeric packages whose version (or presence) is not the same on every machine."""
        return tuple(p for p, v in self.package_versions.items() if len(set(v.values())) > 1)

    @property
    def failed(self) -> tuple[Cell, ...]:
        return tuple(c for c in self.cells if c.status == "fail")

    @property
    def not_compared(self) -> tuple[Cell, ...]:
        return tuple(c for c in self.cells if c.status == "not compared")

    @property
    def ok(self) -> bool:
        """No cell failed, and at least one result passed a comparison (all skips prove nothing)."""
        compared = [status_of(r)[0] == "pass" for c in self.cells for r in (*c.results, *c.latency)]
        return not self.failed and any(compared)

    @property
    def stale_goldens(self) -> tuple[tuple[Cell, Row], ...]:
        return tuple((c, r) for c in self.cells for r in c.latency if r.stale_golden is not None)
