"""The item that stands for a manifest that does not load: it fails with file, line and field, and
the other manifests still run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..errors import ManifestError
from ..results import Row, row_json
from ._base import ROW_ATTR, MlreproFailure
from ._junit import junit_view


class ManifestErrorItem(pytest.Item):
    """Stands for a manifest that does not load: fails with file:line:field, the rest still run."""

    def __init__(self, *, error: ManifestError, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error = error

    def runtest(self) -> None:
        raise MlreproFailure(str(self.error))

    def report_attributes(self, when: str) -> dict[str, Any]:
        """The call's row (``ManifestItem.report_attributes``)."""
        if when != "call":
            return {}
        invalid = Row(self.nodeid, "failed", manifest=self.error.file, verdict="invalid manifest")
        row = row_json(invalid)
        self.user_properties.extend(junit_view(row))
        return {ROW_ATTR: row}

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        return str(excinfo.value)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, (self.error.line or 1) - 1, f"{self.name} (invalid manifest)"
