"""``mlrepro init``: a model and a labelled data folder to a manifest and a checksum list, refused
before writing, or written under temporary names moved into place once the manifest loads."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import registry
from .._files import (
    Unconfined,
    confine,
    default_file_mode,
    make_confined_folder,
    open_regular,
)
from .._visible import visible
from ..errors import BuildError, MlreproError, Unavailable
from ..manifest import load_manifest
from ..pipeline import MAX_IMAGE_PIXELS
from ..runners import cache_path, fixed_size, load_runner, model_channels, model_layout, shape_text
from ..settings import Settings
from ._data_folder import DataInfo, InitError, read_data, write_checksums
from ._data_probe import DataFacts, family_refusal, layout_from_bands, read_facts, spread
from ._manifest_text import Recipe, render_manifest
from ._model_info import (
    ModelInfo,
    PackageFile,
    locate_package_file,
    package_file,
    read_model,
)
from ._presets import PRESETS, ZERO_ONE, Candidate, Geometry, Preset, StepText, preset_steps

if TYPE_CHECKING:
    from ._discovery import Discovery

MAX_DISCOVERY_BYTES = 2 * 1024**3
"""Discovery's cache of one geometry's images: above it, init asks for fewer samples."""

EXPORTS = ("onnx", "tflite")
Say = Callable[[str], None]


@dataclass(frozen=True)
class InitRequest:
    model: str  # a path, or package:NAME/PATH
    data: Path
    output: Path
    name: str
    preset: str | None = None
    discover: bool = False
    model_format: str | None = None
    builder: str | None = None
    size: int | None = None
    labels: str | None = None
    samples: int = 300
    force: bool = False
    export: str | None = None  # "onnx": the builder's module exported, the manifest runs that
    artifact: str | None = None  # the registered artifact builder that makes the export
    export_to: Path | None = None  # where the exported file goes (default models/NAME.onnx)


@dataclass
class Written:
    manifest: Path
    checksums: Path
    count: int  # files in the checksum list
    model_file: Path | None = None  # the model file init made (an export), if any
    notes: list[str] = field(default_factory=list)


def module_input_size(module: object) -> tuple[tuple[int, int], str] | None:
    """The input size a loaded module records (timm's config, a size attribute, a ViT's
    ``patch_embed``), and where it was found; None when it does not say."""
    for attr in ("pretrained_cfg", "default_cfg"):
        config = getattr(module, attr, None)
        if isinstance(config, dict):
            size = _pair(config.get("input_size"), last_two=True)
            if size is not None:
                return size, f"the module's {attr}['input_size']"
    for attr in ("input_image_size", "image_size", "input_size", "img_size"):
        size = _pair(getattr(module, attr, None))
        if size is not None:
            return size, f"the module's {attr} attribute"
    size = _pair(getattr(getattr(module, "patch_embed", None), "img_size", None))
    if size is not None:
        return size, "the module's patch_embed.img_size"
    return None


def _pair(value: object, last_two: bool = False) -> tuple[int, int] | None:
    items = list(value) if isinstance(value, (tuple, list)) else [value, value]
    if last_two and len(items) == 3:
        items = items[1:]  # (C, H, W)
    if len(items) != 2:
        return None
    height, width = (fixed_size(v) for v in items)
    return (height, width) if height and width else None


def _staged(final: Path) -> Path:
    """A hidden name beside ``final``: the manifest's relative paths hold, the move is atomic."""
    return final.with_name(f".{final.name}.init-{os.getpid()}.tmp")


def _channel_refusal(model: ModelInfo, channels: int, preset: Preset | None = None) -> str:
    """Why ``preset`` (or any) cannot serve a model of ``channels`` channels, with the fix."""
    side = model.channels_source
    if model.shape:
        side = (
            f"the model's input {model.input_name!r} is {shape_text(model.shape)} ({model.layout})"
        )
    fitting = [n for n, p in PRESETS.items() if p.channels == channels]
    fitting = sorted(fitting) if channels == 3 else fitting  # the grey ones: plainest first
    if fitting:
        listed = ", ".join(fitting[:4]) + (", …" if len(fitting) > 4 else "")
        fix = f"a {'grey' if channels == 1 else 'colour'} preset (--preset {listed}) or --discover"
    elif channels == 4:
        fix = (
            "--discover (it searches colour-and-alpha conventions: decode mode RGBA), or "
            "write the decode step 'mode: RGBA' by hand"
        )
    else:
        fix = (
            f"--discover on data of {channels} bands (multi-page TIFFs or .npy arrays: it reads "
            "them and searches band-wise conventions), or write the decode "
            f"'mode: bands, channels: {channels}' by hand: presets cover image files of 1 or 3 "
            "channels"
        )
    made = ""
    if preset is not None:
        what = "grey (L)" if preset.order == "L" else f"colour ({preset.order})"
        made = f"--preset {preset.name} makes {preset.channels}-channel {what} images, and "
    return f"{made}{side}: it takes {channels} channel{'s' * (channels != 1)}; use {fix}"


