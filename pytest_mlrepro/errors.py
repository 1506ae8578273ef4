"""Exceptions raised by pytest-mlrepro: every error raised on purpose derives from
:class:`MlreproError`, anything else escaping the core is a bug (docs/design.md#errors)."""

from __future__ import annotations

from collections.abc import Sequence


class MlreproError(Exception):
    """Base class of every error pytest-mlrepro raises on purpose."""


class ManifestError(MlreproError):
    """A manifest is invalid. ``str()`` reads ``file:line: field.path: message``."""

    def __init__(self, file: str, line: int | None, field: str, message: str) -> None:
        self.file = file
        self.line = line
        self.field = field
        self.message = message
        super().__init__(self.format())

    def format(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        return (
            f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        )


class IntegrityError(MlreproError):
    """A file's content does not match the sha256 the manifest declares."""


class SignatureError(MlreproError):
    """The model's declared inputs (name, dtype, shape, layout) do not match the model."""


class InvalidModel(MlreproError):
    """A model file (its sha256 matches) is not a valid model of the declared format."""


class NonFiniteOutputs(MlreproError):
    """The model produced NaN or ±Inf outputs: no ranking, metric or golden can be made of them."""

    SHOWN = 5  # sample ids named in the message

    def __init__(self, ids: Sequence[str], total: int, where: str = "") -> None:
        self.ids = list(ids)
        self.total = total
        shown = ", ".join(self.ids[: self.SHOWN]) + (", ..." if len(self.ids) > self.SHOWN else "")
        # ``message`` without ``where`` (the manifest), for callers that name it their own way.
        self.message = (
            f"the model produced non-finite outputs (NaN or ±Inf) for {len(self.ids)} of "
            f"{total} samples: {shown}. Nothing was compared or recorded: fix the model (or "
            "its input: check the preprocessing's value range)"
        )
        super().__init__(f"{where}: {self.message}" if where else self.message)


class SampleError(MlreproError):
    """A data sample could not be decoded or preprocessed."""

    def __init__(self, sample: str, message: str) -> None:
        self.sample = sample
        super().__init__(f"sample {sample!r}: {message}")


class GoldenError(MlreproError):
    """A golden file that cannot be read as one; ``digest``: the sha256 of the bytes read, which
    an update may replace."""

    digest: str | None = None


class GoldenNotAFile(GoldenError):
    """The golden path is a symlink, FIFO, folder or device: not read, nor replaced by an update."""


class ReferenceGoldenMissing(GoldenError):
    """The reference manifest has no golden yet (the check cannot run)."""


class OutputError(MlreproError):
    """A file the tool writes cannot be written (the previous one is left intact)."""


class BuildError(MlreproError):
    """A registered model or artifact builder failed."""


class BuildMismatch(BuildError):
    """A registered artifact builder wrote other bytes than the manifest pins."""

    def __init__(
        self,
        message: str,
        *,
        produced: str,
        expected: str,
        machine: dict[str, object],
        packages: dict[str, str],
    ) -> None:
        super().__init__(message)
        self.message = message
        self.produced = produced
        self.expected = expected
        self.machine = machine
        self.packages = packages


class Unavailable(MlreproError):
    """Something the item needs is not available on this machine; ``how`` says how to provide it."""

    def __init__(self, message: str, how: str = "") -> None:
        self.how = how
        super().__init__(f"{message}. {how}".rstrip() if how else message)


class FrameworkUnavailable(Unavailable):
    """The framework is not installed, or its installed version is outside the constraint."""


class DatasetUnavailable(Unavailable):
    """The data set is neither mirrored, cached nor downloadable here."""


class DeviceUnavailable(Unavailable):
    """The requested device is not usable by this framework on this machine."""
