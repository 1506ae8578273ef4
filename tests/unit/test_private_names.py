"""scripts/check_private_names.py: no underscore name crosses a module boundary of the package,
no private module is imported from outside the package that holds it, and no private module
keeps an ``__all__``.

Each test writes a small package and runs the check as CI does (the script, in a child process):
it must name the file, the line and the name of each crossing, exit 1, and let a package's own
private modules, the top-level ones, dunders, local uses and other distributions' names pass.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from helpers import REPO

SCRIPT = REPO / "scripts" / "check_private_names.py"


def write(root: Path, files: dict[str, str]) -> Path:
    package = root / "pkg"
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    for folder in [package, *[p for p in package.rglob("*") if p.is_dir()]]:
        (folder / "__init__.py").touch()
    return package


def run_check(cwd: Path, *packages: Path | str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, packages)],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def test_each_kind_of_crossing_is_named_with_file_line_and_name(tmp_path: Path) -> None:
    package = write(
        tmp_path,
        {
            "_words.py": "def _show(v): return str(v)\ndef show(v): return _show(v)\n",
            "sub/_deep.py": "_LIMIT = 3\n",
            "user.py": """\
                from ._words import show, _show
                from pkg.sub._deep import _LIMIT
                from . import _words as words

                def f(v):
                    return words._show(v) + show(v)
                """,
            "sub/other.py": "from .. import _words\nx = _words._show(1)\n",
            "api.py": '__all__ = ["show", "_hidden"]\n',
        },
    )
    result = run_check(tmp_path, package)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert lines[:-1] == [
        "pkg/api.py:1: _hidden (in __all__)",
        "pkg/sub/other.py:2: _show (attribute of pkg._words)",
        "pkg/user.py:1: _show (imported from pkg._words)",
        "pkg/user.py:2: _LIMIT (imported from pkg.sub._deep)",
        "pkg/user.py:2: pkg.sub._deep (a private module of pkg.sub)",
        "pkg/user.py:6: _show (attribute of pkg._words)",
    ]
    assert lines[-1].startswith("6 private names cross a module boundary")


def test_private_modules_dunders_local_names_and_other_packages_pass(tmp_path: Path) -> None:
    package = write(
        tmp_path,
        {
            "_words.py": "def _show(v): return str(v)\ndef show(v): return _show(v)\n",
            "sub/_deep.py": "LIMIT = 3\n",
            "sub/deeper/user.py": """\
                import os
                from collections import _tuplegetter
                from ... import _words
                from .. import _deep
                from pkg.sub import _deep as deep
                import pkg.sub._deep
                from ..._words import __doc__, show

                class Thing:
                    def _own(self):
                        return self._own, os._exit, _words.show, _deep.LIMIT, deep.LIMIT

                __all__ = ["Thing", "__doc__"]
                """,
        },
    )
    result = run_check(tmp_path, package)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


def test_another_packages_private_module_is_refused_however_it_is_imported(
    tmp_path: Path,
) -> None:
    package = write(
        tmp_path,
        {
            "plugin/_base.py": "KEY = 1\n",
            "plugin/__init__.py": "from ._base import KEY\n",
            "cli/main.py": """\
                from ..plugin._base import KEY
                from ..plugin import _base
                import pkg.plugin._base

                def lazy():
                    from pkg.plugin import _base as base
                    return base.KEY

                from ..plugin import KEY as PUBLIC
                """,
        },
    )
    result = run_check(tmp_path, package)
    assert result.returncode == 1
    assert result.stdout.splitlines()[:-1] == [
        f"pkg/cli/main.py:{line}: pkg.plugin._base (a private module of pkg.plugin)"
        for line in (1, 2, 3, 6)
    ]


def test_a_private_module_keeps_no_all_and_fix_removes_it(tmp_path: Path) -> None:
    package = write(
        tmp_path,
        {
            "_shared.py": 'X = 1\n\n__all__ = ["X"]\n',
            "sub/_own.py": 'Y = 2\n__all__ = [\n    "Y",\n]\n__all__ += ["Z"]\nZ = 3\n',
            "sub/__init__.py": 'from ._own import Y\n\n__all__ = ["Y"]\n',
            "public.py": 'X = 1\n__all__ = ["X"]\n',
        },
    )
    result = run_check(tmp_path, package)
    assert result.returncode == 1
    assert result.stdout.splitlines()[:-1] == [
        "pkg/_shared.py:3: __all__ (in a private module)",
        "pkg/sub/_own.py:2: __all__ (in a private module)",
        "pkg/sub/_own.py:5: __all__ (in a private module)",
    ]
    fixed = run_check(tmp_path, "--fix", package)
    assert fixed.returncode == 0, fixed.stdout
    assert (package / "_shared.py").read_text() == "X = 1\n"
    assert (package / "sub" / "_own.py").read_text() == "Y = 2\nZ = 3\n"
    assert (package / "sub" / "__init__.py").read_text().endswith('__all__ = ["Y"]\n')
    assert (package / "public.py").read_text() == 'X = 1\n__all__ = ["X"]\n'


def test_a_relative_import_beyond_a_package_resolves_from_its_level(tmp_path: Path) -> None:
    # ``from ..a._m import _x`` in pkg/b/c.py is pkg.a._m: crossing even two folders away.
    package = write(
        tmp_path,
        {"a/_m.py": "_x = 1\n", "b/c.py": "from ..a._m import _x\n"},
    )
    result = run_check(tmp_path, package)
    assert result.stdout.splitlines()[:2] == [
        "pkg/b/c.py:1: _x (imported from pkg.a._m)",
        "pkg/b/c.py:1: pkg.a._m (a private module of pkg.a)",
    ]


def test_a_folder_that_is_no_package_is_refused(tmp_path: Path) -> None:
    result = run_check(tmp_path, tmp_path)
    assert result.returncode == 2
    assert "is not a package (no __init__.py)" in result.stdout


def test_the_project_itself_has_no_crossing() -> None:
    result = run_check(REPO, REPO / "pytest_mlrepro")
    assert result.returncode == 0, result.stdout
