"""diagnosis/ and accuracy/ return facts; report/ words them (issue 46). This scans their string
literals the way scripts/check_private_names.py scans imports, and fails on a user-facing
sentence.

The rule: a string literal (an f-string's literal parts, joined) is a sentence when it holds at
least three words, a word being a whitespace-separated token made of letters once surrounding
punctuation is stripped (placeholders are not words). Not scanned: docstrings and every other
bare string statement (an attribute's docstring); anything inside a ``raise`` (an error's message
is the error's, said where it is raised); the arguments of a logging or ``warnings.warn`` call;
``Literal[...]`` subscripts and the values of module constants named in capitals (names and
categories, not sentences: ``INDEX_MAP = "class index map"``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "pytest_mlrepro"
SCANNED = ("diagnosis", "accuracy")
# Modules still to be switched on (issue 46, item 3), each taken out of here once it passes.
NOT_YET: set[str] = set()
_PUNCTUATION = "()[]{},.:;!?'\"«»“”‘’—–-…"
_LOGGING = {"debug", "info", "warning", "warn", "error", "exception", "critical", "log"}


def _words(text: str) -> int:
    return sum(1 for token in text.split() if token.strip(_PUNCTUATION).isalpha())


def _text(node: ast.JoinedStr) -> str:
    return "".join(
        part.value if isinstance(part, ast.Constant) and isinstance(part.value, str) else " {} "
        for part in node.values
    )


def _constant(node: ast.Assign | ast.AnnAssign) -> bool:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return all(isinstance(t, ast.Name) and t.id.isupper() for t in targets)


def _skipped(tree: ast.Module) -> set[int]:
    """The ids of the nodes whose strings are not scanned (see the module docstring)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skip.add(id(node.value))
        roots: list[ast.AST] = []
        if isinstance(node, ast.Raise) and node.exc is not None:
            roots.append(node.exc)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in _LOGGING:
                roots += [*node.args, *(k.value for k in node.keywords)]
        elif isinstance(node, ast.Subscript) and getattr(node.value, "id", "") == "Literal":
            roots.append(node.slice)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node in tree.body:
            roots += [node.value] if node.value is not None and _constant(node) else []
        skip |= {id(inner) for root in roots for inner in ast.walk(root)}
    return skip


def sentences(path: Path, root: Path = PACKAGE.parent) -> Iterator[str]:
    """``file:line: text`` for each user-facing sentence in one module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _skipped(tree)
    inside_fstrings = {
        id(part)
        for node in ast.walk(tree)
        if isinstance(node, ast.JoinedStr)
        for part in node.values
    }
    for node in ast.walk(tree):
        if id(node) in skip or id(node) in inside_fstrings:
            continue
        if isinstance(node, ast.JoinedStr):
            text = _text(node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if _words(text) >= 3:
            yield f"{path.relative_to(root)}:{node.lineno}: {text[:70]!r}"


def _modules(package: str) -> list[Path]:
    files = sorted((PACKAGE / package).rglob("*.py"))
    return [f for f in files if f.relative_to(PACKAGE).as_posix() not in NOT_YET]


@pytest.mark.parametrize("package", SCANNED)
def test_no_user_facing_sentence_outside_report(package: str) -> None:
    assert [s for f in _modules(package) for s in sentences(f)] == []


@pytest.mark.parametrize("module", sorted(NOT_YET))
def test_a_module_not_yet_scanned_still_has_sentences(module: str) -> None:
    """Each module not yet scanned is listed because it fails the rule: one that passes is
    switched on by taking it out of NOT_YET."""
    files = sorted((PACKAGE / module).rglob("*.py")) if "." not in module else [PACKAGE / module]
    assert any(True for f in files for _ in sentences(f))


def test_the_rule_finds_sentences_and_leaves_errors_alone(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        '"""A docstring of many words."""\n'
        'CATEGORY = "class index map"\n'
        "import logging\n"
        "def f(x):\n"
        '    """Its docstring, words too."""\n'
        "    y = 1\n"
        '    """An attribute docstring of words."""\n'
        '    logging.debug("a debug line of words %s", x)\n'
        '    key = {"dict key": 1, "a sentence here": 2}\n'
        '    if x: raise ValueError(f"the value {x} is not right")\n'
        '    shown = f"{x}: {x} → {x}", f"{x} at {x}"\n'
        '    return f"the {x} step differs", "{:.3g}".format(x), "x/255 − mean"\n',
        encoding="utf-8",
    )
    found = sorted(line.split(": ", 1)[1] for line in sentences(module, tmp_path))
    assert found == ["'a sentence here'", "'the  {}  step differs'"]
