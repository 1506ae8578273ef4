"""``mlrepro init MODEL --data DIR (--preset NAME | --discover)``: a complete, commented manifest
and the data's checksum list, ready for ``pytest MANIFEST --mlrepro-update``."""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from .._files import sha256_file
from ..errors import MlreproError
from ..onboarding import PRESETS, ModelInfo, StepText, preset_steps, read_model
from ..pipeline import MAX_IMAGE_PIXELS
from ..settings import resolve_within

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm")
CLASS_NAME_FILES = ("synset.txt", "synsets.txt", "class_names.txt", "classes.txt")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_INT = re.compile(r"[0-9]+")


class InitError(MlreproError):
    """What ``mlrepro init`` cannot do with the files it was given."""


@dataclass
class DataInfo:
    folder: Path
    labels_from: str  # "file" or "folders"
    images: list[str]
    labels: str | None = None
    file_column: str = "file"
    label_column: str = "class_index"
    class_names: str | None = None
    classes: int = 0  # the least number of classes the labels need
    notes: list[str] = field(default_factory=list)

    @property
    def files(self) -> list[str]:
        meta = [f for f in (self.labels, self.class_names) if f is not None]
        return sorted({*meta, *self.images})


def read_data(folder: Path, labels: str | None = None) -> DataInfo:
    """The data folder: a labels CSV (``labels.csv`` or ``labels``) naming each image and its
    class index, or one folder per class (torchvision's ``ImageFolder``)."""
    if not folder.is_dir():
        raise InitError(f"--data {folder}: no such folder")
    names = CLASS_NAME_FILES
    class_names = next((n for n in names if (folder / n).is_file()), None)
    csvs = [labels] if labels else (["labels.csv"] if (folder / "labels.csv").is_file() else [])
    if not csvs:
        csvs = sorted(p.name for p in folder.glob("*.csv"))[:1]
    if csvs:
        return _confined(_read_labels_file(folder, csvs[0], class_names))
    classes = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    images = [
        f"{c}/{p.name}"
        for c in classes
        for p in sorted((folder / c).iterdir())
        if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES
    ]
    if not images:
        raise InitError(
            f"--data {folder}: found neither a labels CSV (file,class_index) nor class folders "
            "with images (one folder per class)"
        )
    return _confined(
        DataInfo(folder, "folders", images, class_names=class_names, classes=len(classes))
    )


def _confined(data: DataInfo) -> DataInfo:
    """``data``, once every file it names resolves (symlinks followed) inside its folder: the
    rule a test run applies (``settings.resolve_within``), applied before anything is hashed."""
    folder = data.folder.resolve()
    for name in data.files:
        if resolve_within(folder, name, [folder]) is None:
            raise InitError(
                f"--data {data.folder}: {name!r} resolves to {(folder / name).resolve()}, outside "
                "the data folder: refusing to read it (a test run refuses it too)"
            )
    return data


def _read_labels_file(folder: Path, name: str, class_names: str | None) -> DataInfo:
    if resolve_within(folder.resolve(), name, [folder.resolve()]) is None:
        raise InitError(f"--labels {name}: not a file inside the data folder {folder}")
    path = folder / name
    with path.open(newline="", encoding="utf-8-sig") as stream:
        rows = list(csv.DictReader(stream))
    columns = list(rows[0]) if rows else []
    if not rows:
        raise InitError(f"{path}: no rows")
    file_column = (
        "file"
        if "file" in columns
        else next((c for c in columns if (folder / str(rows[0][c])).is_file()), None)
    )
    ints = [c for c in columns if all(_INT.fullmatch(str(r[c] or "").strip()) for r in rows)]
    label_column = next((c for c in ("class_index", "label", "class") if c in ints), None)
    label_column = label_column or (ints[0] if ints else None)
    if file_column is None or label_column is None:
        raise InitError(
            f"{path}: cannot tell the image column and the class-index column among "
            f"{columns} (expected e.g. 'file' and 'class_index')"
        )
    images = [str(r[file_column]) for r in rows]
    _confined(DataInfo(folder, "file", images))  # before any image is looked at
    missing = [i for i in images if not (folder / i).is_file()]
    if missing:
        raise InitError(f"{path} names {len(missing)} missing images, e.g. {missing[0]!r}")
    top = max(int(str(r[label_column]).strip()) for r in rows)
    return DataInfo(
        folder, "file", images, name, file_column, label_column, class_names, classes=top + 1
    )


