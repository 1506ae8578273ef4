"""A framework's warnings while it loads a model, kept apart from its errors.

The loaders turn whatever a framework raises while it parses a file into "not a model file"
(``InvalidModel``). A warning is not such an error: under ``-W error`` (or a filter that makes it
one) torch 2.13's ``DeprecationWarning`` from ``torch.jit.load`` would be raised inside the load
and reported as a damaged archive. :func:`framework_warnings` records the warnings of the load
(none of them raises there) and issues them again once the load has succeeded, outside the
loader's error handling: the run's own filters then decide, as for any other code (shown in
pytest's warnings summary, or raised as the warning it is under ``-W error``).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator


@contextlib.contextmanager
def framework_warnings() -> Iterator[None]:
    """Record the warnings of the body; issue them again when it ends without an error (a load
    that fails reports its error, not the warnings on its way)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)


__all__ = ["framework_warnings"]
