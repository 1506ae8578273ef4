"""The manifest schema, loaded with the line of every field so that errors name it. A manifest
never contains code: builders and custom steps are registered in Python and named here."""

from __future__ import annotations

import dataclasses
import re
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from .. import pipeline
from .._files import FileTooLarge, NotARegularFile, read_bounded
from .._schema import Context, Invalid, convert_dataclass, suggest, to_plain
from .._yaml import MAX_BYTES, KeyPath, load_yaml, too_large
from ..errors import ManifestError

# The model formats each TensorFlow runtime reads (ONNX Runtime reads onnx, torch the rest).
TF_FORMATS = {"tensorflow": ("saved_model", "keras", "frozen_graph"), "tflite": ("tflite",)}
_SHA256 = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")

# The latency statistics a tolerance may name: here, below the latency layer that computes them.
STATISTICS = ("min", "p50", "p90", "p99", "mean")

NAME_MAX = 255  # bytes of a file name on the usual file systems (ext4, XFS, APFS, NTFS)
PATH_MAX = 4096  # bytes of a path Linux opens
# A cache entry's: the cache adds ``.origin.json``, ``.lock`` and ``.<name>.<random>.part``.
CACHE_NAME_MAX = 200


def _bounded(default: Any, says: str = "", **schema: Any) -> Any:
    """A field bounded by JSON Schema ``schema``: checked on load (saying ``says``, else the
    bounds) and stated in the published schema."""
    return field(default=default, metadata={"schema": schema, **({"says": says} if says else {})})


_FRACTION: dict[str, Any] = {"says": "is a fraction between 0 and 1", "minimum": 0, "maximum": 1}


def name_problem(value: str, longest: int = NAME_MAX) -> str | None:
    """Why the file system cannot hold the path ``value``, or None: said on the manifest's line
    instead of as ``OSError: [Errno 36] File name too long`` deep inside a run."""
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > PATH_MAX:
        return f"the path is {size} bytes long; file systems hold paths of at most {PATH_MAX}"
    for part in re.split(r"[/\\]", value):
        length = len(part.encode("utf-8", "surrogatepass"))
        if length > longest:
            shown = part[:40] + "…"
            return f"the name {shown!r} is {length} bytes long; " + (
                f"a cache entry may have at most {longest} (the cache adds suffixes to it, "
                f"and file systems hold names of at most {NAME_MAX})"
                if longest != NAME_MAX
                else f"file systems hold names of at most {NAME_MAX} bytes"
            )
    return None


@dataclass(frozen=True)
class FileRef:
    """A file and its sha256. Exactly one of:

    * ``path``: relative to the manifest's folder, inside the project;
    * ``package`` + ``path``: a file shipped inside an installed Python package;
    * ``cache`` (+ ``url`` and/or ``build``): a file in the mlrepro cache. When it is missing it
      is copied from a model mirror (``<mirror>/models/<cache>``, the data mirrors' ``models``
      folder), else fetched from ``url`` (``http``, ``https``, or ``file`` inside the project or
      an allowed root), else made by the registered artifact builder ``build``. Fixed bytes
      (mirror, url) come first: a build may write other bytes on another machine.
    """

    sha256: str
    path: str | None = None
    package: str | None = None
    cache: str | None = None
    build: str | None = None
    url: str | None = None

    def check(self) -> None:
        if not _SHA256.fullmatch(self.sha256):
            raise Invalid("sha256", "expected 64 lowercase hex digits")
        if (self.path is None) == (self.cache is None):
            raise Invalid("", "give exactly one of 'path' and 'cache'")
        if self.package is not None and self.path is None:
            raise Invalid("package", "'package' needs 'path' (the file inside the package)")
        if self.build is not None and self.cache is None:
            raise Invalid("build", "'build' makes a file in the cache: use it with 'cache'")
        if self.url is not None:
            if self.cache is None:
                raise Invalid("url", "'url' fetches a file into the cache: use it with 'cache'")
            problem = url_problem(self.url, file=True)
            if problem is not None:
                raise Invalid("url", problem)
        # Only one of the two is given (above).
        name, value = ("path", self.path or "") if self.cache is None else ("cache", self.cache)
        if value == "" or "\0" in value:
            raise Invalid(name, "not a usable file name")
        if name == "cache" and ("/" in value or "\\" in value or value in (".", "..")):
            raise Invalid("cache", "a cache entry is a plain file name")
        problem = name_problem(value, CACHE_NAME_MAX if name == "cache" else NAME_MAX)
        if problem is not None:
            raise Invalid(name, problem)


