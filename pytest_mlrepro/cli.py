"""``mlrepro``: the command-line front door (no pytest needed).

    mlrepro pitfalls MANIFEST [--limit N] [--device cpu] [--only KEY] [--save]
        the pitfall sensitivity table: accuracy and agreement under each known pitfall
    mlrepro diagnose MANIFEST [--device cpu] [--probes N]
        run the manifest, compare with its golden, and on a drift print its likely cause

Settings come from the project's pytest configuration (``pytest.ini``, ``pyproject.toml``'s
``[tool.pytest.ini_options]``, ``tox.ini``, ``setup.cfg``: the ``mlrepro_*`` keys) and the
``MLREPRO_DATA`` / ``MLREPRO_CACHE`` environment variables, as under pytest. The project root is
the folder of the first of those files above the manifest (``--root`` overrides).

Model and artifact builders are registered by the project's own ``conftest.py`` files: like
pytest, the command imports ``conftest.py`` from the project root and from every folder between it
and the manifest (your code, run as pytest would run it). ``--conftest PATH`` imports other files
instead; ``--no-conftest`` imports none.
"""

from __future__ import annotations

import argparse
import configparser
import importlib.util
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import ManifestError, MlreproError
from .settings import Settings, mirrors_from_env

_INI_FILES = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")


class UsageError(Exception):
    """A command-line mistake: printed, exit status 2."""


# --- the project: root, ini keys, conftest.py -------------------------------------------------


def _ini_section(path: Path) -> dict[str, Any] | None:
    """The pytest section of an ini file, or None when it has none."""
    if path.name == "pyproject.toml":
        try:
            import tomllib  # type: ignore[import-not-found,unused-ignore]
        except ModuleNotFoundError:  # Python 3.10
            try:
                import tomli as tomllib  # type: ignore[import-not-found,no-redef,unused-ignore]
            except ModuleNotFoundError:
                return None
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        section = data.get("tool", {}).get("pytest", {}).get("ini_options")
        return dict(section) if isinstance(section, dict) else None
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (OSError, configparser.Error):
        return None
    name = {"setup.cfg": "tool:pytest"}.get(path.name, "pytest")
    if not parser.has_section(name):
        return {} if path.name in ("pytest.ini", ".pytest.ini") else None
    return dict(parser.items(name))


def find_root(start: Path) -> tuple[Path, dict[str, Any]]:
    """(project root, its pytest ini keys): the first folder above ``start`` with a pytest
    configuration, else the first with a ``pyproject.toml`` or ``setup.py``, else ``start``."""
    start = start.resolve()
    folders = [start, *start.parents]
    for folder in folders:
        for name in _INI_FILES:
            path = folder / name
            if path.is_file():
                section = _ini_section(path)
                if section is not None:
                    return folder, section
    for folder in folders:
        if (folder / "pyproject.toml").is_file() or (folder / "setup.py").is_file():
            return folder, {}
    return start, {}


def _paths(value: Any, base: Path) -> list[Path]:
    items = value if isinstance(value, list) else shlex.split(str(value or ""))
    return [(base / str(item)).resolve() for item in items]


def project_settings(root: Path, ini: dict[str, Any], *, allow_download: bool = True) -> Settings:
    """The same settings the plugin builds from these ini keys and the environment."""
    cache = str(ini.get("mlrepro_cache") or "")
    return Settings.for_project(
        root,
        golden_dir=str(ini.get("mlrepro_golden_dir") or "golden"),
        cache_dir=(root / cache) if cache else None,
        data_mirrors=[*mirrors_from_env(), *_paths(ini.get("mlrepro_data"), root)],
        allowed_roots=_paths(ini.get("mlrepro_allowed_roots"), root),
        allow_download=allow_download,
    )


def conftest_files(root: Path, manifest: Path) -> list[Path]:
    """``conftest.py`` of the root and of every folder down to the manifest's, outermost first."""
    folder = manifest.resolve().parent
    chain = [folder, *folder.parents]
    # A manifest outside the root gets the root's conftest.py only.
    chain = chain[: chain.index(root) + 1] if root in chain else [root]
    return [f / "conftest.py" for f in reversed(chain) if (f / "conftest.py").is_file()]


def load_conftest(path: Path, index: int = 0) -> None:
    """Import a ``conftest.py`` (user code: it registers builders), as pytest would: with its
    folder on ``sys.path``."""
    path = path.resolve()
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = f"_mlrepro_conftest_{index}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


def _prepare(args: argparse.Namespace) -> tuple[Any, Settings, Path]:
    from .spec import load_manifest

    manifest_path = Path(args.manifest)
    if not manifest_path.is_file():
        raise UsageError(f"{manifest_path}: no such manifest")
    if args.root:
        root = Path(args.root).resolve()
        ini = next(
            (
                s
                for n in _INI_FILES
                if (root / n).is_file() and (s := _ini_section(root / n)) is not None
            ),
            {},
        )
    else:
        root, ini = find_root(manifest_path.parent)
    settings = project_settings(root, ini, allow_download=not args.no_download)
    if args.conftest:
        files = [Path(p) for p in args.conftest]
    elif args.no_conftest:
        files = []
    else:
        files = conftest_files(root, manifest_path)
    for index, file in enumerate(files):
        if not file.is_file():
            raise UsageError(f"--conftest {file}: no such file")
        load_conftest(file, index)
    try:
        shown = manifest_path.resolve().relative_to(Path.cwd()).as_posix()
    except ValueError:
        shown = str(manifest_path)
    manifest = load_manifest(manifest_path, display=shown)
    if args.limit is not None:
        if args.limit < 1:
            raise UsageError("--limit must be at least 1")
        import dataclasses

        manifest = dataclasses.replace(
            manifest, dataset=dataclasses.replace(manifest.dataset, limit=args.limit)
        )
    return manifest, settings, root


