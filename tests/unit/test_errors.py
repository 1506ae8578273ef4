"""The errors the tool raises on purpose make one documented tree: docs/design.md#errors names
every subclass of MlreproError defined anywhere in the package, under its parent, with the module
of those defined outside ``errors.py``; a new error class that is not added there fails here."""

from __future__ import annotations

import importlib
import pkgutil
import re

from helpers import REPO

import pytest_mlrepro
from pytest_mlrepro.errors import MlreproError


def documented_tree() -> dict[str, tuple[str, str]]:
    """name → (parent, the rest of its line), from the tree drawn in docs/design.md."""
    doc = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    lines = doc[doc.index("    MlreproError\n") :].splitlines()[1:]
    parents = ["MlreproError"]
    tree: dict[str, tuple[str, str]] = {}
    for line in lines:
        found = re.match(r"    ((?:│   |    )*)[├└]── (\w+)(.*)", line)
        if found is None:
            continue  # a heading between branches
        depth = len(found.group(1)) // 4
        name = found.group(2)
        del parents[depth + 1 :]
        tree[name] = (parents[depth], found.group(3))
        parents.append(name)
    return tree


def every_error_class() -> list[type[MlreproError]]:
    for module in pkgutil.walk_packages(pytest_mlrepro.__path__, "pytest_mlrepro."):
        if not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    found: list[type[MlreproError]] = []
    todo = [MlreproError]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__.startswith("pytest_mlrepro.") and sub not in found:
                found.append(sub)
                todo.append(sub)
    return found


def test_every_error_class_is_in_the_documented_tree_under_its_parent() -> None:
    tree = documented_tree()
    classes = every_error_class()
    assert len(classes) >= 20  # the walk found the package's errors, not an empty list
    for cls in classes:
        assert cls.__name__ in tree, (
            f"{cls.__module__}.{cls.__name__}: not in docs/design.md"
        )
        parent, text = tree[cls.__name__]
        assert cls.__bases__[0].__name__ == parent, (cls, parent)
        if cls.__module__ != "pytest_mlrepro.errors":
            where = cls.__module__.removeprefix("pytest_mlrepro.").replace(".", "/") + ".py"
            assert f"({where})" in text, f"the tree should name {where} for {cls.__name__}"
    # Nothing drawn that does not exist.
    assert set(tree) == {cls.__name__ for cls in classes}
