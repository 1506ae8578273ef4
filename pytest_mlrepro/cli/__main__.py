"""``python -m pytest_mlrepro.cli``: the ``mlrepro`` command."""

from __future__ import annotations

from ._main import main

raise SystemExit(main())
