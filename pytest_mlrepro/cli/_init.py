"""``mlrepro init``: the command line as an ``InitRequest`` (the logic is ``onboarding``'s)."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .._names import record_command
from .._visible import visible_lines
from ..onboarding import EXPORTS, PRESETS, InitPlan, InitRequest, plan_init
from ._configured import UsageError, run

if TYPE_CHECKING:
    from ..settings import Settings

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def add_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    sub = commands.add_parser(
        "init",
        help="write a manifest and the data's checksum list for a model",
        description="Read MODEL's signature and the data folder; write a complete manifest "
        "(its preprocessing from --preset or --discover) and the data's checksum list.",
    )
    sub.add_argument(
        "model",
        metavar="MODEL",
        help="the model file, or package:NAME/PATH for a file inside an installed package "
        "(with --builder: the weights)",
    )
    sub.add_argument("--data", required=True, metavar="DIR", help="the labelled data folder")
    sub.add_argument("--preset", choices=sorted(PRESETS), help="the preprocessing convention")
    sub.add_argument(
        "--discover", action="store_true", help="find the preprocessing on a labelled subset"
    )
    sub.add_argument("-o", "--output", metavar="MANIFEST", help="default manifests/NAME.yaml")
    sub.add_argument("--name", help="the manifest's name (default: the model file's stem)")
    sub.add_argument(
        "--format", dest="model_format", help="the model format, if the name does not tell"
    )
    sub.add_argument("--builder", help="the registered model builder (state_dict)")
    sub.add_argument(
        "--export",
        choices=EXPORTS,
        help="export the builder's module (its weights: MODEL) and write a manifest for the "
        "exported file",
    )
    sub.add_argument(
        "--artifact",
        metavar="NAME",
        help="with --export: the registered artifact builder that makes the exported file "
        "in the cache (the manifest then pins {cache, build, sha256}); without it the file is "
        "written into the project (--export-to)",
    )
    sub.add_argument(
        "--export-to", metavar="PATH", help="with --export: the file (default models/NAME.onnx)"
    )
    sub.add_argument(
        "--size",
        type=int,
        metavar="S",
        help="input size, when neither the model's signature nor its builder tells it",
    )
    sub.add_argument("--labels", metavar="FILE", help="the labels CSV inside DIR")
    sub.add_argument("--samples", type=int, default=300, help="discovery subset size (300)")
    sub.add_argument("--force", action="store_true", help="overwrite an existing manifest")
    sub.add_argument("--root", metavar="DIR", help="the project root (pytest's --rootdir)")


def request_from(args: argparse.Namespace) -> InitRequest:
    """The request the arguments make; a usage error for arguments that cannot go together."""
    if (args.preset is None) == (not args.discover):
        raise UsageError(
            "init: give --preset NAME or --discover (the preprocessing is never guessed "
            f"silently); presets: {', '.join(sorted(PRESETS))}"
        )
    if (args.artifact or args.export_to) and not args.export:
        raise UsageError("init: --artifact and --export-to go with --export")
    if args.size is not None and args.size < 1:
        raise UsageError(f"init: --size {args.size}: a size is positive")
    stem = Path(args.model.removeprefix("package:")).stem
    name = args.name or re.sub(r"[^A-Za-z0-9_.-]", "_", stem).lstrip("._-")
    if not _NAME.fullmatch(name or ""):
        raise UsageError(f"init: {name!r} is no usable manifest name: give --name")
    if not _NAME.fullmatch(Path(args.data).resolve().name):
        raise UsageError(
            f"init: the data folder's name {Path(args.data).name!r} is no data set name"
        )
    out = Path(args.output or f"manifests/{name}.yaml")
    if out.exists() and not args.force:
        raise UsageError(f"init: {out} exists (--force overwrites it)")
    # Every field of the request is the argument of its name, but for these four.
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(InitRequest)}
    given.update(data=Path(args.data), output=out, name=name)
    given["export_to"] = Path(args.export_to) if args.export_to else None
    return InitRequest(**given)


def init(args: argparse.Namespace, passed: list[str]) -> int:
    plan = plan_init(request_from(args))
    if not plan.needs_project:
        return _complete(plan, None)
    from ..plugin import settings_key

    # pytest is started on the folder the manifest goes to (or the nearest one that exists,
    # nothing is made for it): from it, pytest finds the project's root, ini file and conftests.
    output = plan.request.output.resolve()
    anchor = next(p for p in (output.parent, *output.parents) if p.is_dir())
    args.manifest = str(anchor)
    args.no_conftest, args.no_download, args.conftest = False, False, None

    def handler(args: argparse.Namespace, config: pytest.Config) -> int:
        return _complete(plan, config.stash[settings_key])

    return run(handler, args, passed)


def _complete(plan: InitPlan, settings: Settings | None) -> int:
    written = plan.complete(settings)
    print(f"wrote {written.checksums} ({written.count} files: the images and the labels)")
    if written.model_file is not None:
        print(f"wrote {written.model_file}")
    for note in written.notes:
        print(f"note: {visible_lines(note)}")  # notes name files and classes from the data
    model = written.model_file
    commit = f" and {model}" if model and model.resolve().is_relative_to(Path.cwd()) else ""
    print(
        f"wrote {written.manifest}; next: {record_command(str(written.manifest))}, then "
        f"commit it, the checksum list{commit} and the golden"
    )
    return 0
