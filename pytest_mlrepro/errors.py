"""Exceptions raised by pytest-mlrepro.

Every error the tool raises on purpose derives from :class:`MlreproError`; anything else escaping
the core is a bug in the tool. The whole tree (``tests/unit/test_errors.py`` keeps it complete:
every subclass in the package is here, under its parent). Those defined beside the one layer that
raises them name their module; the others are here::

    MlreproError
    ├── ManifestError        a manifest (or a file it names) is invalid: file, line, field path
    ├── IntegrityError       a model or data file does not match its declared sha256 / size
    ├── SignatureError       the model's inputs or outputs do not match what the manifest declares
    ├── InvalidModel         a model file is not a valid model of its format (names the file)
    ├── NonFiniteOutputs     the model produced NaN or ±Inf for some samples (count and ids)
    ├── SampleError          one data sample cannot be decoded or preprocessed (names the sample)
    ├── StepRegistrationError  (pipeline/_steps.py) a custom step that cannot be registered
    ├── GoldenError          a golden file exists but is not valid (never overwritten silently)
    │   ├── GoldenNotAFile          a symlink, FIFO, folder or device where a golden should be
    │   └── ReferenceGoldenMissing  the reference manifest has no golden yet
    ├── BuildError           a registered builder failed or produced an unexpected artifact
    │   └── BuildMismatch    its bytes are not the pinned ones (names this machine and packages)
    ├── OutputError          a file the tool writes (golden, results file) cannot be written
    │   └── GoldenChanged    (goldens/_writer.py) the golden changed since the writer read it
    ├── Unavailable          needed but absent: the item skips (fails with --mlrepro-strict)
    │   ├── FrameworkUnavailable   not installed, or its version is outside the constraint
    │   ├── DatasetUnavailable     no mirror, no cache and no way to download
    │   └── DeviceUnavailable      the device (cuda) is not usable by this framework here
    │   results files (``mlrepro merge``, ``mlrepro history``; exit status 2):
    ├── ResultsFileError     (results/_format.py) unreadable or invalid: file and JSON path
    ├── ShardMergeError      (results/_merge.py) shards that do not make one whole run
    ├── MatrixError          (matrix/_build.py) files that do not make one matrix
    ├── HistoryError         (matrix/_history.py) files that do not make a history
    ├── ReportUnavailable    (report/html/_render.py) the HTML report's libraries are missing
    ├── TrackingError        (tracking/_log.py) the tracking store cannot be reached or refuses
    ├── ChangedFilesError    (changes/_git.py) git cannot say what changed since a ref
    │   ``mlrepro init``:
    ├── InitError            (onboarding/_data_folder.py) what init cannot do with its files
    ├── PresetSizeError      (onboarding/_presets.py) a size the preset's source does not define
    └── ModelReadError       (onboarding/_model_info.py) the model file is not its format
"""

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
    """A golden file exists but cannot be read as a golden (or, for the subclass
    ``ReferenceGoldenMissing``, the golden another manifest's check needs does not exist yet).
    ``digest``: the sha256 of the bytes that were read, when they were (an update that replaces
    an invalid golden replaces those very bytes, never another run's golden written since)."""

    digest: str | None = None


class GoldenNotAFile(GoldenError):
    """The golden path is a symlink, FIFO, folder or device (or below a symlinked folder): not
    read, and not replaced by an update either (the user removes it)."""


class ReferenceGoldenMissing(GoldenError):
    """The reference manifest has no golden yet (the check cannot run)."""


class OutputError(MlreproError):
    """A file the tool writes (a golden, a results file) cannot be written: the message names the
    file, what is wrong and the fix; the previous file, if any, is left intact."""


class BuildError(MlreproError):
    """A registered model or artifact builder failed."""


class BuildMismatch(BuildError):
    """A registered artifact builder wrote other bytes than the manifest pins. Carries what is
    known about the build (this machine, the packages it used) so that a layer that can read the
    golden adds where the pinned bytes' golden was recorded."""

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
