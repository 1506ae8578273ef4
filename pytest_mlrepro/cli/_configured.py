"""A command run inside pytest's own configuration (``pytest.main`` on a manifest), so that it sees
what ``pytest MANIFEST`` sees (ini files, ``-o``, conftests); unknown options go to pytest."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from .._visible import visible_lines
from ..errors import ManifestError, MlreproError

USAGE_ERROR = 2


class UsageError(Exception):
    """A command-line mistake: printed, exit status 2."""


Handler = Callable[[argparse.Namespace, pytest.Config], int]


@dataclass(eq=False)  # hashed by identity, as pluggy keeps its plugins
class _Command:
    """A pytest plugin that runs one command in place of the test session."""

    handler: Handler
    args: argparse.Namespace

    @pytest.hookimpl(tryfirst=True)
    def pytest_cmdline_main(self, config: pytest.Config) -> int:
        try:
            return guarded(lambda: self._run(config))
        finally:
            config._ensure_unconfigure()

    def _run(self, config: pytest.Config) -> int:
        # Configured as a run would be (every plugin's pytest_configure: our settings, the
        # conftests' registrations; a bad ini value refused), but no session: nothing is
        # collected or run.
        config._do_configure()
        return self.handler(self.args, config)


def guarded(command: Callable[[], int]) -> int:
    """The command's exit status; its errors printed as one line."""
    try:
        return command()
    except (UsageError, pytest.UsageError, MlreproError) as exc:
        print(f"mlrepro: {visible_lines(str(exc))}", file=sys.stderr)
        usage = isinstance(exc, (UsageError, pytest.UsageError, ManifestError))
        return USAGE_ERROR if usage else 1
    except KeyboardInterrupt:
        return 130


def pytest_args(args: argparse.Namespace, passed: Sequence[str]) -> list[str]:
    """The command's options as their pytest twins, then the unknown ones, then the manifest."""
    out = ["-p", "no:cacheprovider"]  # no .pytest_cache for a command that runs no tests
    # The plugin's engine, which a test run loads only once it collects a manifest: a command
    # collects nothing, and reads its settings from the engine's configuration.
    out += ["-p", "pytest_mlrepro.plugin._session"]
    if args.root:
        out += ["--rootdir", args.root]
    if args.no_conftest:
        out.append("--noconftest")
    if args.no_download:
        out.append("--mlrepro-no-download")
    for file in args.conftest or []:
        # Another file registers the builders: loaded as a plugin module (``-p``), by pytest.
        path = Path(file).resolve()
        if not path.is_file():
            raise UsageError(f"--conftest {file}: no such file")
        sys.path.insert(0, str(path.parent))
        out += ["--noconftest", "-p", path.stem]
    if getattr(args, "probes", None) is not None:
        out += ["--mlrepro-counterfactual-samples", str(args.probes)]
    return [*out, *passed, args.manifest]


def run(handler: Handler, args: argparse.Namespace, passed: Sequence[str]) -> int:
    """Run the command in place of pytest's session, on ``args.manifest`` (init: its folder)."""
    target = Path(args.manifest)
    if not (target.is_file() or target.is_dir()):
        raise UsageError(f"{args.manifest}: no such manifest")
    status = pytest.main(pytest_args(args, passed), plugins=[_Command(handler, args)])
    # pytest's own usage errors (a bad -o, an unknown option) are this command's usage errors.
    return USAGE_ERROR if status == pytest.ExitCode.USAGE_ERROR else int(status)