@dataclass(frozen=True)
class Framework:
    name: Literal["onnxruntime", "torch", "tensorflow", "tflite"]
    version: str = ""

    def check(self) -> None:
        try:
            SpecifierSet(self.version)
        except InvalidSpecifier:
            raise Invalid(
                "version", f"{self.version!r} is not a PEP 440 version specifier (e.g. '>=1.17,<2')"
            ) from None

    @property
    def specifier(self) -> SpecifierSet:
        return SpecifierSet(self.version)


@dataclass(frozen=True)
class Model:
    """``onnx``, ``torchscript`` and ``torch_export`` name a ``file``; ``state_dict`` names a
    ``builder`` registered in Python and a ``weights`` file loaded with ``weights_only=True``.

    TensorFlow: ``saved_model`` (a tar of the SavedModel folder, checksummed as one file),
    ``keras`` (a ``.keras`` file), ``frozen_graph`` (a TF1 ``GraphDef`` ``.pb``); ``tflite``. A
    SavedModel's ``signature`` defaults to ``serving_default``.

    An ONNX model saved with external data names each of its data files in ``external_data``
    (``{location: sha256}``, the location as the model records it, relative to its folder): they
    are checked with the model, before it loads.
    """

    format: Literal[
        "onnx", "torchscript", "torch_export", "state_dict", "saved_model", "keras", "tflite",
        "frozen_graph",
    ]  # fmt: skip
    file: FileRef | None = None
    builder: str | None = None
    weights: FileRef | None = None
    signature: str | None = field(default=None, metadata={"plain_omit_none": True})
    # ONNX external data: {location as the model names it: sha256}, every file pinned.
    external_data: dict[str, str] | None = field(default=None, metadata={"plain_omit_none": True})

    def check(self) -> None:
        if self.signature is not None and self.format != "saved_model":
            raise Invalid("signature", "only a 'saved_model' has signatures")
        if self.external_data is not None:
            if self.format != "onnx":
                raise Invalid("external_data", "only an 'onnx' model has external data files")
            for location, sha in self.external_data.items():
                if not _SHA256.fullmatch(sha):
                    raise Invalid(("external_data", location), "expected 64 lowercase hex digits")
        if self.format == "state_dict":
            if self.builder is None or self.weights is None:
                raise Invalid("", "format 'state_dict' needs 'builder' and 'weights'")
            if self.file is not None:
                raise Invalid("file", "format 'state_dict' takes 'weights', not 'file'")
        else:
            if self.file is None:
                raise Invalid("", f"format {self.format!r} needs 'file'")
            if self.builder is not None or self.weights is not None:
                raise Invalid(
                    "builder" if self.builder else "weights",
                    f"format {self.format!r} takes only 'file'",
                )


def _convert_steps(value: Any, path: KeyPath, ctx: Context) -> tuple[pipeline.Step, ...]:
    if not isinstance(value, list) or not value:
        raise ctx.error(path, "expected a non-empty list of steps, e.g. '- decode: {backend: pil}'")
    steps: list[pipeline.Step] = []
    for index, item in enumerate(value):
        where = (*path, index)
        if isinstance(item, str):
            item = {item: {}}
        if not isinstance(item, dict) or len(item) != 1:
            raise ctx.error(
                where,
                "each step is a mapping with one key, the op name (e.g. '- resize: {size: 224}')",
            )
        ((op, params),) = item.items()
        cls = pipeline.STEPS.get(op)
        if cls is None:
            known = ", ".join(sorted(pipeline.STEPS))
            raise ctx.error(
                (*where, op), f"unknown step{suggest(op, pipeline.STEPS)}; known steps: {known}"
            )
        steps.append(convert_dataclass(cls, params, (*where, op), ctx))
    try:
        pipeline.Pipeline(steps)
    except Invalid as exc:
        raise ctx.error((*path, *exc.path), exc.message) from None
    return tuple(steps)


