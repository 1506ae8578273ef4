"""Fail when a private name or module crosses its boundary inside a package (CI, .ci/run).

    python scripts/check_private_names.py [--fix] [PACKAGE_DIR ...]   (default: pytest_mlrepro)

A module's underscore names are its own: what a sibling uses gets a public name. A private
*module* (``plugin/_base.py``; any module under a private folder) belongs to the package that
holds it (``plugin``): only that package's modules, at any depth, import it; other packages use
the names its ``__init__`` offers. So top-level private modules (``pytest_mlrepro/_files.py``)
are shared by the whole package. ``__all__`` is kept only by public modules and ``__init__``s:
a private module has none (``--fix`` removes it). Reported, one line each as
``file:line: name (how)``:

- ``from .x import _name`` or ``from pytest_mlrepro.x import _name``, where ``_name`` is not
  itself a module;
- ``module._name``, an attribute access on a name bound to one of the package's modules by an
  import;
- an import of another package's private module (``from ..plugin._base import X``,
  ``from ..plugin import _base``, ``import pytest_mlrepro.plugin._base``);
- an underscore name in a module's ``__all__``, and an ``__all__`` in a private module.

Dunder names (``__version__``) are public. Imports of other distributions are not checked (their
private names are their maintainers' business). Exit status 1 when anything is reported.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Crossing:
    """One private name used outside the module that defines it."""

    file: Path
    line: int
    name: str
    how: str

    def __str__(self) -> str:
        shown = self.file.resolve()
        if shown.is_relative_to(Path.cwd()):
            shown = shown.relative_to(Path.cwd())
        return f"{shown}:{self.line}: {self.name} ({self.how})"


def is_private(name: str) -> bool:
    """An underscore name that is not a dunder."""
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def is_all_assignment(node: ast.AST) -> bool:
    """``__all__ = [...]`` (a literal list or tuple is what is checked)."""
    return isinstance(node, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
    )


def binds_all(node: ast.AST) -> bool:
    """Any statement that binds ``__all__`` (``=``, ``+=``, annotated)."""
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and any(
        isinstance(t, ast.Name) and t.id == "__all__" for t in targets
    )


def owner_of(dotted: str) -> str | None:
    """The package a private module belongs to (``a.b`` of ``a.b._c.d``); None if public."""
    parts = dotted.split(".")
    for i in range(1, len(parts)):
        if is_private(parts[i]):
            return ".".join(parts[:i])
    return None


def inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


class Package:
    """The modules of the package rooted at ``root`` (a folder with ``__init__.py``)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.name = root.name

    def module_of(self, path: Path) -> str:
        parts = list(path.relative_to(self.root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        return ".".join(parts)

    def is_module(self, dotted: str) -> bool:
        """Whether ``dotted`` names a module or package of this package."""
        parts = dotted.split(".")
        if parts[0] != self.name:
            return False
        base = self.root.parent.joinpath(*parts)
        return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()

    def files(self) -> Iterator[Path]:
        yield from sorted(self.root.rglob("*.py"))


def resolve_from(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute module of ``from <level dots><target> import ...`` written in ``module``."""
    if level == 0:
        return target or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def crossings(package: Package, path: Path) -> list[Crossing]:
    """The private names ``path`` takes from, or offers to, other modules of ``package``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    module = package.module_of(path)
    is_package = path.name == "__init__.py"
    found: list[Crossing] = []
    modules: dict[str, str] = {}  # local name -> the package module it is bound to

    def imported(dotted: str, line: int) -> None:
        owner = owner_of(dotted)
        if owner is not None and not inside(module, owner):
            found.append(Crossing(path, line, dotted, f"a private module of {owner}"))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if package.is_module(alias.name):
                    imported(alias.name, node.lineno)
                    local = alias.asname or alias.name.split(".")[0]
                    modules[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom):
            source = resolve_from(module, is_package, node.level, node.module)
            if not package.is_module(source):
                continue
            imported(source, node.lineno)
            for alias in node.names:
                dotted = f"{source}.{alias.name}"
                if package.is_module(dotted):
                    if owner_of(source) is None:  # (else the source was said already)
                        imported(dotted, node.lineno)
                    modules[alias.asname or alias.name] = dotted
                elif is_private(alias.name):
                    found.append(Crossing(path, node.lineno, alias.name, f"imported from {source}"))

    def module_named(expr: ast.expr) -> str | None:
        if isinstance(expr, ast.Name):
            return modules.get(expr.id)
        if isinstance(expr, ast.Attribute):
            parent = module_named(expr.value)
            if parent is not None and package.is_module(f"{parent}.{expr.attr}"):
                return f"{parent}.{expr.attr}"
        return None

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            owner = module_named(node.value)
            if owner is not None and not package.is_module(f"{owner}.{node.attr}"):
                found.append(Crossing(path, node.lineno, node.attr, f"attribute of {owner}"))
        if binds_all(node) and owner_of(module) is not None:
            found.append(Crossing(path, node.lineno, "__all__", "in a private module"))
        if is_all_assignment(node):
            assert isinstance(node, ast.Assign)
            for item in node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else []:
                name = item.value if isinstance(item, ast.Constant) else None
                if isinstance(name, str) and is_private(name):
                    found.append(Crossing(path, item.lineno, name, "in __all__"))
    return sorted(found, key=lambda c: (c.line, c.name))


def without_all(path: Path) -> bool:
    """Remove the module-level ``__all__`` statements of ``path`` (and the blank lines they leave
    at the end); whether it changed."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    spans = [(n.lineno, n.end_lineno or n.lineno) for n in ast.parse(text).body if binds_all(n)]
    for first, last in reversed(spans):
        del lines[first - 1 : last]
    out = "".join(lines)
    out = out.rstrip("\n") + "\n" if spans else out
    while "\n\n\n\n" in out:  # (two blank lines at most, as ruff formats)
        out = out.replace("\n\n\n\n", "\n\n\n")
    if out != text:
        path.write_text(out, encoding="utf-8")
    return out != text


def fix(roots: Sequence[Path]) -> list[Path]:
    """Remove ``__all__`` from every private module of the packages at ``roots``."""
    changed = []
    for root in roots:
        package = Package(root)
        for path in package.files():
            if owner_of(package.module_of(path)) is not None and without_all(path):
                changed.append(path)
    return changed


def check(roots: Sequence[Path]) -> list[Crossing]:
    """Every crossing in the packages at ``roots``."""
    found: list[Crossing] = []
    for root in roots:
        package = Package(root)
        for path in package.files():
            found += crossings(package, path)
    return found


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    fixing = "--fix" in args
    args = [a for a in args if a != "--fix"]
    roots = [Path(a) for a in args] or [Path(__file__).resolve().parents[1] / "pytest_mlrepro"]
    for root in roots:
        if not (root / "__init__.py").is_file():
            print(f"check_private_names: {root} is not a package (no __init__.py)")
            return 2
    if fixing:
        for path in fix(roots):
            print(f"removed __all__ from {path}")
    found = check(roots)
    for crossing in found:
        print(crossing)
    if found:
        print(
            f"{len(found)} private names cross a module boundary: give what a sibling uses a "
            "public name, export what another package uses from its __init__, drop __all__ "
            "from private modules (--fix) (scripts/check_private_names.py)"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
