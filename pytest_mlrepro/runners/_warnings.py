"""A framework's load of a model file: its warnings kept apart from its errors, and its errors
said as what they are.

The loaders turn whatever a framework raises while it parses a file into "not a model file"
(:func:`loading`, at the manifest's field). A warning is not such an error: under ``-W error``
(or a filter that makes it one) torch 2.13's ``DeprecationWarning`` from ``torch.jit.load`` would
be raised inside the load and reported as a damaged archive. :func:`framework_warnings` records
the warnings of the load (none of them raises there) and issues them again once the load has
succeeded, outside the loader's error handling: the run's own filters then decide, as for any
other code (shown in pytest's warnings summary, or raised as the warning it is under ``-W
error``).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator

from ..errors import InvalidModel, MlreproError
from ..manifest import Manifest


@contextlib.contextmanager
def framework_warnings(refuse: Callable[[Exception], MlreproError] | None = None) -> Iterator[None]:
    """Record the warnings of the body; issue them again when it ends without an error (a load
    that fails reports its error, not the warnings on its way). ``refuse``: what a framework's
    own error in the body becomes (:func:`loading`); the warnings are issued outside it."""
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
    """The body loads the model file of ``model.<field>``: whatever the framework raises is an
    ``error`` at that manifest field (file, line, field) that reads ``what (its type: its first
    line)hint``, its warnings issued after the load (:func:`framework_warnings`), never made
    such an error."""

    def refuse(exc: Exception) -> MlreproError:
        why = f"{what} ({type(exc).__name__}: {first_line(exc)}){hint}"
        return error(manifest.error(("model", field), why).format())

    return framework_warnings(refuse)