def checksum_line(digest: str, name: str) -> str:
    """One ``sha256sum`` line; a name with a backslash or a line break escaped as sha256sum
    does (other characters, spaces and quotes included, stay as they are)."""
    if any(c in name for c in "\\\n\r"):
        escaped = name.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        return f"\\{digest}  {escaped}\n"
    return f"{digest}  {name}\n"


def write_checksums(data: DataInfo, path: Path) -> int:
    lines = [checksum_line(sha256_file(data.folder / name), name) for name in data.files]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines), encoding="utf-8")
    return len(lines)


# --- the manifest text ----------------------------------------------------------------------


def _scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_scalar(v) for v in value) + "]"
    text = str(value)
    return text if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", text) else json.dumps(text)


def _flow(params: dict[str, object]) -> str:
    return "{" + ", ".join(f"{k}: {_scalar(v)}" for k, v in params.items()) + "}"


def _rel(path: Path, start: Path) -> str:
    return Path(os.path.relpath(path.resolve(), start.resolve())).as_posix()


@dataclass
class Recipe:
    steps: list[StepText]
    origin: list[str]  # comment lines: where the recipe came from


def render_manifest(
    name: str, model: ModelInfo, data: DataInfo, checksums: Path, out: Path,
    recipe: Recipe, height: int, width: int, classes: int,
) -> str:  # fmt: skip
    here = out.parent
    lines = [
        f"# Written by mlrepro init for {model.path.name} on the data set {data.folder.name}.",
        "# Check it, then record the golden:  pytest "
        + _rel(out, Path.cwd())
        + " --mlrepro-update",
        f"name: {name}",
        'version: "1"  # your model\'s version: changing it says the results may change',
        "task: image-classification  # the only task so far",
        "framework:",
        f"  name: {model.framework}",
        "model:",
        f"  format: {model.format}",
    ]
    ref = [f"    path: {_scalar(_rel(model.path, here))}  # relative to this file",
           f"    sha256: {model.sha256}"]  # fmt: skip
    if model.format == "state_dict":
        lines += [f"  builder: {_scalar(model.builder)}  # registered in conftest.py",
                  "  weights:", *ref]  # fmt: skip
    else:
        lines += ["  file:", *ref]
    if model.external_data:
        lines.append("  external_data:  # every external data file, pinned")
        lines += [f"    {_scalar(k)}: {v}" for k, v in sorted(model.external_data.items())]
    lines += [
        "inputs:",
        f"  - name: {_scalar(model.input_name)}",
        f"    dtype: {model.dtype}",
        f"    layout: {model.layout}  # from the model's input shape {_shape(model.shape)}",
        "    preprocess:",
    ]
    lines += [f"      # {line}" for line in recipe.origin]
    lines += [
        f"      - {op}: {_flow(params)}" for step in recipe.steps for op, params in step.items()
    ]
    lines += [
        "postprocess:",
        "  softmax: true  # the model outputs logits (set false if it outputs probabilities)",
        "  top_k: 5",
        "dataset:",
        f"  name: {_scalar(data.folder.name)}  # the folder name under the data mirror "
        "(MLREPRO_DATA / ini mlrepro_data)",
        f"  checksums: {_scalar(_rel(checksums, here))}  # sha256sum list of every file",
    ]
    if data.labels_from == "folders":
        lines.append("  labels_from: folders  # one folder per class, indices in sorted order")
    else:
        lines += [
            f"  labels: {_scalar(data.labels)}",
            f"  file_column: {_scalar(data.file_column)}",
            f"  label_column: {_scalar(data.label_column)}",
        ]
    if data.class_names is not None:
        lines.append(f"  class_names: {_scalar(data.class_names)}")
    lines += [
        f"  classes: {classes}  # the model's outputs",
        "runtime:",
        "  batch_size: 32",
        f"# Input resolution {height}×{width}.",
    ]
    return "\n".join(lines) + "\n"


def _shape(shape: tuple[int | None, ...]) -> str:
    return (
        "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]" if shape else "unknown"
    )


# --- the command ----------------------------------------------------------------------------