@dataclass(frozen=True)
class Input:
    name: str
    layout: Literal["NCHW", "NHWC"]
    preprocess: tuple[pipeline.Step, ...] = field(
        metadata={"steps": True, "convert": _convert_steps}
    )
    dtype: Literal["float32", "float16", "uint8", "int8"] = "float32"

    def check(self) -> None:
        final = pipeline.Pipeline(self.preprocess).final
        want_layout = "CHW" if self.layout == "NCHW" else "HWC"
        if final.layout != want_layout or final.dtype != self.dtype:
            raise Invalid(
                "preprocess",
                f"the steps end with {final.layout} {final.dtype} "
                f"data but the input is {self.layout} {self.dtype}: add a "
                f"{'layout' if final.layout != want_layout else 'cast'} step",
            )


@dataclass(frozen=True)
class Postprocess:
    """``softmax``: turn the output into probabilities (leave false if the model already does)."""

    softmax: bool = True
    top_k: int = _bounded(5, minimum=1, maximum=100)
    output: str | None = None


@dataclass(frozen=True)
class Dataset:
    """A labelled image set: a folder with the images and a CSV of labels.

    ``labels`` and ``class_names`` are read from the data folder, or from ``labels_dir`` (relative
    to the manifest) when the project keeps them next to its manifests. The images are looked up,
    in order, in the data mirrors (``mlrepro_data`` / ``MLREPRO_DATA``, each holding a
    folder named ``name``), in the cache, and, if ``url`` is set, downloaded into the cache. Every
    file is checked against ``checksums`` (``sha256sum`` format, relative to the manifest).

    ``labels_from: folders`` reads the labels from the layout most image sets ship in, one
    folder per class (torchvision's ``ImageFolder``): the samples are the ``<class>/<file>``
    entries of the checksum list, and a class's index is its folder's position among the class
    folders sorted by name (``labels`` is then not used).
    """

    name: str
    checksums: str
    labels_from: Literal["file", "folders"] = "file"
    labels: str = "labels.csv"
    labels_dir: str | None = None
    file_column: str = "file"
    label_column: str = "class_index"
    classes: int = _bounded(1000, minimum=1)
    class_names: str | None = None
    url: str | None = None
    limit: int | None = _bounded(None, minimum=1)

    def check(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise Invalid("name", "use letters, digits, '_', '.', '-' (a folder name)")
        if self.url is not None:
            problem = url_problem(self.url)
            if problem is not None:
                raise Invalid("url", problem)
        for name in ("checksums", "labels", "labels_dir", "class_names"):
            value = getattr(self, name)
            problem = name_problem(value) if value is not None else None
            if problem is not None:
                raise Invalid(name, problem)


def url_problem(url: str, *, file: bool = False) -> str | None:
    """Why ``url`` is no http(s) (``file``: nor absolute ``file://``) URL, or None: said on its
    line, not as urllib's error in the download."""
    if file and url.startswith("file:"):
        parts = urllib.parse.urlsplit(url)
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            return "a file:// URL names an absolute local path: file:///folder/m"
    else:
        if not re.match(r"https?://", url):
            schemes = "http://, https:// or file://" if file else "http:// or https://"
            return f"expected an {schemes} URL"
        if re.search(r"[\x00-\x20\x7f]", url):
            return "a URL has no spaces or control characters (write a space as %20)"
        try:
            parts = urllib.parse.urlsplit(url)
            parts.port  # noqa: B018  (parsing the port is what raises for a bad one)
        except ValueError as exc:
            return f"not a valid URL: {exc}"
        if not parts.hostname:
            return "expected an http:// or https:// URL with a host name"
    if file and parts.path.endswith("/"):
        return "the URL must name the file itself, not a folder"
    return None


@dataclass(frozen=True)
class Tolerances:
    """How far results may move from the golden before the item fails.

    ``top1``/``top5``: accuracy points; ``agreement``: the least fraction of samples whose top-1
    equals the golden's; ``score``: the largest absolute difference of a golden top-k score.
    Defaults come from measurement: see the README.
    """

    top1: float = _bounded(0.5, minimum=0)
    top5: float = _bounded(0.5, minimum=0)
    agreement: float = _bounded(0.99, **_FRACTION)
    score: float = _bounded(1e-3, minimum=0)


@dataclass(frozen=True)
class Runtime:
    """How the model runs. Thread counts of ``None`` leave the framework's default (recorded).

    ``graph_optimization``: ONNX Runtime's graph optimisation level (``None``: its default, all).
    ``seed``: seeds Python's ``random``, NumPy and the framework before the model loads.
    ``deterministic_ops``: ask for deterministic kernels: ``torch.use_deterministic_algorithms``
    (and cuDNN's deterministic mode), ONNX Runtime's ``use_deterministic_compute``, TensorFlow's
    ``TF_DETERMINISTIC_OPS``. ``timeout_s``: stop an item that runs longer (default: the ini key
    ``mlrepro_timeout``); it changes no result, so goldens do not record it.
    """

    batch_size: int = _bounded(32, minimum=1, maximum=4096)
    intra_op_threads: int | None = _bounded(None, minimum=1, maximum=1024)
    inter_op_threads: int | None = _bounded(None, minimum=1, maximum=1024)
    devices: tuple[Literal["cpu", "cuda"], ...] = _bounded(
        ("cpu", "cuda"), "name at least one device", minItems=1
    )
    graph_optimization: Literal["disabled", "basic", "extended", "all"] | None = None
    seed: int | None = _bounded(
        None, "must be between 0 and 2**32 - 1", minimum=0, maximum=2**32 - 1
    )
    deterministic_ops: bool = False
    timeout_s: float | None = _bounded(
        None, "seconds above 0 and at most 86400 (a day)", exclusiveMinimum=0, maximum=86400
    )


@dataclass(frozen=True)
class Determinism:
    """A ``determinism[<device>]`` item: the evaluation runs ``runs`` times, each with the model
    loaded afresh, and every score must equal the first run's (``tolerance`` 0) or differ by at
    most ``tolerance``. Opt-in (the block, or ``--mlrepro-determinism``): it costs ``runs`` full
    evaluations. The controls (seed, threads, graph optimisation, deterministic ops) are
    ``runtime``'s, shared with the accuracy item.
    """

    runs: int = _bounded(2, minimum=2, maximum=10)
    tolerance: float = _bounded(0.0, minimum=0)


@dataclass(frozen=True)
class Latency:
    """Latency items: one per device and batch size, each timing the declared measurements.

    ``model``: the framework call on a prepared input (device synchronised); ``end_to_end``: one
    request of ``batch`` encoded images through decode, preprocessing, the model and top-k.
    ``tolerance`` maps a statistic (min, p50, p90, p99, mean) to the largest ratio now/golden
    that passes. Times in seconds; see the README for the methodology.
    """

    batch_sizes: tuple[int, ...] = (1,)
    measure: tuple[Literal["model", "end_to_end"], ...] = _bounded(
        ("model", "end_to_end"),
        "list model and/or end_to_end, each once",
        minItems=1,
        uniqueItems=True,
    )
    tolerance: dict[str, float] = field(default_factory=lambda: {"p50": 1.25})
    min_rounds: int = _bounded(20, minimum=3, maximum=1_000_000)
    min_time: float = _bounded(1.0, minimum=0)
    max_time: float = _bounded(
        10.0, "must be above 0 and at most 3600 (seconds)", exclusiveMinimum=0, maximum=3600
    )
    warmup_rounds: int = _bounded(5, minimum=0)
    warmup_time: float = _bounded(0.2, minimum=0)
    attempts: int = _bounded(3, minimum=1, maximum=10)

    def check(self) -> None:
        if not self.batch_sizes:
            raise Invalid("batch_sizes", "name at least one batch size")
        for i, size in enumerate(self.batch_sizes):
            if not 1 <= size <= 4096:
                raise Invalid(("batch_sizes", i), "must be between 1 and 4096")
            if size in self.batch_sizes[:i]:
                raise Invalid(("batch_sizes", i), f"batch size {size} is listed twice")
        if not self.tolerance:
            raise Invalid("tolerance", "give at least one statistic, e.g. {p50: 1.25}")
        for name, ratio in self.tolerance.items():
            if name not in STATISTICS:
                raise Invalid(
                    ("tolerance", name),
                    f"unknown statistic{suggest(name, STATISTICS)}; known: {', '.join(STATISTICS)}",
                )
            if not 1.0 < ratio <= 100.0:
                raise Invalid(
                    ("tolerance", name),
                    "a ratio now/golden above 1 (1.25: up to 25% slower passes)",
                )
        if self.max_time < self.min_time:
            raise Invalid("max_time", f"must be at least min_time ({self.min_time:g})")


@dataclass(frozen=True)
class Reference:
    """The same model in another runtime, whose golden this manifest's results must agree with.

    ``manifest``: the reference manifest's name (looked up in this manifest's folder) or its
    path relative to this manifest (ending in ``.yaml``/``.yml``). Per sample, over the samples
    both have: ``agreement`` is the least fraction whose top-1 equals the reference's; ``score``
    the largest absolute difference of a score of the reference's top-k classes (probabilities
    when both apply softmax, else logits); ``top1`` the least ratio of this top-1 accuracy to the
    reference's (MLPerf's "99% of FP32" is 0.99).
    """

    manifest: str
    agreement: float = _bounded(0.99, **_FRACTION)
    score: float = _bounded(1e-3, minimum=0)
    top1: float = _bounded(0.99, **_FRACTION)

    def check(self) -> None:
        if not self.manifest or "\0" in self.manifest:
            raise Invalid("manifest", "name a manifest or a .yaml path")


@dataclass(frozen=True)
class Manifest:
    name: str
    version: str
    framework: Framework
    model: Model
    inputs: tuple[Input, ...]
    dataset: Dataset
    task: Literal["image-classification"] = "image-classification"
    description: str = ""
    postprocess: Postprocess = field(default_factory=Postprocess)
    tolerances: Tolerances = field(default_factory=Tolerances)
    runtime: Runtime = field(default_factory=Runtime)
    latency: Latency | None = None
    determinism: Determinism | None = None
    reference: str | Reference | None = None
    golden: str | None = None
    source: str = field(default="", compare=False, metadata={"internal": True})
    path: Path = field(default=Path("."), compare=False, metadata={"internal": True})
    lines: dict[KeyPath, int] = field(
        default_factory=dict, compare=False, repr=False, metadata={"internal": True}
    )

    def check(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise Invalid("name", "use letters, digits, '_', '.', '-' (it names the golden file)")
        if self.golden is not None and (not self.golden.endswith(".json") or "\0" in self.golden):
            raise Invalid("golden", "expected a path ending in .json")
        problem = name_problem(self.golden) if self.golden is not None else None
        if problem is not None:
            raise Invalid("golden", problem)
        if self.runtime.graph_optimization is not None and self.framework.name != "onnxruntime":
            raise Invalid(
                ("runtime", "graph_optimization"),
                f"an ONNX Runtime setting; framework {self.framework.name!r} has none",
            )
        readers = [fw for fw, formats in TF_FORMATS.items() if self.model.format in formats]
        if (self.framework.name in TF_FORMATS or readers) and self.framework.name not in readers:
            raise Invalid(
                ("model", "format"),
                f"framework {self.framework.name!r} does not read format {self.model.format!r}"
                + (f" (framework {readers[0]!r} does)" if readers else ""),
            )
        if isinstance(self.reference, str) and (not self.reference or "\0" in self.reference):
            raise Invalid("reference", "name a manifest or a .yaml path")
        if self.reference_spec is not None and self.reference_spec.manifest == self.name:
            raise Invalid("reference", "a manifest cannot be its own reference")

    @property
    def input(self) -> Input:
        return self.inputs[0]

    @property
    def reference_spec(self) -> Reference | None:
        """``reference`` as a :class:`Reference` (a plain string names the manifest)."""
        if isinstance(self.reference, str):
            return Reference(manifest=self.reference)
        return self.reference

    @property
    def pipeline(self) -> pipeline.Pipeline:
        """The first input's pipeline; a registered step that breaks its contract is this
        manifest's error at that step's line."""

        def broken(index: int, op: str, message: str) -> Exception:
            return self.error(("inputs", 0, "preprocess", index, op), message)

        return pipeline.Pipeline(self.input.preprocess, broken)

    def error(self, path: KeyPath, message: str) -> ManifestError:
        """An error about field ``path`` of this manifest, with its file and line."""
        return Context(self.source, self.lines).error(path, message)

    def normalized(self) -> dict[str, Any]:
        """Every field with defaults filled in: what a golden records and diagnosis diffs."""
        data: dict[str, Any] = to_plain(self)
        data.pop("latency", None)  # how latency is measured changes no result
        data.pop("determinism", None)  # nor whether runs are compared with each other
        data.pop("reference", None)  # nor which other runtime's results they are checked against
        data["runtime"].pop("timeout_s", None)  # nor how long an item may take
        data["inputs"] = [
            {**plain, "preprocess": [{s.op: to_plain(s)} for s in inp.preprocess]}
            for plain, inp in zip(data["inputs"], self.inputs)
        ]
        return data


def parse_manifest(data: Any, file: str, lines: dict[KeyPath, int]) -> Manifest:
    """Plain manifest data as a :class:`Manifest`; ManifestError if invalid."""
    ctx = Context(file, lines)
    if not isinstance(data, dict):
        raise ctx.error((), "a manifest is a mapping (name:, framework:, model:, ...)")
    # The input is read first, as the author of a custom step tests it: its pipeline's error is
    # said even of a manifest that holds nothing else yet. A second input is said before the
    # input itself is read: it is not what is wrong with the input.
    if "inputs" not in data:
        raise ctx.error((), "missing required key 'inputs'")
    if not isinstance(data["inputs"], list) or len(data["inputs"]) != 1:
        raise ctx.error(("inputs",), "expected a list with one input (image classification)")
    convert_dataclass(Input, data["inputs"][0], ("inputs", 0), ctx)
    manifest = convert_dataclass(Manifest, data, (), ctx)
    return dataclasses.replace(manifest, source=file, path=Path(file), lines=lines)


def load_manifest(path: str | Path, display: str | None = None) -> Manifest:
    """``display``: the name errors use (default: path). A huge file, a FIFO (which would block
    the run), a device or a folder is refused unread."""
    path = Path(path)
    shown = display or str(path)
    try:
        content = read_bounded(path, MAX_BYTES, follow_symlinks=True)
    except NotARegularFile:
        raise ManifestError(
            shown, None, "", "not a regular file (a FIFO, a device or a folder): not read"
        ) from None
    except FileTooLarge as exc:
        raise ManifestError(shown, None, "", too_large(exc.size)) from None
    except OSError as exc:
        raise ManifestError(shown, None, "", f"cannot read: {exc.strerror or exc}") from None
    if content is None:
        raise ManifestError(shown, None, "", "cannot read: No such file or directory")
    data, lines = load_yaml(content, shown)
    return dataclasses.replace(parse_manifest(data, shown, lines), path=path)