def plan_init(request: InitRequest, project: Path | None = None) -> InitPlan:
    """Read the model and the data the request names; refuse what cannot work, writing nothing."""
    project = project or Path.cwd()
    if request.export is not None and request.builder is None:
        raise InitError(
            f"--export {request.export}: name the registered PyTorch model builder whose "
            "module is exported (--builder NAME), MODEL being its weights"
        )
    if request.export not in (None, *EXPORTS):
        raise InitError(f"--export {request.export}: one of {', '.join(EXPORTS)}")
    if request.export == "tflite" and request.artifact is None:
        # TensorFlow alone cannot read a PyTorch module: the conversion is the project's (a
        # registered artifact builder, as the example's port through Keras), or a separate
        # converter package's.
        raise Unavailable(
            "--export tflite: a PyTorch module becomes TFLite through a conversion that the "
            "project registers (--artifact NAME: an artifact builder that writes the .tflite "
            "file, as the example's efficientnet_lite0_tflite does); or export to ONNX "
            "(--export onnx), or convert the model yourself and run mlrepro init on the .tflite",
            how="mlrepro init WEIGHTS --builder NAME --export tflite --artifact BUILDER",
        )
    package: PackageFile | None
    if request.model.startswith("package:"):
        path, package = locate_package_file(request.model)
    else:
        path = Path(request.model)
        package = package_file(path, project) if path.exists() else None
    # Weights for a builder are a state_dict, whatever their file name.
    fmt = request.model_format or ("state_dict" if request.builder is not None else None)
    if request.export is not None and fmt != "state_dict":
        raise InitError(f"--export: MODEL must be the builder's weights, not a {fmt!r} file")
    source = read_model(path, fmt, request.builder)
    source.package = package
    data = read_data(request.data, request.labels)
    # The files first: what they are decides the layout a signature leaves open, the decode
    # and the candidates (16-bit, alpha, bands).
    told = source.channels if model_layout(source.shape) is not None else None
    facts = read_facts(data, told)
    if facts is not None and model_layout(source.shape) is None:
        source.layout_from_data = layout_from_bands(source.shape, facts.bands)
    plan = InitPlan(request, project, source, data)
    plan.facts = facts
    size = plan.size if request.export is None else None
    channels = source.channels
    preset = PRESETS[request.preset] if request.preset is not None else None
    # Before anything is hashed or written; a torch module's count is checked when built. The
    # files first: a preset that cannot read them is refused for that, whatever the model.
    refused = family_refusal(facts, f"--preset {preset.name}") if facts and preset else None
    if refused is not None:
        raise InitError(refused)
    if preset is not None and channels is not None and preset.channels != channels:
        raise InitError(_channel_refusal(source, channels, preset))
    if facts is not None and facts.without_alpha and channels == 4:
        # A decode of mode RGBA would give these an opaque alpha that the files do not have:
        # the golden would record it as if it were data.
        listed = ", ".join(repr(n) for n in facts.without_alpha[:5])
        more = len(facts.without_alpha) - 5
        raise InitError(
            f"the data set is colour with alpha, and {len(facts.without_alpha)} of the "
            f"{facts.files} files read have no alpha channel ({listed}"
            f"{f', and {more} more' if more > 0 else ''}): decode mode RGBA would give them an "
            "opaque alpha the files do not hold; save them with their alpha, or take them out "
            "of the data set"
        )
    bands = facts.bands if facts is not None and facts.family == "bands" else None
    if bands is not None and channels is not None and channels != bands:
        raise InitError(
            f"the data's files are {facts.described if facts else ''}; "
            f"{_channel_refusal(source, channels).split(';')[0]}: a model of another band count"
        )
    if request.discover and channels is not None and channels not in (1, 3, 4, bands):
        raise InitError(_channel_refusal(source, channels))
    if size is not None:
        _check_resolution(*size, request, facts)  # before anything is hashed or written
    elif source.format not in ("state_dict", "torchscript"):
        # Only a PyTorch module can be asked: any other file that leaves it free needs --size.
        raise InitError(
            f"{source.path}: its signature {list(source.shape)} leaves the input size free, and "
            "a wrong size is a silently wrong recipe: give --size S"
        )
    return plan


