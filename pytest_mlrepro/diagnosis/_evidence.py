"""The evidence of a diagnosis, one type per source, each rendering its own section (a title and
its lines) for :class:`~pytest_mlrepro.diagnosis._explain.Diagnosis`.

The wording lives here, beside the facts, not in ``report/``: the accuracy check, a layer below
``report/`` in the import contracts (pyproject.toml), writes these sections into the results
file, and ``diagnosis/`` importing ``report/`` would close the cycle report → accuracy →
diagnosis → report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..goldens import DataChange
from ._data_changes import data_lines
from ._environment_diff import env_change_text
from ._layer_fingerprints import LayerReport
from ._manifest_diff import Change
from ._probe_trials import SCREEN, Counterfactual, restores
from ._step_fingerprints import StepReport
from ._wording import short_number

Section = tuple[str, list[str]]
SHOWN_FLIPS = 6  # counterfactual lines shown
SHOWN_NEUTRAL = 6  # manifest edits that cannot move outputs, named
SHOWN_ENVIRONMENT = 12  # environment changes shown


class Evidence(Protocol):
    """One source of evidence: it renders its section of the diagnosis."""

    def section(self) -> Section: ...


@dataclass(frozen=True)
class DataEvidence:
    """The data set's files against the golden's (sha256 and labels)."""

    data: DataChange

    def section(self) -> Section:
        return "the data against the golden's:", data_lines(self.data)


@dataclass(frozen=True)
class ManifestEvidence:
    """The manifest's edits since the golden's recording."""

    changes: Sequence[Change]

    def section(self) -> Section:
        neutral = [c for c in self.changes if c.area == "neutral"]
        body = [c.text() for c in self.changes if c.area != "neutral"]
        body = body or ["no change that can move the outputs"]
        if neutral:
            body.append(
                "changes that do not move outputs: "
                + ", ".join(c.path for c in neutral[:SHOWN_NEUTRAL])
                + (" …" if len(neutral) > SHOWN_NEUTRAL else "")
            )
        return "manifest diff against the manifest the golden was recorded with:", body


@dataclass(frozen=True)
class StepEvidence:
    """The golden's step probes re-traced: the first preprocessing step whose output differs.
    ``changed_probes``: the probes whose data file changed since the golden."""

    report: StepReport
    changed_probes: Sequence[str] = ()

    def section(self) -> Section:
        report = self.report
        lines = [report.summary()]
        if report.environment_step is not None:
            e = report.environment_step
            lines.append(
                f"with the golden's own recorded pipeline, this machine's {e.op} output differs "
                f"from the golden's: {e.text}"
            )
        moved = self.changed_probes
        if moved:  # a probe whose file changed differs from its fingerprints because of the data
            lines.append(
                f"{len(moved)} of these probes' data changed since the golden "
                f"({', '.join(moved[:3])}): their steps differ because their files did"
            )
        later = [
            s.op
            for s in report.steps
            if s.status in ("differs", "added", "removed") and s.op not in lines[0]
        ]
        if later:
            lines.append(f"downstream, {', '.join(later)} differ as well")
        if not report.probes:
            return "preprocessing, step by step:", lines
        return f"preprocessing, step by step, on the golden's {report.probes} step probes:", lines


@dataclass(frozen=True)
class LayerEvidence:
    """The model compared layer by layer on the golden's layer probes."""

    report: LayerReport

    def section(self) -> Section:
        probes = self.report.probes
        if probes:
            return f"the model, layer by layer, on the golden's {probes} layer probes:", (
                self.report.lines()
            )
        return "the model, layer by layer:", self.report.lines()


@dataclass(frozen=True)
class CounterfactualEvidence:
    """The probe samples re-run with one pitfall flipped (or one manifest edit undone) at a
    time; ``note`` says why none ran, when none did."""

    tried: Sequence[Counterfactual]
    baseline: Counterfactual | None
    score_tol: float
    note: str = ""

    def section(self) -> Section:
        baseline = self.baseline
        if not self.tried or baseline is None:
            return "counterfactual probes:", [self.note or "none could run"]
        ranked = sorted(self.tried, key=Counterfactual.key)
        lines = [
            f"as the manifest is now: {baseline.agree}/{baseline.probes} match"
            f" (max score diff {short_number(baseline.max_diff)})"
        ]
        for c in ranked[:SHOWN_FLIPS]:
            if not c.error:
                lines.append(self._flip_line(c, baseline))
        failed = [c for c in self.tried if c.error]
        rest = len([c for c in ranked if not c.error]) - min(SHOWN_FLIPS, len(ranked))
        if rest > 0:
            lines.append(f"… {rest} more flips, none closer to the golden")
        if failed:
            lines.append(
                f"{len(failed)} flips cannot run on this model/data: "
                + "; ".join(f"{c.label}: {c.error}" for c in failed[:2])
                + (" …" if len(failed) > 2 else "")
            )
        title = (
            "counterfactual probes (the probe samples re-run with one pitfall flipped, or one "
            f"manifest edit undone, at a time, each on {min(SCREEN, baseline.probes)} probes "
            "first; ✓ = changes the outputs and brings them back to the golden):"
        )
        return title, lines

    def _flip_line(self, c: Counterfactual, baseline: Counterfactual) -> str:
        # ✓ only for a flip that changed the probes' outputs and brought them back: a no-op
        # matches whatever the manifest as it is matches, and proves nothing.
        mark = "✓ " if restores(c, baseline, self.score_tol) else ""
        reverts = f" (undoes {', '.join(x.path for x in c.reverts)})" if c.reverts else ""
        noop = ", the same outputs as the manifest as it is" if c.noop else ""
        return (
            f"{mark}with {c.label}{reverts}: {c.agree}/{c.probes} match"
            f" (max score diff {short_number(c.max_diff)}{noop})"
        )


@dataclass(frozen=True)
class EnvironmentEvidence:
    """The environment's changes since the golden; ``golden_has_flags``: whether the golden
    records the CPU flags, numeric packages and settings (goldens recorded before it kept them
    do not)."""

    changes: Sequence[tuple[str, Any, Any]]
    golden_has_flags: bool

    def section(self) -> Section:
        shown = self.changes[:SHOWN_ENVIRONMENT]
        lines = [f"{k}: {env_change_text(k, a, b)}" for k, a, b in shown] or ["none"]
        if len(self.changes) > SHOWN_ENVIRONMENT:
            lines.append(f"… {len(self.changes) - SHOWN_ENVIRONMENT} more")
        if not self.golden_has_flags:
            lines.append(
                "the golden records no CPU flags, numeric packages or settings (recorded before "
                "pytest-mlrepro kept them; the golden's next recording adds them)"
            )
        return "environment diff against the golden's:", lines


__all__ = [
    "CounterfactualEvidence",
    "DataEvidence",
    "EnvironmentEvidence",
    "Evidence",
    "LayerEvidence",
    "ManifestEvidence",
    "Section",
    "StepEvidence",
]
