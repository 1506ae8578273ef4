"""A framework's load of a model file: warnings re-issued after the load, so that under
``-W error`` a ``DeprecationWarning`` is not reported as a damaged archive."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator

from ..errors import InvalidModel, MlreproError
from ..manifest import Manifest


@contextlib.contextmanager
def framework_warnings(refuse: Callable[[Exception], MlreproError] | None = None) -> Iterator[None]:
    """Warnings re-issued when the body succeeds; ``refuse``: what a framework's error becomes."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        except MlreproError:
            raise
        except Exception as exc:  # the framework's own types (protobuf, flatbuffer, zip, ...)
            if refuse is None:
                raise
            raise refuse(exc) from None
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


def first_line(exc: BaseException) -> str:
    """What an exception says, in one line: its message's first line, else its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def loading(
    manifest: Manifest,
    what: str,
    hint: str = "",
    error: type[MlreproError] = InvalidModel,
    field: str = "file",
) -> contextlib.AbstractContextManager[None]:
    """Whatever the framework raises in the body is an ``error`` at ``model.<field>``."""

    def refuse(exc: Exception) -> MlreproError:
        why = f"{what} ({type(exc).__name__}: {first_line(exc)}){hint}"
        return error(manifest.error(("model", field), why).format())

    return framework_warnings(refuse)
