"""Every module the documentation names exists.

The user documentation (README.md, docs/*.md) and the package's own docstrings and comments name
files (``_explain.py``, ``runners/_artifacts.py``, ``benchmarks/scale.py``) and dotted modules
(``pytest_mlrepro.latency._timing``). When a module moves, a name left behind sends the reader to
nothing. Each name must resolve:

* a bare file name (``_pitfalls.py``) to a file of that name somewhere in the repository;
* a path (``diagnosis/_pitfalls.py``) to a repository file whose path ends with it;
* a dotted name to a module or package of pytest_mlrepro, or to a name defined at the top of one
  (``pytest_mlrepro.errors.ManifestError``: a class of ``errors.py``).

Read from the source text, not imported: naming a module never imports a framework.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

from helpers import REPO

PACKAGE = REPO / "pytest_mlrepro"
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# Where a file the text names may be: the repository, less what no one wrote.
SKIPPED_DIRS = {
    ".git",
    ".venv",
    "venv",
    "node_modules",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
    ".mlrepro_cache",
    "floor-venv",
}
# Files of other projects the text names on purpose (the frameworks' own sources, and the
# reference implementations the onboarding presets follow).
OTHER_PROJECTS = {
    "tensorflow/lite/python/interpreter.py",
    "models/official/efficientnet/preprocessing.py",  # tensorflow/tpu
    "lite/efficientnet_lite_builder.py",  # tensorflow/tpu
    "preprocessing/inception_preprocessing.py",  # TF-slim
    "references/classification/presets.py",  # torchvision
    "timm/data/transforms_factory.py",  # timm
    "python/caffe/classifier.py",  # BVLC/caffe
    "classify.py",  # BVLC/caffe
    "python/caffe/classify.py",  # BVLC/caffe
    "preprocessing.py",  # tensorflow/tpu
    ".../lite/efficientnet_lite_builder.py",  # tensorflow/tpu
    "timm/data/constants.py",  # timm
    "keras/src/applications/imagenet_utils.py",  # Keras
    "keras/src/utils/image_utils.py",  # Keras (the grey-255 preset)
    "torchvision/datasets/mnist.py",  # torchvision (the grey-01 preset)
    "torchvision/datasets/cifar.py",  # torchvision (the cifar10 preset)
    "mnist/main.py",  # pytorch/examples (the mnist preset)
    "main.py",  # kuangliu/pytorch-cifar (the CIFAR-10 std it uses)
    "conf/global_settings.py",  # weiaicunzai/pytorch-cifar100 (the cifar100 preset)
}

FILE_NAME = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[A-Za-z_][\w-]*\.py)\b")
DOTTED = re.compile(r"\bpytest_mlrepro(?:\.[A-Za-z_]\w*)+")


def _texts() -> Iterator[tuple[Path, int, str]]:
    """(file, line number, line) of every docs line, and of every docstring and comment line
    of the package."""
    for page in PAGES:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            yield page, number, line
    for module in sorted(PACKAGE.rglob("*.py")):
        source = module.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc is not None:
                    first = node.body[0].lineno
                    for offset, line in enumerate(doc.splitlines()):
                        yield module, first + offset, line
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                yield module, token.start[0], token.string


def _repository_files() -> list[str]:
    found = []
    for path in REPO.rglob("*.py"):
        relative = path.relative_to(REPO)
        if not SKIPPED_DIRS.intersection(relative.parts):
            found.append(relative.as_posix())
    return found


def _file_exists(name: str, files: list[str]) -> bool:
    return name in OTHER_PROJECTS or any(f == name or f.endswith("/" + name) for f in files)


def _top_level_names(module: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(module.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.If):  # ``if TYPE_CHECKING:`` imports: lazily exported names
            for inner in node.body:
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    names.update((a.asname or a.name).split(".")[0] for a in inner.names)
    return names


def _module_exists(dotted: str) -> bool:
    """``pytest_mlrepro.a.b``: packages down to a module, then at most one name defined in it."""
    parts = dotted.split(".")[1:]
    folder, module = PACKAGE, PACKAGE / "__init__.py"
    for index, part in enumerate(parts):
        if (folder / part).is_dir():
            folder = folder / part
            module = folder / "__init__.py"
            continue
        if (folder / f"{part}.py").is_file():
            folder, module = folder / part, folder / f"{part}.py"
            rest = parts[index + 1 :]
            return not rest or (len(rest) == 1 and rest[0] in _top_level_names(module))
        return (
            index == len(parts) - 1 and module.is_file() and part in _top_level_names(module)
        )
    return True


def _references() -> list[tuple[str, str, bool]]:
    """(where, the name, whether it resolves) for every module name in the texts."""
    files = _repository_files()
    found = []
    for path, number, line in _texts():
        where = f"{path.relative_to(REPO)}:{number}"
        for match in FILE_NAME.finditer(line):
            name = match.group(1)
            found.append((where, name, _file_exists(name, files)))
        for match in DOTTED.finditer(line):
            found.append((where, match.group(0), _module_exists(match.group(0))))
    return found


def test_every_module_the_docs_and_docstrings_name_exists() -> None:
    references = _references()
    # Not vacuous: the texts name files and dotted modules, in the docs and in the package.
    assert len(references) > 100
    assert any(name.startswith("pytest_mlrepro.") for _, name, _ in references)
    assert any(where.startswith("docs/") for where, _, _ in references)
    assert any(where.startswith("pytest_mlrepro/") for where, _, _ in references)
    missing = [f"{where}: {name}" for where, name, exists in references if not exists]
    assert not missing, "names of modules that do not exist:\n" + "\n".join(missing)


def test_a_module_name_that_does_not_exist_is_found() -> None:
    """The resolution is not a pass-through: gone modules, paths and names fail."""
    files = _repository_files()
    assert _file_exists("_pitfalls.py", files)
    assert _file_exists("diagnosis/_pitfalls.py", files)
    assert not _file_exists("probes.py", files)
    assert not _file_exists("runners/_pitfalls.py", files)
    assert _module_exists("pytest_mlrepro.errors.ManifestError")
    assert _module_exists("pytest_mlrepro.diagnosis._pitfalls")
    assert not _module_exists("pytest_mlrepro.diagnose")
    assert not _module_exists("pytest_mlrepro.errors.NoSuchError")
    assert not _module_exists("pytest_mlrepro.errors.ManifestError.format.extra")
