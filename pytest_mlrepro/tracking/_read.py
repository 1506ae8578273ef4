"""Results files read back from a tracking store (``mlrepro history|merge --track``): each complete
session run's results artifact, read and validated as a file on disk is (the same tables)."""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from ..results import Document, ResultsFileError, load_results
from ._fields import COMPLETE, KIND, NIGHT, RESULTS_ARTIFACT, RESULTS_FILE, SESSION
from ._log import bounded_requests, client, failure
from ._uri import experiment_name

PAGE = 500  # runs asked for per request


def tracked_documents(
    uri: str, *, night: str | None = None, since: str | None = None
) -> list[Document]:
    """The results files logged to ``uri``, oldest first, of UTC day ``night`` or ``since`` on
    (YYYY-MM-DD). TrackingError: store unreadable; ResultsFileError: an invalid artifact."""
    try:
        with bounded_requests():
            found = _runs(uri, night)
            found = [(tags, run_id) for tags, run_id in found if not since or tags[0] >= since]
            documents = []
            with tempfile.TemporaryDirectory(prefix="mlrepro-tracked-") as folder:
                mlflow = client(uri)
                for (_night, name), run_id in sorted(found):
                    where = Path(folder) / run_id
                    where.mkdir()
                    local = mlflow.download_artifacts(run_id, RESULTS_ARTIFACT, str(where))
                    document = load_results(Path(local))
                    documents.append(dataclasses.replace(document, path=Path(name)))
    except ResultsFileError:
        raise
    except Exception as exc:
        raise failure(uri, exc) from None
    return sorted(documents, key=lambda d: (d.created or "", str(d.path)))


def _runs(uri: str, night: str | None) -> list[tuple[tuple[str, str], str]]:
    """((night, file name), run id) of the complete session runs."""
    mlflow = client(uri)
    experiment = mlflow.get_experiment_by_name(experiment_name())
    if experiment is None:
        return []
    query = f"tags.`{KIND}` = '{SESSION}' and tags.`{COMPLETE}` = 'true'"
    if night is not None:
        query += f" and tags.`{NIGHT}` = '{night}'"
    out: list[tuple[tuple[str, str], str]] = []
    token = None
    while True:
        page = mlflow.search_runs(
            [experiment.experiment_id], filter_string=query, max_results=PAGE, page_token=token
        )
        for run in page:
            tags = run.data.tags
            key = (tags.get(NIGHT, ""), tags.get(RESULTS_FILE, run.info.run_id))
            out.append((key, run.info.run_id))
        token = page.token
        if not token:
            return out
