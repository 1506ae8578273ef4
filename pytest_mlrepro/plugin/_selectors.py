"""Manifest items beside the plugins that pick tests by what changed, which see Python files only:
neither ever gives a manifest a stale pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .._names import matches_patterns

PLUGIN_NAME = "mlrepro-selectors"
TESTMON_SELECT = "TestmonSelect"  # pytest-testmon's selecting plugin (testmon 2.x)
_args_key = pytest.StashKey[list[str]]()


def remember_args(config: pytest.Config) -> None:  # before pytest-picked replaces them
    config.stash[_args_key] = list(config.args)


def picked_ref(config: pytest.Config) -> str | None:
    """The git ref pytest-picked compares with when it selects (``--picked only``), else None."""
    if config.getoption("picked", None) != "only":
        return None
    if config.getoption("picked_mode", "unstaged") == "branch":
        return str(config.getoption("parent_branch", None) or "main")
    return "HEAD"  # git status: the uncommitted and untracked changes


def register(config: pytest.Config) -> bool:
    """Register the glue; under pytest-picked's selection ask for ``--mlrepro-changed`` with its
    ref (unless a ref is given), and say that the engine is needed."""
    config.pluginmanager.register(SelectorGlue(config), PLUGIN_NAME)
    ref = picked_ref(config)
    if ref is None:
        return False
    if (
        not config.getoption("mlrepro_changed", None)
        and not str(config.getini("mlrepro_changed")).strip()
    ):
        config.option.mlrepro_changed = ref
    return True


def _testmon_select(config: pytest.Config) -> Any:
    """pytest-testmon's selecting plugin, when it selects (else None)."""
    selects = getattr(getattr(config, "testmon_config", None), "select", False)
    return config.pluginmanager.get_plugin(TESTMON_SELECT) if selects else None


class SelectorGlue:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def _is_manifest(self, name: str) -> bool:
        root = self.config.rootpath
        return matches_patterns(
            root / name.split("::", 1)[0], root, self.config.getini("mlrepro_manifests")
        )

    def _manifests_of(self, args: list[str]) -> list[str]:  # the manifests in or under args
        root, here = self.config.rootpath, self.config.invocation_params.dir
        patterns = self.config.getini("mlrepro_manifests")
        files = sorted({p.resolve() for pattern in patterns for p in root.glob(pattern)})
        wanted = [(here / arg.split("::", 1)[0]).resolve() for arg in args]
        return [str(f) for f in files if any(f == w or f.is_relative_to(w) for w in wanted)]

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        config = self.config
        if picked_ref(config) is not None:
            given = {Path(a.split("::", 1)[0]).resolve() for a in config.args}
            original = config.stash.get(_args_key, [])
            config.args += [m for m in self._manifests_of(original) if Path(m) not in given]
        select = _testmon_select(config)
        if select is not None:
            for attribute in ("deselected_tests", "deselected_files"):
                names = getattr(select, attribute, None)
                if isinstance(names, list):
                    names[:] = [n for n in names if not self._is_manifest(str(n))]

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        lines = []
        ref = picked_ref(config)
        if ref is not None:
            lines.append(
                "mlrepro: pytest-picked picks Python test files only: the manifests whose "
                f"manifest, model, data list, golden or code changed since {ref} run too "
                "(--mlrepro-changed)"
            )
        if _testmon_select(config) is not None:
            lines.append(
                "mlrepro: pytest-testmon follows Python code only: manifest items always run "
                "(their models, data and goldens are no Python code)"
            )
        return lines
