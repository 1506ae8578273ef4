"""``mlrepro``, the command-line front door (docs/cli.md): argument handling only."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .._visible import visible_lines
from ..settings import shown_path
from ._configured import Handler, UsageError, guarded, run
from ._init import add_parser as add_init
from ._init import init
from ._merge import add_parser as add_results_commands
from ._merge import history, merge, schema
from ._track import add_parser as add_track
from ._track import track

if TYPE_CHECKING:
    from ..manifest import Manifest
    from ..settings import Settings


def _prepare(args: argparse.Namespace, config: pytest.Config) -> tuple[Manifest, Settings]:
    """The manifest (``--limit`` applied, its framework checked) and the project's settings."""
    from ..manifest import load_manifest
    from ..plugin import settings_key
    from ..runners import check_framework

    manifest_path = Path(args.manifest)
    manifest = load_manifest(manifest_path, display=shown_path(manifest_path.resolve(), Path.cwd()))
    if args.limit is not None:
        if args.limit < 1:
            raise UsageError("--limit must be at least 1")
        manifest = dataclasses.replace(
            manifest, dataset=dataclasses.replace(manifest.dataset, limit=args.limit)
        )
    check_framework(manifest)
    return manifest, config.stash[settings_key]


# --- commands ---------------------------------------------------------------------------------


def _pitfalls(args: argparse.Namespace, config: pytest.Config) -> int:
    from .. import goldens as golden_store
    from ..data import resolve_dataset
    from ..diagnosis import (
        backends_in_play,
        left_out_backends,
        save_sensitivity,
        sensitivity,
        sensitivity_table_path,
    )
    from ..onboarding import Progress
    from ..report import pitfall_words, sensitivity_text
    from ..runners import load_runner

    manifest, settings = _prepare(args, config)
    dataset = resolve_dataset(manifest, settings)
    runner = load_runner(manifest, args.device, settings)
    backends = backends_in_play(manifest) | set(args.backend or ())
    terminal, total = Progress.to_terminal(), len(dataset.samples)
    table = sensitivity(
        manifest,
        runner,
        dataset.samples,
        device=args.device,
        dataset=manifest.dataset.name,
        limit=manifest.dataset.limit,
        only=args.only or (),
        progress=lambda done: terminal.show(f"  {done}/{total} samples", done == total),
        backends=backends,
        describe=pitfall_words,
    )
    print(visible_lines(sensitivity_text(table)))
    left_out = left_out_backends(backends)
    if left_out:
        # Said, never silent: a flip to a library the model and pipeline do not use would cost
        # its import (TensorFlow: seconds and log noise) in every run of the command.
        print(
            f"\nleft out: flips to {', '.join(left_out.values())} (neither this model nor its "
            "pipeline uses it);\n  include them with "
            + " ".join(f"--backend {key}" for key in left_out)
        )
    if args.save:
        golden = golden_store.golden_path(manifest, settings)
        path = sensitivity_table_path(golden, settings.golden_dir)
        save_sensitivity(path, table, settings.golden_dir)
        print(f"\nsaved {shown_path(path, Path.cwd())}")
    return 0


def _diagnose(args: argparse.Namespace, config: pytest.Config) -> int:
    from .. import goldens as golden_store
    from ..data import resolve_dataset
    from ..diagnosis import diagnose
    from ..evaluation import evaluate
    from ..goldens import compare
    from ..plugin import options
    from ..report import DIAGNOSIS_WORDING, explain, record_command

    manifest, settings = _prepare(args, config)
    path = golden_store.golden_path(manifest, settings)
    golden_shown = shown_path(path.resolve(), settings.root.resolve(), Path.cwd().resolve())
    # The command that records this manifest's golden, and only it (a bare pytest collects
    # the project's testpaths: tests/, not manifests/).
    record = record_command(manifest.source)
    golden = golden_store.read(path)
    if golden is None:
        raise UsageError(f"no golden at {golden_shown}: record one with {record}")
    dataset = resolve_dataset(manifest, settings)
    # Streamed: only the scores at the golden's top-k classes are kept (all the comparison
    # and the diagnosis of a drift need).
    result = evaluate(manifest, args.device, settings, dataset, keep=(golden.results,))
    comparison = compare(golden.results, result.results, result.scores, manifest.tolerances)
    if comparison.ok:
        print(f"{manifest.name} [{args.device}]: matches its golden ({golden_shown})")
        return 0
    print(
        visible_lines(
            f"{manifest.name} [{args.device}]: "
            + explain(comparison, golden_shown, dataset.class_names, record)
        )
    )
    print()
    samples = options(config).counterfactual_samples
    d = diagnose(manifest, golden, comparison, result, wording=DIAGNOSIS_WORDING, probes=samples)
    print(visible_lines(d.render()))
    return 1


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mlrepro",
        description="pytest-mlrepro from the command line: pitfall sensitivity tables and drift "
        "diagnosis for a manifest, manifests for a model, and the matrix of several machines' "
        "results.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("manifest", metavar="MANIFEST", help="the manifest (YAML)")
        sub.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
        sub.add_argument("--limit", type=int, metavar="N", help="the first N samples only")
        sub.add_argument("--root", metavar="DIR", help="the project root (pytest's --rootdir)")
        sub.add_argument(
            "--conftest",
            action="append",
            metavar="PATH",
            help="register builders from this file instead of the conftest.py files "
            "(repeatable; loaded by pytest as a plugin)",
        )
        sub.add_argument("--no-conftest", action="store_true", help="pytest's --noconftest")
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
        "--backend",
        action="append",
        choices=("pil", "opencv", "tf"),
        help="also flip decoders and resizes to this library (repeatable; by default only to "
        "Pillow, OpenCV and the libraries the model and pipeline already use)",
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
        default=None,
        metavar="N",
        help="samples per counterfactual (pytest's --mlrepro-counterfactual-samples; default: "
        "the ini key mlrepro_counterfactual_samples, 64)",
    )
    add_init(commands)
    add_results_commands(commands)
    add_track(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The ``mlrepro`` command; returns the exit status (0 ok, 1 drift or error, 2 usage)."""
    args, passed = parser().parse_known_args(argv)  # the command's own arguments, pytest's
    if args.command == "schema":  # the types' schema: no pytest session
        return schema(args)
    return guarded(lambda: _command(args, passed))


def _command(args: argparse.Namespace, passed: list[str]) -> int:
    if args.command == "init":  # writes the manifest that the other commands start from
        return init(args, passed)
    if args.command in ("merge", "history", "track"):  # results files only: no pytest session
        if passed:
            raise UsageError(f"{args.command}: unknown arguments: {' '.join(passed)}")
        return {"merge": merge, "history": history, "track": track}[args.command](args)
    handler: Handler = {"pitfalls": _pitfalls, "diagnose": _diagnose}[args.command]
    return run(handler, args, passed)