class InitPlan:
    """One init, its inputs read; :meth:`complete` rewrites the staged manifest as what it says
    becomes known (size, classes, recipe)."""

    def __init__(
        self, request: InitRequest, project: Path, source: ModelInfo, data: DataInfo
    ) -> None:
        self.request, self.project, self.data = request, project, data
        self.source = source  # the model file given (for --export: the builder's weights)
        self.model = source  # the model the manifest runs (for --export: the exported file)
        self.settings: Settings | None = None
        self.say: Say = print
        # The manifest's final path; its staged one and the checksum list it names: complete()'s.
        self.final = self.out = self.checksums = request.output
        self.classes = source.classes or data.classes
        fixed = source.resolution if request.export is None else None
        if fixed is not None and request.size is not None and fixed != (request.size,) * 2:
            raise InitError(
                f"{source.path}: the model's input is {fixed[0]}×{fixed[1]} (its "
                f"signature {list(source.shape)}); --size {request.size} contradicts it"
            )
        self.size: tuple[int, int] | None = fixed
        if fixed is None and request.size is not None:
            self.size = (request.size, request.size)
            source.size_source = "--size"
        self.channels: int | None = source.channels
        self.facts: DataFacts | None = None  # what the data's files are (plan_init read them)
        self.recipe = Recipe([], [])
        self._notes: list[str] = []
        # What complete() made, all undone by a failure: files made at their final place, other
        # staged files and their final place, folders made.
        self.created: list[Path] = []
        self.moves: list[tuple[Path, Path]] = []
        self.made: list[Path] = []

    @property
    def needs_project(self) -> bool:
        """Whether completing needs the project's configuration (builder, module, model run)."""
        source = self.source
        asks = source.builder is not None or source.classes is None or source.resolution is None
        return self.request.discover or asks

    def complete(self, settings: Settings | None, say: Say = print) -> Written:
        """Write the manifest and the checksum list (and an export); nothing on failure."""
        out = self.request.output
        checksums = out.parent / "datasets" / f"{self.data.folder.name}.sha256"
        staged_checksums, staged_out = _staged(checksums), _staged(out)
        self.settings, self.say = settings, say
        self.out, self.checksums = staged_out, staged_checksums
        self.made += [p for p in (checksums.parent, out.parent) if not p.exists()]
        done = False
        try:
            count = write_checksums(self.data, staged_checksums)
            written = self.run()
            # The final text names the final checksum list and model file.
            self.checksums = checksums
            self.model.path = dict(self.moves).get(self.model.path, self.model.path)
            self.write()
            load_manifest(staged_out)  # what was written loads: the same checks a test run makes
            for staged, final in [*self.moves, (staged_checksums, checksums), (staged_out, out)]:
                os.replace(staged, final)
            done = True
        finally:
            for path in (staged_checksums, staged_out, *(staged for staged, _ in self.moves)):
                path.unlink(missing_ok=True)
            if not done:
                for path in self.created:
                    path.unlink(missing_ok=True)
            for folder in self.made:  # folders init made, left empty by a failure
                if folder.is_dir() and not any(folder.iterdir()):
                    folder.rmdir()
        return Written(out, checksums, count, written, [*self._notes, *self.model.notes])

    # --- the manifest text ----------------------------------------------------------------

    def write(self) -> None:
        assert self.size is not None
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(render_manifest(
            self.request.name, self.model, self.data, self.checksums, self.final, self.recipe,
            self.size[0], self.size[1], self.classes,
        ), encoding="utf-8")  # fmt: skip

    def _provisional_steps(self, height: int, width: int) -> list[StepText]:
        """A recipe of the model's channel count, to load or ask it (never the final one)."""
        facts = self.facts
        bands = facts.decode if facts is not None else None
        channels = self.channels or (bands.channels if bands else 3)
        order = {1: "L", 3: "RGB", 4: "RGBA"}.get(channels)
        if bands is not None and bands.channels == channels:
            order = "bands"
        elif facts is not None and facts.family == "grey16" and channels == 1:
            order = "L16"
        if order is None:
            raise InitError(_channel_refusal(self.model, channels))
        opaque = facts is None or facts.family != "rgba"  # files without alpha: declared
        candidate = Candidate(order, Geometry("resize"), ZERO_ONE, bands=bands, opaque=opaque)
        return candidate.steps(height, width, self.model.layout, self.model.dtype)

    def _preset_recipe(self) -> Recipe:
        assert self.size is not None
        height, width = self.size
        if self.request.preset is None:
            # Replaced by the discovered one before the manifest is moved into place.
            steps = self._provisional_steps(height, width)
            return Recipe(steps, ["provisional: replaced by the discovered recipe"])
        preset = PRESETS[self.request.preset]
        if self.channels is not None and preset.channels != self.channels:
            raise InitError(_channel_refusal(self.model, self.channels, preset))
        steps = preset_steps(preset, height, width, self.model.layout, self.model.dtype)
        geometry = preset.geometry(height, width).label
        origin = [f"preset {preset.name!r}: {preset.order}, {geometry}, {preset.values.label}"]
        # Comment lines of at most 92 characters, a long word (a path) never broken.
        origin += textwrap.wrap(
            f"source: {preset.source}", 92, break_long_words=False, break_on_hyphens=False
        )
        return Recipe(steps, origin)

    # --- the steps ----------------------------------------------------------------------

    def run(self) -> Path | None:
        """Size, export, classes and recipe, each settled; the model file made, if any."""
        request = self.request
        made_file = None
        if self.facts is not None:  # what init read of the files, said before anything else
            self.say(f"the data's files: {self.facts.described}")
            if self.facts.family == "grey16" and self.channels == 3:
                self.say(
                    "  the model takes colour: the 16-bit grey files are decoded as RGB, by their "
                    "high byte (Pillow reads 16-bit images as 8 bits in colour modes)"
                )
        if self.channels is None and self.model.builder is not None:
            self.channels = self._builder_channels()
        if self.size is None or request.export is not None:
            # The module itself is needed: its declared or recorded size, or to export it.
            module = self._load_module()
            self._settle_size(module)
            if request.export is not None:
                made_file = self._export(module)
        assert self.size is not None  # _settle_size refused otherwise
        _check_resolution(*self.size, request, self.facts)
        self.recipe = self._preset_recipe()
        self.write()
        if self.model.classes is None:
            self._ask_classes()
        if request.discover:
            self._discover()
        if not self.model.path.resolve().is_relative_to(self.project.resolve()) and (
            self.model.package is None and self.model.artifact is None
        ):
            # A test run refuses model files outside the project (allowed roots aside).
            self._notes.append(
                f"{self.model.path} is outside this project: copy it in, or build it into the "
                "cache (docs/onboarding.md, 'From a PyTorch builder to ONNX')"
            )
        return made_file

    def _builder_channels(self) -> int | None:
        """The builder's module's input channels, from its first convolution before its weights
        load, so that the provisional recipe and a preset are of that count; None if unknown."""
        build = registry.get_model_builder(self.model.builder or "")
        if build is None:
            return None
        try:
            from ..runners.torch import input_shape

            found = input_shape(build(), self.model.layout)
        except Exception:  # the runner builds it again and reports a failure as init's
            return None
        if found is None:
            return None
        channels = model_channels(found[0], self.model.layout)
        if channels is not None:
            self.model.channels_source = found[1] or "the module"
        return channels

    def _settings(self) -> Settings:
        """The project's settings, the data folder given searched first."""
        assert self.settings is not None, "a model is run only with the project's settings"
        folder = self.data.folder.resolve().parent
        return dataclasses.replace(
            self.settings, data_mirrors=(folder, *self.settings.data_mirrors)
        )

    def _runner(self) -> Any:
        try:
            return load_runner(load_manifest(self.out), "cpu", self._settings())
        except Unavailable:
            raise
        except MlreproError as exc:
            # Said of the manifest being written, not of its staged temporary name.
            text = str(exc).replace(str(self.out), str(self.final))
            raise InitError(text.replace(self.out.name, self.final.name)) from None

    def _load_module(self) -> Any:
        """The PyTorch module, loaded by the test run's runner from a provisional manifest."""
        known = self.size
        # Only to load the module: the size of this text's steps plays no part in loading.
        self.size = known or (1, 1)
        self.recipe = Recipe(self._provisional_steps(*self.size), ["provisional"])
        self.write()
        try:
            runner = self._runner()
        except BuildError as exc:  # the builder failed, or returned no module: said as init's
            raise InitError(str(exc)) from None
        self.size = known
        return getattr(runner, "module", None)

    def _settle_size(self, module: object) -> None:
        declared = registry.model_input_size(self.model.builder) if self.model.builder else None
        found = (declared, f"declared by model builder {self.model.builder!r}") if declared else (
            module_input_size(module))  # fmt: skip
        if self.size is not None:  # --size
            if found is not None and found[0] != self.size:
                self._notes.append(
                    f"{found[1]} says {found[0][0]}×{found[0][1]}; --size {self.size[0]} used"
                )
            return
        if found is None:
            what = f"model builder {self.model.builder!r}" if self.model.builder else "the module"
            raise InitError(
                f"{self.model.path}: cannot tell the input size: {what} does not declare it "
                "(@model_builder(NAME, input_size=S), or an image_size / pretrained_cfg "
                "attribute on the module), and a wrong size is a silently wrong recipe: "
                "give --size S"
            )
        self.size, self.model.size_source = found

    def _export(self, module: Any) -> Path:
        """The builder's module as ONNX in the project, or built into the cache by an artifact
        builder (``--artifact``): the manifest then runs that file."""
        from .export import export_onnx

        assert self.size is not None
        request = self.request
        if request.artifact is not None:
            build = registry.get_artifact_builder(request.artifact)
            if build is None:
                known = ", ".join(registry.registered()["artifact_builders"]) or "none"
                raise InitError(
                    f"--artifact {request.artifact}: no artifact builder of that name is "
                    f"registered (registered: {known}); register one in conftest.py, e.g. "
                    "pytest_mlrepro.onboarding.export.onnx_artifact(NAME, make_module, size=S)"
                )
            assert self.settings is not None
            target = cache_path(f"{request.name}.{request.export}", self.settings)
            root = self.settings.cache_dir
            self.made += [p for p in (target.parent, *target.parents) if not p.exists()]
            try:
                # The cache is a shared place: no link followed in it (``_files.confine``).
                make_confined_folder(target.parent, root)
                confine(target, root)
            except Unconfined as exc:
                raise InitError(f"the cache is not safe to use: {exc}") from None
            what = f"artifact builder {request.artifact!r} (--artifact)"
            staged = _built(target, lambda path: build(path), what)
            if target.exists() and target.read_bytes() != staged.read_bytes():
                staged.unlink()
                raise InitError(
                    f"the cache already holds other bytes as {target}: remove it, or give "
                    "another --name"
                )
            if not target.exists():
                # Into the cache at once: the runner finds it there when init runs the model.
                os.replace(staged, target)
                self.created.append(target)
            staged.unlink(missing_ok=True)
            file = target
        else:
            target = request.export_to or Path("models") / f"{request.name}.onnx"
            if target.exists() and not request.force:
                raise InitError(f"{target} exists (--force overwrites it)")
            if module is None:
                raise InitError(f"{self.model.path}: no PyTorch module to export")
            self.made += [p for p in (target.parent, *target.parents) if not p.exists()]
            size, channels, layout = self.size, self.channels or 3, self.model.layout
            # Staged beside its place (a file it replaces stays until init succeeds); the
            # staged manifest runs the staged file.
            what = f"the export of model builder {self.model.builder!r}'s module to ONNX"
            file = _built(target, lambda path: export_onnx(
                module, path, size=size, channels=channels, layout=layout), what)  # fmt: skip
            self.moves.append((file, target))
        weights = self.model
        exported = read_model(file, request.export)
        exported.artifact = request.artifact
        exported.size_source = weights.size_source + f" (exported at {self.size[0]})"
        if exported.resolution not in (None, self.size):
            raise InitError(f"{target}: exported with input {exported.shape}, not {self.size}")
        self.model = exported
        self.classes = exported.classes or self.classes
        origin = (
            f"weights {weights.package.name}/{weights.package.path}"
            if weights.package is not None
            else f"weights {weights.path}"
        )
        self._notes.append(
            f"exported model builder {weights.builder!r} ({origin}, sha256 {weights.sha256[:12]}…) "
            f"to {target} (sha256 {exported.sha256[:12]}…)"
        )
        return target

    def _ask_classes(self) -> None:
        assert self.size is not None
        runner = self._runner()
        height, width = self.size
        channels = self.channels or 3
        nchw = self.model.layout == "NCHW"
        shape = (1, channels, height, width) if nchw else (1, height, width, channels)
        with _failure("the model failed when asked its number of classes with one blank image"):
            out = np.asarray(runner(np.zeros(shape, np.dtype(self.model.dtype))))
        self.classes = int(out.reshape(out.shape[0], -1).shape[1])
        self.say(f"the model outputs {self.classes} classes (asked with one blank image)")
        self.write()

    def _discover(self) -> None:
        from ..data import resolve_dataset
        from ._discovery import Progress, Search

        assert self.size is not None and self.settings is not None
        runner = self._runner()
        dataset = resolve_dataset(load_manifest(self.out), self._settings())
        subset = spread(dataset.samples, self.request.samples)
        self.say(f"discovering the recipe on {len(subset)} of {len(dataset.samples)} images ...")
        height, width = self.size
        facts = self.facts
        # 1, 3 or 4, or the data's band count: the provisional recipe refused others.
        channels = self.channels or (facts.bands if facts is not None else 3)
        with _failure("the model failed when run on the discovery candidates"):
            search = Search(runner, subset, height, width, self.model.layout, self.model.dtype,
                            progress=Progress.to_terminal(), facts=facts)  # fmt: skip
            found = search.discover(channels)
        self.say(found.render())
        best = found.best
        steps = best.candidate.steps(height, width, self.model.layout, self.model.dtype)
        origin = [
            f"discovered by mlrepro init --discover: {best.candidate.label}",
            f"top-1 {100 * best.top1:.2f}% on {best.n} images, 95% interval "
            f"[{100 * best.interval[0]:.1f}, {100 * best.interval[1]:.1f}]",
        ]
        if facts is not None:
            origin.append(f"the data's files, read first: {facts.described}")
        if len(found.ranking) > 1:
            second = found.ranking[1]
            origin.append(
                f"runner-up: {second.candidate.label}: {100 * second.top1:.2f}% on {second.n}"
            )
        doubts, notes = doubts_about(found, self.classes, steps)
        for line in doubts:  # said, and written as comment lines of at most 92 characters
            self.say(line)
            origin += textwrap.wrap(f"TODO: {line}", 92, break_long_words=False,
                                    subsequent_indent="  ")  # fmt: skip
        self.recipe = Recipe(steps, origin, notes)
        self.write()