class _Progress:
    """``  320/1000 samples`` on stderr, at most every few seconds, when it is a terminal."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.last = time.monotonic()
        self.enabled = sys.stderr.isatty()

    def __call__(self, done: int) -> None:
        now = time.monotonic()
        if self.enabled and (now - self.last > 2 or done == self.total):
            self.last = now
            end = "\n" if done == self.total else "\r"
            print(f"  {done}/{self.total} samples", end=end, file=sys.stderr, flush=True)


# --- commands ---------------------------------------------------------------------------------


def _pitfalls(args: argparse.Namespace) -> int:
    from . import golden as golden_store
    from . import sensitivity
    from .data import resolve_dataset
    from .runners import check_framework, load_runner

    manifest, settings, _ = _prepare(args)
    check_framework(manifest)
    dataset = resolve_dataset(manifest, settings)
    runner = load_runner(manifest, args.device, settings)
    table = sensitivity.sensitivity(
        manifest,
        runner,
        dataset.samples,
        device=args.device,
        dataset=manifest.dataset.name,
        limit=manifest.dataset.limit,
        only=args.only or (),
        progress=_Progress(len(dataset.samples)),
    )
    print(table.render())
    if args.save:
        path = sensitivity.table_path(golden_store.golden_path(manifest, settings))
        sensitivity.save(path, table)
        try:
            shown = path.relative_to(Path.cwd())
        except ValueError:
            shown = path
        print(f"\nsaved {shown}")
    return 0


def _diagnose(args: argparse.Namespace) -> int:
    from . import golden as golden_store
    from .diagnose import diagnose
    from .evaluation import evaluate
    from .metrics import compare
    from .report import explain
    from .runners import check_framework

    manifest, settings, _ = _prepare(args)
    check_framework(manifest)
    path = golden_store.golden_path(manifest, settings)
    golden = golden_store.read(path)
    if golden is None:
        raise UsageError(f"no golden at {path}: record one with pytest --mlrepro-update")
    result = evaluate(manifest, args.device, settings)
    comparison = compare(golden.results, result.results, result.scores, manifest.tolerances)
    if comparison.ok:
        print(f"{manifest.name} [{args.device}]: matches its golden ({path})")
        return 0
    print(
        f"{manifest.name} [{args.device}]: "
        + explain(comparison, str(path), None, "pytest --mlrepro-update")
    )
    print()
    print(diagnose(manifest, golden, comparison, result, probes=args.probes).render())
    return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mlrepro",
        description="pytest-mlrepro from the command line: pitfall sensitivity tables and drift "
        "diagnosis for a manifest.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("manifest", metavar="MANIFEST", help="the manifest (YAML)")
        sub.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
        sub.add_argument("--limit", type=int, metavar="N", help="the first N samples only")
        sub.add_argument(
            "--root", metavar="DIR", help="the project root (default: found above the manifest)"
        )
        sub.add_argument(
            "--conftest",
            action="append",
            metavar="PATH",
            help="import this file to register builders (repeatable; default: the project's "
            "conftest.py files)",
        )
        sub.add_argument("--no-conftest", action="store_true", help="import no conftest.py")
        sub.add_argument("--no-download", action="store_true", help="never download data sets")

    pitfalls = commands.add_parser(
        "pitfalls",
        help="accuracy and agreement under each known preprocessing pitfall",
        description="The pitfall sensitivity table (MLModelScope's Table 1 for this model): "
        "each known pitfall flipped on its own, over the data set or its first N samples.",
    )
    common(pitfalls)
    pitfalls.add_argument(
        "--only",
        action="append",
        metavar="KEY",
        help="a variant key (colour:BGR, crop:none, ...) or a category ('colour order'); "
        "repeatable",
    )
    pitfalls.add_argument(
        "--save",
        action="store_true",
        help="store the table with the goldens (golden/pitfalls/<name>.json)",
    )
    diagnose = commands.add_parser(
        "diagnose",
        help="compare with the golden and explain a drift",
        description="Run the manifest, compare it with its golden, and on a drift print the "
        "diagnosis the pytest item would show.",
    )
    common(diagnose)
    diagnose.add_argument(
        "--probes",
        type=int,
        default=64,
        metavar="N",
        help="samples per counterfactual (default 64)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The ``mlrepro`` command; returns the exit status (0 ok, 1 drift or error, 2 usage)."""
    args = _parser().parse_args(argv)
    handler = {"pitfalls": _pitfalls, "diagnose": _diagnose}[args.command]
    try:
        return handler(args)
    except UsageError as exc:
        print(f"mlrepro: {exc}", file=sys.stderr)
        return 2
    except ManifestError as exc:
        print(f"mlrepro: {exc}", file=sys.stderr)
        return 2
    except MlreproError as exc:
        print(f"mlrepro: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # python -m pytest_mlrepro.cli
    raise SystemExit(main())


__all__ = ["conftest_files", "find_root", "load_conftest", "main", "project_settings"]
