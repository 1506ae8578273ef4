"""Results files (``pytest --mlrepro-json``): their format, read back and validated, and the
merge of the shards of one evaluation (``--mlrepro-shard I/N``) into the unsharded result.

The public core ``mlrepro merge`` builds on (no pytest): :func:`load_results` reads a file with
errors that name the file and the JSON path of a bad field; :func:`combine` and
:func:`merge_shards` put shards back together, exactly.
"""

from __future__ import annotations

from ..data import Shard, shard_of
from ._fields import (
    changed_samples,
    diagnosis_summary,
    differences,
    manifest_identity,
    pipeline_digest,
    pipeline_of,
    settings_of,
)
from ._format import (
    BEYOND_SCHEMA,
    MAX_ROWS,
    MAX_TOTAL_BYTES,
    Part,
    ResultsFileError,
    created_now,
    derived_status,
    json_path,
    load_results,
    load_results_files,
    shard_verdict,
    validate_results,
)
from ._merge import (
    ShardMergeError,
    combine,
    merge_shards,
    metrics,
    shard_results,
    unsharded_nodeid,
)
from ._record import (
    FORMAT,
    FORMATS,
    LISTED,
    ChangedSample,
    ChangedSamples,
    Diagnosis,
    DiagnosisSection,
    Document,
    Environment,
    Machine,
    PerSample,
    Row,
    StaleGolden,
    Status,
    created_time,
    record,
    results_schema,
    results_text,
    row_json,
    row_of,
)

__all__ = [
    "BEYOND_SCHEMA",
    "FORMAT",
    "FORMATS",
    "LISTED",
    "MAX_ROWS",
    "MAX_TOTAL_BYTES",
    "ChangedSample",
    "ChangedSamples",
    "Diagnosis",
    "DiagnosisSection",
    "Document",
    "Environment",
    "Machine",
    "Part",
    "PerSample",
    "ResultsFileError",
    "Row",
    "Shard",
    "ShardMergeError",
    "StaleGolden",
    "Status",
    "changed_samples",
    "combine",
    "created_now",
    "created_time",
    "derived_status",
    "diagnosis_summary",
    "differences",
    "json_path",
    "load_results",
    "load_results_files",
    "manifest_identity",
    "merge_shards",
    "metrics",
    "pipeline_digest",
    "pipeline_of",
    "record",
    "results_schema",
    "results_text",
    "row_json",
    "row_of",
    "settings_of",
    "shard_of",
    "shard_results",
    "shard_verdict",
    "unsharded_nodeid",
    "validate_results",
]
