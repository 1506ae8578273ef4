"""Cross-framework agreement: a manifest naming a ``reference`` (the same model in another
runtime) is checked per sample against its golden (docs/manifest.md)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .._names import record_command
from ..errors import GoldenError, ManifestError, ReferenceGoldenMissing
from ..manifest import Manifest, Reference, Tolerances, load_manifest
from ..settings import OutsideProject, Settings, resolve_inside, shown_path
from . import _store as golden_store
from ._metrics import AnyScores, Comparison, Results, accuracy, compare, paired_rows

_MANIFEST_SUFFIXES = (".yaml", ".yml")


def resolve_reference(manifest: Manifest, settings: Settings) -> Manifest:
    """A path relative to the manifest (.yaml/.yml) or a manifest name in the same folder."""
    spec = manifest.reference_spec
    assert spec is not None
    where = ("reference",) if isinstance(manifest.reference, str) else ("reference", "manifest")
    folder = manifest.path.parent
    value = spec.manifest
    if value.endswith(_MANIFEST_SUFFIXES) or "/" in value:
        try:
            path = resolve_inside(folder, value, settings)
        except OutsideProject as exc:
            raise manifest.error(where, str(exc)) from None
        if not path.is_file():
            raise manifest.error(where, f"reference manifest not found: {path}")
        reference = load_manifest(path, display=shown_path(path, settings.root))
    else:
        reference = _find_by_name(manifest, folder, value, where, settings)
    _check_comparable(manifest, reference, where)
    return reference


def _find_by_name(
    manifest: Manifest, folder: Path, name: str, where: tuple[str, ...], settings: Settings
) -> Manifest:
    # The usual layout first (<name>.yaml), then every manifest of the folder.
    candidates = [folder / f"{name}{suffix}" for suffix in _MANIFEST_SUFFIXES]
    candidates += sorted(p for s in _MANIFEST_SUFFIXES for p in folder.glob(f"*{s}"))
    seen: set[Path] = set()
    names: list[str] = []
    for path in candidates:
        if path in seen or not path.is_file() or path.resolve() == manifest.path.resolve():
            continue
        seen.add(path)
        try:
            found = load_manifest(path, display=shown_path(path, settings.root))
        except ManifestError:
            if path.stem == name:
                raise
            continue  # another manifest's own error is its own item's business
        if found.name == name:
            return found
        names.append(found.name)
    known = ", ".join(sorted(names)) or "none"
    folder_shown = shown_path(folder, settings.root)
    raise manifest.error(
        where, f"no manifest named {name!r} in {folder_shown}/ (manifests there: {known})"
    )


def _check_comparable(manifest: Manifest, reference: Manifest, where: tuple[str, ...]) -> None:
    if reference.name == manifest.name:
        raise manifest.error(where, "a manifest cannot be its own reference")
    if reference.dataset.name != manifest.dataset.name:
        raise manifest.error(
            where,
            f"the reference {reference.name!r} evaluates data set {reference.dataset.name!r}, "
            f"this manifest {manifest.dataset.name!r}: per-sample results cannot be compared",
        )
    if reference.dataset.classes != manifest.dataset.classes:
        raise manifest.error(
            where,
            f"the reference has {reference.dataset.classes} classes, this manifest "
            f"{manifest.dataset.classes}",
        )
    if reference.postprocess.softmax != manifest.postprocess.softmax:
        raise manifest.error(
            where,
            f"postprocess.softmax is {manifest.postprocess.softmax} here and "
            f"{reference.postprocess.softmax} in the reference: probabilities cannot be "
            "compared with logits",
        )


@dataclass(frozen=True)
class ReferenceCheck:
    """This run against the reference's golden."""

    name: str
    golden: str  # the reference golden, as shown
    comparison: Comparison  # metrics.compare(reference golden, this run)
    reference_top1: float  # over the shared samples, in percent
    now_top1: float
    score_space: str  # "probability" or "logit"
    tolerances: Reference

    @property
    def top1_ratio(self) -> float:
        if self.reference_top1 == 0:
            return 1.0 if self.now_top1 == 0 else float("inf")
        return self.now_top1 / self.reference_top1

    @property
    def failures(self) -> list[str]:
        """The levels outside tolerance: ``samples``, ``agreement``, ``score``, ``top1``."""
        tol, c = self.tolerances, self.comparison
        if c.samples == 0:
            return ["samples"]
        out = []
        if c.agreement < tol.agreement - 1e-12:
            out.append("agreement")
        if c.max_score_diff > tol.score:
            out.append("score")
        if self.top1_ratio < tol.top1 - 1e-12:
            out.append("top1")
        return out

    @property
    def ok(self) -> bool:
        return not self.failures


def compare_to_reference(
    reference: Results, now: Results, now_scores: AnyScores
) -> tuple[Comparison, float, float]:
    """(comparison, reference top-1 %, this top-1 %) over the samples both have."""
    loose = Tolerances(top1=100.0, top5=100.0, agreement=0.0, score=float("inf"))
    comparison = compare(reference, now, now_scores, loose)
    ref_rows, now_rows = paired_rows(reference, now)
    if not len(ref_rows):
        return comparison, 0.0, 0.0
    ref_top1 = accuracy(reference.topk[ref_rows], reference.labels[ref_rows])[0]
    now_top1 = accuracy(now.topk[now_rows], now.labels[now_rows])[0]
    return comparison, ref_top1, now_top1


def reference_results(manifest: Manifest, settings: Settings) -> Results | None:
    """Read before the run so that a streamed evaluation keeps only the scores it needs (None: no
    usable one)."""
    if manifest.reference is None:
        return None
    try:
        reference = resolve_reference(manifest, settings)
        recorded = golden_store.read(golden_store.golden_path(reference, settings))
    except (GoldenError, ManifestError, OSError):
        return None
    return None if recorded is None else recorded.results


def check_reference(
    manifest: Manifest, settings: Settings, now: Results, now_scores: AnyScores
) -> ReferenceCheck:
    """ManifestError, GoldenError or ReferenceGoldenMissing when it cannot compare."""
    spec = manifest.reference_spec
    assert spec is not None
    reference = resolve_reference(manifest, settings)
    path = golden_store.golden_path(reference, settings)
    recorded = golden_store.read(path)
    shown = shown_path(path, settings.root)
    if recorded is None:
        raise ReferenceGoldenMissing(
            f"the reference {reference.name!r} has no golden at {shown}: record it first with "
            f"{record_command(shown_path(reference.path, settings.root))}"
        )
    comparison, ref_top1, now_top1 = compare_to_reference(recorded.results, now, now_scores)
    return ReferenceCheck(
        name=reference.name,
        golden=shown,
        comparison=comparison,
        reference_top1=ref_top1,
        now_top1=now_top1,
        score_space="probability" if manifest.postprocess.softmax else "logit",
        tolerances=spec,
    )