def _differences(best: Candidate, other: Candidate) -> list[tuple[str, str]]:
    """(the step's op, what) for each part of the recipe ``other`` changes against ``best``."""
    parts: list[tuple[str, str]] = []
    if (best.order, best.inverted, best.bands) != (other.order, other.inverted, other.bands):
        parts.append(("decode", "the decoding or colour order"))
    shape, other_shape = best.geometry, other.geometry
    if (shape.kind, shape.fraction) != (other_shape.kind, other_shape.fraction):
        parts.append(("crop", "the crop"))
    if best.geometry.method != other.geometry.method:
        parts.append(("resize", "the resize method"))
    if best.values != other.values:
        parts.append(("normalize" if best.values.mean else "scale", "the values"))
    return parts


def doubts_about(
    found: Discovery, classes: int, steps: list[StepText]
) -> tuple[list[str], dict[int, str]]:
    """Sentences when the best is near chance or cannot be told apart from a runner-up, and a
    TODO comment per undecided step index."""
    from ._discovery import versus

    best = found.best
    lines: list[str] = []
    notes: dict[int, str] = {}
    chance = 1.0 / max(classes, 1)
    low, high = best.interval
    runners = [s for s in found.ranking[1:4] if s.n == best.n]
    named = "; ".join(f"{s.candidate.label} ({100 * s.top1:.1f}%)" for s in runners) or "none"
    # Near chance: not told apart from it (its interval reaches it), or within a few points.
    if low <= chance or best.top1 <= min(2 * chance, chance + 0.1):
        lines.append(
            f"the best recipe found is poor: top-1 {100 * best.top1:.1f}% on {best.n} images "
            f"(95% interval {100 * low:.1f} to {100 * high:.1f}%), near chance for {classes} "
            f"classes ({100 * chance:.1f}%): none of the searched conventions reproduces a "
            f"working model. Runners-up: {named}. What would tell: the model's own "
            "preprocessing (its training code or documentation), the labels (is class_index "
            "the model's numbering?), or a decode the search does not cover"
        )
    ops = [next(iter(step)) for step in steps]
    for other in runners:
        if versus(best, other) != "≈":
            continue
        parts = _differences(best.candidate, other.candidate)
        if not parts:
            continue
        what = " and ".join(p[1] for p in parts)
        lines.append(
            f"undecided: {best.candidate.label} and {other.candidate.label} "
            f"({100 * best.top1:.1f}% and {100 * other.top1:.1f}% top-1) cannot be told apart "
            f"on {best.n} images; they differ in {what}. What would tell them apart: more "
            "images (--samples N, if the data set has them), or the model's own preprocessing "
            "(its training code or documentation) for that step"
        )
        for op, part in parts:
            index = next((i for i, name in enumerate(ops) if name == op), None)
            if index is None and op == "crop":
                index = next((i for i, name in enumerate(ops) if name == "resize"), None)
            if index is not None and index not in notes:
                notes[index] = f"TODO: undecided, {part}: {other.candidate.label} is as likely"
    return lines, notes


