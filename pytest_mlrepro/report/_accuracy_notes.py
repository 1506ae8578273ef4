"""An accuracy run's notes and a golden's enrichment in words, from the facts the check returns
(``accuracy._run.Note``, ``accuracy._enrich.Evidence``): handed in as ``ACCURACY_WORDING``."""

from __future__ import annotations

_WORDS = {
    # Evidence a golden gained (--mlrepro-enrich).
    "step fingerprints": "step fingerprints",
    "layer fingerprints": "layer fingerprints ({} layers)",
    "data checksums": "data checksums ({} files)",
    "data refreshed": "data checksums refreshed (same decoded pixels)",
    "pixel identities": "decoded-pixel identities ({} files)",
    "environment fields": "environment fields ({})",
    # Evidence left out, and why.
    "steps unrun": "step fingerprints (the probes do not run through the pipeline: {})",
    "layers unmatched": (
        "layer fingerprints (the step probes' preprocessed outputs are not the ones the golden "
        "recorded: the model's input would not be the golden's)"
    ),
    "layers untraceable": "layer fingerprints (this model's layers cannot be traced)",
    "environment foreign": (
        "environment fields {} (this run's environment is not the recording's: {} differ)"
    ),
    # The run's notes.
    "not reproduced": (
        "golden not enriched ({} is left as it was): this run does not reproduce it ({}); "
        "evidence is added only to a golden whose every compared figure a run reproduces"
    ),
    "not current": (
        "golden not enriched ({} is left as it was): the {} is not the golden's, so this run's "
        "evidence would not describe it"
    ),
    "complete": "golden {} has every evidence this run records{}",
    "write failed": "golden not enriched: {}",
    "enriched": "golden {} enriched with {}; no figure changed{}",
    "shard reference": "not checked in shard {}",
}


def accuracy_words(fact: tuple[str, ...]) -> str:
    """A note or an enrichment's piece: ``data checksums (6 files)``."""
    kind, *facts = fact
    if kind == "not reproduced":  # the figures outside tolerance; none: the data changed
        facts[1] = f"{facts[1]} outside tolerance" if facts[1] else "the data changed"
    if kind in ("complete", "enriched"):  # what was left out, with why
        facts[-1] = f"; not added: {facts[-1]}" if facts[-1] else ""
    if kind == "same pixels":
        return _same_pixels(*facts)
    return _WORDS[kind].format(*facts)


def _same_pixels(count: str, files: str, manifest: str) -> str:
    """Files whose bytes changed but that decode to the golden's pixels: no data change."""
    one = count == "1"
    return (
        f"{count} file{'' if one else 's'} of the data changed bytes (sha256) but "
        f"decode{'s' if one else ''} to the golden's very pixels ({files}): not a data change. "
        f"Refresh the golden's data identity with `pytest {manifest} --mlrepro-enrich`; "
        "--mlrepro-strict fails on any byte change"
    )