def add_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    sub = commands.add_parser(
        "init",
        help="write a manifest and the data's checksum list for a model",
        description="Read MODEL's signature and the data folder; write a complete manifest "
        "(its preprocessing from --preset or --discover) and the data's checksum list.",
    )
    sub.add_argument("model", metavar="MODEL", help="the model file")
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
        "--size", type=int, metavar="S", help="input resolution, if the model does not fix it"
    )
    sub.add_argument("--labels", metavar="FILE", help="the labels CSV inside DIR")
    sub.add_argument("--samples", type=int, default=300, help="discovery subset size (300)")
    sub.add_argument("--force", action="store_true", help="overwrite an existing manifest")
    sub.add_argument("--root", metavar="DIR", help="the project root (pytest's --rootdir)")


MAX_DISCOVERY_BYTES = 2 * 1024**3
"""The most memory discovery's cache of one geometry's resized images may take (--samples × H ×
W × 3 bytes): above it, init asks for fewer samples instead of failing with a MemoryError."""


def _check_resolution(height: int, width: int, args: argparse.Namespace) -> None:
    """Refuse an input resolution that init could not even allocate, before writing anything."""
    if height * width > MAX_IMAGE_PIXELS:
        # The same bound as an image a test run decodes: a larger tensor is no photo.
        raise InitError(
            f"the input resolution {height}×{width} is more than {MAX_IMAGE_PIXELS} pixels (the "
            "most an image may have): give the model's real input size with --size S"
        )
    if args.discover and args.samples * height * width * 3 > MAX_DISCOVERY_BYTES:
        most = max(1, MAX_DISCOVERY_BYTES // (height * width * 3))
        raise InitError(
            f"--discover on {args.samples} images of {height}×{width} would need more than "
            f"{MAX_DISCOVERY_BYTES // 1024**3} GiB of memory: give --samples {most} or fewer"
        )


def _staged(final: Path) -> Path:
    """A temporary name beside ``final`` (same folder: the manifest's relative paths hold, and
    the move into place is atomic), hidden and unique to this process."""
    return final.with_name(f".{final.name}.init-{os.getpid()}.tmp")


def init(args: argparse.Namespace, passed: list[str]) -> int:
    from ..manifest import load_manifest
    from ._main import UsageError

    if (args.preset is None) == (not args.discover):
        raise UsageError(
            "init: give --preset NAME or --discover (the preprocessing is never guessed "
            f"silently); presets: {', '.join(sorted(PRESETS))}"
        )
    model = read_model(Path(args.model), args.model_format, args.builder)
    data = read_data(Path(args.data), args.labels)
    name = args.name or re.sub(r"[^A-Za-z0-9_.-]", "_", Path(args.model).stem).lstrip("._-")
    if not _NAME.fullmatch(name or ""):
        raise UsageError(f"init: {name!r} is no usable manifest name: give --name")
    if not _NAME.fullmatch(data.folder.name):
        raise UsageError(f"init: the data folder's name {data.folder.name!r} is no data set name")
    out = Path(args.output or f"manifests/{name}.yaml")
    if out.exists() and not args.force:
        raise UsageError(f"init: {out} exists (--force overwrites it)")
    checksums = out.parent / "datasets" / f"{data.folder.name}.sha256"
    size = args.size or (model.resolution[0] if model.resolution else None)
    height, width = model.resolution or (size or 224, size or 224)
    if args.size:
        height = width = args.size
    _check_resolution(height, width, args)
    notes: list[str] = []
    if not model.path.resolve().is_relative_to(Path.cwd().resolve()):
        # A test run refuses model files outside the project (allowed roots aside).
        notes.append(
            f"{model.path} is outside this project: copy it in, or build it into the cache "
            "(docs/onboarding.md, 'Exporting a PyTorch model reproducibly')"
        )
    if model.resolution is None:
        notes.append(f"input resolution {height}×{width}: the model does not fix it"
                     + ("" if args.size else " (assumed; --size S sets it)"))  # fmt: skip
    preset = PRESETS[args.preset or "efficientnet-lite"]
    origin = (
        [f"preset {preset.name!r}: {preset.describe()}", f"source: {preset.source}"]
        if args.preset
        else ["provisional: replaced by the discovered recipe"]
    )
    recipe = Recipe(preset_steps(preset, height, width, model.layout, model.dtype), origin)
    classes = model.classes or data.classes
    # Both files are written under temporary names and moved into place only when everything
    # succeeded: a failed init (a refused file, a model that does not run, Ctrl-C) leaves no
    # half-made manifest or checksum list behind, and an existing one as it was.
    staged_checksums, staged_out = _staged(checksums), _staged(out)
    made = [p for p in (checksums.parent, out.parent) if not p.exists()]
    state = _State(
        model, data, staged_checksums, staged_out, out, recipe, height, width, classes, name
    )
    try:
        status = _write_staged(state, args, passed)
        if status != 0:
            return status
        state.checksums = checksums  # the final text names the final checksum list
        state.write()
        load_manifest(staged_out)  # what was written loads: the same checks a test run makes
        os.replace(staged_checksums, checksums)
        os.replace(staged_out, out)
    finally:
        for path in (staged_checksums, staged_out):
            path.unlink(missing_ok=True)
        for folder in made:  # folders init made, left empty by a failure
            if folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
    print(f"wrote {checksums} ({state.count} files: the images and the labels)")
    for note in [*notes, *data.notes, *model.notes]:
        print(f"note: {note}")
    print(f"wrote {out}; next: pytest {out} --mlrepro-update, then commit both files")
    return 0


def _write_staged(state: _State, args: argparse.Namespace, passed: list[str]) -> int:
    """The staged checksum list and manifest, the model probed and the recipe discovered with
    them when needed; the exit status (0: ready to move into place)."""
    from ._main import run

    state.count = write_checksums(state.data, state.checksums)
    state.write()
    if state.model.classes is None or args.discover:
        args.manifest = str(state.out)
        args.no_conftest, args.no_download, args.conftest = False, False, None
        return run(state.probe_and_discover, args, passed)
    return 0


@dataclass
class _State:
    model: ModelInfo
    data: DataInfo
    checksums: Path
    out: Path  # where the manifest is written: a staged name until init succeeds
    final: Path  # where it will be (its first lines name it)
    recipe: Recipe
    height: int
    width: int
    classes: int
    name: str
    count: int = 0  # files in the checksum list

    def write(self) -> None:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(render_manifest(
            self.name, self.model, self.data, self.checksums, self.final, self.recipe,
            self.height, self.width, self.classes,
        ), encoding="utf-8")  # fmt: skip

    def probe_and_discover(self, args: argparse.Namespace, config: pytest.Config) -> int:
        """With pytest's configuration (builders, settings): load the model once, ask it its
        number of classes when its signature does not tell, and discover the recipe."""
        from ..data import resolve_dataset
        from ..manifest import load_manifest
        from ..plugin import settings_key
        from ..runners import load_runner

        settings = config.stash[settings_key]
        # The data folder given on the command line is where its data set is found first.
        settings = dataclasses.replace(
            settings, data_mirrors=(self.data.folder.resolve().parent, *settings.data_mirrors)
        )
        manifest = load_manifest(self.out)
        runner = load_runner(manifest, "cpu", settings)
        if self.model.classes is None:
            shape = (1, 3, self.height, self.width) if self.model.layout == "NCHW" else (
                1, self.height, self.width, 3)  # fmt: skip
            out = np.asarray(runner(np.zeros(shape, np.dtype(self.model.dtype))))
            self.classes = int(out.reshape(out.shape[0], -1).shape[1])
            print(f"the model outputs {self.classes} classes (asked with one blank image)")
            self.write()
            manifest = load_manifest(self.out)
        if not args.discover:
            return 0
        from ..onboarding import discover, spread

        dataset = resolve_dataset(manifest, settings)
        subset = spread(dataset.samples, args.samples)
        print(f"discovering the recipe on {len(subset)} of {len(dataset.samples)} images ...",
              flush=True)  # fmt: skip
        found = discover(
            runner, subset, self.height, self.width, self.model.layout, self.model.dtype
        )
        print(found.render())
        best = found.best
        steps = best.candidate.steps(self.height, self.width, self.model.layout, self.model.dtype)
        origin = [
            f"discovered by mlrepro init --discover: {best.candidate.label}",
            f"top-1 {100 * best.top1:.2f}% on {best.n} images, 95% interval "
            f"[{100 * best.interval[0]:.1f}, {100 * best.interval[1]:.1f}]",
        ]
        if len(found.ranking) > 1:
            second = found.ranking[1]
            origin.append(
                f"runner-up: {second.candidate.label}: {100 * second.top1:.2f}% on {second.n}"
            )
        self.recipe = Recipe(steps, origin)
        self.write()
        return 0


__all__ = ["DataInfo", "InitError", "add_parser", "checksum_line", "init", "read_data"]