@contextlib.contextmanager
def _failure(what: str) -> Iterator[None]:
    """A framework's or a builder's exception as init's error, never a raw traceback."""
    try:
        yield
    except MlreproError:
        raise
    except Exception as exc:
        raise InitError(f"{what}: {type(exc).__name__}: {visible(str(exc))}") from None


def _built(target: Path, build: Callable[[Path], None], what: str) -> Path:
    """``build`` run into a hidden file beside ``target``: a regular file, or an InitError
    naming ``what`` (a link is never taken as its output)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(handle)
    staged = Path(name)
    try:
        with _failure(f"{what} failed"):
            build(staged)
        try:
            os.close(open_regular(staged, follow_symlinks=False))
        except OSError as exc:  # NotARegularFile among them
            raise InitError(
                f"{what} did not leave a regular file at the path it was given ({exc}): its "
                f"output is refused, nothing was put at {target}"
            ) from None
        if staged.stat().st_size == 0:
            raise InitError(f"the build of {target.name} wrote nothing ({what})")
    except BaseException:  # the staged path removed, whatever the build left there
        with contextlib.suppress(OSError):
            if staged.is_dir() and not staged.is_symlink():
                staged.rmdir()
            else:
                staged.unlink()
        raise
    # mkstemp makes the file private (0600); a model file is read like any other file.
    staged.chmod(default_file_mode())
    return staged


def _check_resolution(
    height: int, width: int, request: InitRequest, facts: DataFacts | None = None
) -> None:
    """Refuse an input resolution that init could not even allocate, before writing anything."""
    if height * width > MAX_IMAGE_PIXELS:
        # The same bound as an image a test run decodes: a larger tensor is no photo.
        raise InitError(
            f"the input resolution {height}×{width} is more than {MAX_IMAGE_PIXELS} pixels (the "
            "most an image may have): give the model's real input size with --size S"
        )
    pixel = 3
    if facts is not None:
        pixel = max(3, facts.bands * {"uint8": 1, "uint16": 2}.get(facts.dtype, 4))
    if request.discover and request.samples * height * width * pixel > MAX_DISCOVERY_BYTES:
        most = max(1, MAX_DISCOVERY_BYTES // (height * width * pixel))
        raise InitError(
            f"--discover on {request.samples} images of {height}×{width} would need more than "
            f"{MAX_DISCOVERY_BYTES // 1024**3} GiB of memory: give --samples {most} or fewer"
        )
