"""The item that stands for a manifest that does not load: it fails with file, line and field, and
the other manifests still run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ..errors import ManifestError
from ._base import PROPERTY_PREFIX, MlreproFailure


class ManifestErrorItem(pytest.Item):
    """Stands for a manifest that does not load: fails with file:line:field, the rest still run."""

    def __init__(self, *, error: ManifestError, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error = error

    def runtest(self) -> None:
        self.user_properties.append((PROPERTY_PREFIX + "manifest", self.error.file))
        self.user_properties.append((PROPERTY_PREFIX + "verdict", "invalid manifest"))
        raise MlreproFailure(str(self.error))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        return str(excinfo.value)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, (self.error.line or 1) - 1, f"{self.name} (invalid manifest)"
