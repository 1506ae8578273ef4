"""A tiny, fast, deterministic pytest-mlrepro project for the plugin's integration tests.

The data set ``tiny`` holds 24 PNG images (40 × 48) in 3 classes: noise dominated by one channel
(class 0 red, 1 green, 2 blue) inside a 4-pixel border of the next class's colour, which the
32 × 32 centre crop removes. The models compute ``10 × per-channel mean`` (values in 0..1) as
3 logits, so the predicted class is the dominant channel and an RGB/BGR swap swaps classes 0 and 2.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import hashlib
import importlib
import json
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

# One import style: ``from helpers import ...`` (tests/conftest.py puts this folder on sys.path).
# Imported as ``tests.helpers`` too, the module would load twice, as two module objects, each
# with its own copy of every class and constant.
if __name__.startswith("tests."):  # (run as a script, it is __main__: allowed)
    raise ImportError(
        f"import the test helpers as 'helpers' (from helpers import ...), not as {__name__!r}"
    )

# The real data set the slow tests read: outside the repository, never copied into it.
REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("MLREPRO_DATA") or REPO.parent / "shared" / "data")
# The example's fixed model files (a model mirror: the ONNX and TFLite builds differ by CPU).
EXAMPLE_MODELS = (
    "efficientnet_lite0-opset17.onnx",
    "efficientnet_lite0-float32.tflite",
    "efficientnet_lite0-int8.tflite",
)
needs_imagenet_sample = pytest.mark.skipif(
    not (DATA / "imagenet-sample" / "labels.csv").is_file()
    or not all((DATA / "models" / name).is_file() for name in EXAMPLE_MODELS),
    reason=f"the ImageNet sample and the example's model files are not at {DATA}/imagenet-sample "
    f"and {DATA}/models (set MLREPRO_DATA)",
)

N_PER_CLASS = 8
N_CLASSES = 3
N_SAMPLES = N_PER_CLASS * N_CLASSES
HEIGHT, WIDTH, BORDER = 40, 48, 4
SCALE = 10.0

PREPROCESS_RGB = "{decode: {backend: pil}}"
PREPROCESS_BGR = "{decode: {backend: pil, order: BGR}}"
LOOSE = "tolerances: {top1: 100, top5: 100, agreement: 0.0, score: 1.0}\n"
# Plugins unrelated to pytest-mlrepro that cost seconds per (worker) process: the hypothesis
# plugin imports all of hypothesis at start-up.
QUIET = ["-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:benchmark"]
# The pytest-xdist arguments of the runs that use it (tests/conftest.py: the slow tier unless the
# test is about xdist).
XDIST = ["-n", "2"]


# How long a child process (a pytest run, the mlrepro command, a browser) may take before a test
# calls it hung: a hang detector, never a speed bound, so with room for a loaded runner (a run of
# seconds took over 120 s on a busy 2-core CI machine). When it fires, the TimeoutExpired names the
# command that hung.
CHILD_TIMEOUT_S = 600


def examples(ci: int) -> int:
    """A Hypothesis example count: ``ci`` under the ``ci`` profile (tests/conftest.py), scaled
    by the active profile's ``max_examples`` (``deep``: five times as many). An explicit count in
    ``@settings`` would otherwise override the profile."""
    from hypothesis import settings

    profile = settings.default
    assert profile is not None  # a profile is always loaded
    return max(1, round(ci * profile.max_examples / 100))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_images(folder: Path, count: int = N_SAMPLES) -> None:
    """Write ``count`` images and ``labels.csv`` into ``folder`` (deterministic)."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1234)
    rows = ["file,class_index"]
    for index in range(count):
        label = index % N_CLASSES
        image = rng.integers(40, 110, size=(HEIGHT, WIDTH, 3))
        image[:, :, label] += 60 + 5 * (index // N_CLASSES)  # dominant channel
        border = (label + 1) % N_CLASSES
        frame = np.zeros((HEIGHT, WIDTH, 3), np.int64)
        frame[:, :, border] = 255
        image[:BORDER], image[-BORDER:] = frame[:BORDER], frame[-BORDER:]
        image[:, :BORDER], image[:, -BORDER:] = frame[:, :BORDER], frame[:, -BORDER:]
        name = f"img{index:02d}.png"
        Image.fromarray(np.clip(image, 0, 255).astype(np.uint8)).save(folder / name)
        rows.append(f"{name},{label}")
    (folder / "labels.csv").write_text("\n".join(rows) + "\n")


def made_once(
    tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], None]
) -> Path:
    """The folder ``name``, filled by ``make`` once per test run: the xdist workers of one run
    share it (the first to ask makes it, under a lock; the others wait and read it). Tests
    copy from it, never write into it."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the run's folder, above each worker's own
    folder = base / name
    with open(base / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (base / f"{name}.done").exists():
            shutil.rmtree(folder, ignore_errors=True)  # a maker that failed part-way
            folder.mkdir()
            make(folder)
            (base / f"{name}.done").touch()
    return folder


def checksum_list(folder: Path) -> str:
    """``sha256sum`` output for every file of ``folder``."""
    return "".join(f"{sha256(p)}  {p.name}\n" for p in sorted(folder.iterdir()))


def make_onnx(path: Path) -> None:
    """The tiny model: logits = 10 × the channel means of an NCHW image of any size."""
    make_onnx_with_input(path, ["batch", 3, "h", "w"], graph_name="tiny")


def make_torchscript(path: Path) -> None:
    import torch

    class ChannelMeans(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.mean(dim=(2, 3)) * 10.0

    with warnings.catch_warnings():  # torch.jit is deprecated, and still what torchscript is
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.script(ChannelMeans()).save(str(path))


def make_assets(root: Path, *, torchscript: bool = True) -> Path:
    """Images, labels and the models under ``root`` (once per test session)."""
    make_images(root / "data" / "tiny")
    (root / "models").mkdir(parents=True, exist_ok=True)
    make_onnx(root / "models" / "tiny.onnx")
    if torchscript:
        make_torchscript(root / "models" / "tiny.pt")
    return root


def manifest_text(
    name: str,
    framework: str = "onnxruntime",
    *,
    version: str = "",
    decode: str = PREPROCESS_RGB,
    model_path: str | None = None,
    sha: str | None = None,
    assets: Path,
    extra: str = "",
) -> str:
    """A manifest for the tiny models (``assets/models`` gives the sha256); ``extra`` is appended
    (top-level YAML)."""
    fmt, default = (
        ("onnx", "tiny.onnx") if framework == "onnxruntime" else ("torchscript", "tiny.pt")
    )
    model_path = model_path or f"../models/{default}"
    if sha is None:
        sha = sha256(assets / "models" / default)
    head = textwrap.dedent(f"""\
        name: {name}
        version: "1"
        framework:
          name: {framework}
        model:
          format: {fmt}
          file:
            path: {model_path}
            sha256: {sha}
        inputs:
          - name: input
            layout: NCHW
            preprocess:
              - {decode}
              - {{crop: {{size: [32, 32], rounding: google}}}}
              - {{resize: {{size: [16, 16], method: bilinear, backend: pil}}}}
              - {{cast: {{dtype: float32}}}}
              - {{normalize: {{mean: [0], std: [255]}}}}
              - {{layout: {{order: NCHW}}}}
        dataset: {{name: tiny, checksums: tiny.sha256, classes: {N_CLASSES}}}
        runtime: {{batch_size: 8, devices: [cpu]}}
        """)
    if version:
        head = head.replace(
            f"  name: {framework}\n", f"  name: {framework}\n  version: {version!r}\n"
        )
    return head + textwrap.dedent(extra)


def make_project(
    project: Path,
    assets: Path,
    *,
    manifests: dict[str, str] | None = None,
    ini_data: str | None = "data",
) -> Path:
    """Copy the assets into ``project``, write the checksum list, ``pytest.ini`` and manifests.

    ``manifests`` maps a file name in ``manifests/`` to its text; by default one ONNX and one
    TorchScript manifest (``tiny_onnx.yaml`` and ``tiny_torch.yaml``). ``ini_data`` is the
    ``mlrepro_data`` ini value (None: no such key).
    """
    shutil.copytree(assets / "data", project / "data", dirs_exist_ok=True)
    shutil.copytree(assets / "models", project / "models", dirs_exist_ok=True)
    (project / "manifests").mkdir(exist_ok=True)
    (project / "manifests" / "tiny.sha256").write_text(checksum_list(project / "data" / "tiny"))
    ini = ["[pytest]"]
    if ini_data is not None:
        ini.append(f"mlrepro_data = {ini_data}")
    (project / "pytest.ini").write_text("\n".join(ini) + "\n")
    if manifests is None:
        manifests = {
            "tiny_onnx.yaml": manifest_text("tiny_onnx", assets=assets),
            "tiny_torch.yaml": manifest_text("tiny_torch", "torch", assets=assets),
        }
    for file, text in manifests.items():
        (project / "manifests" / file).write_text(text)
    return project


def line_of(text: str, needle: str) -> int:
    """The 1-based number of the only line of ``text`` containing ``needle``."""
    found = [i for i, line in enumerate(text.splitlines(), 1) if needle in line]
    assert len(found) == 1, (needle, found)
    return found[0]


class Project:
    """A tiny project in ``pytester.path``; ``run`` runs pytest on it in a subprocess."""

    def __init__(self, pytester: pytest.Pytester, assets: Path, xdist: Sequence[str]) -> None:
        self.pytester = pytester
        self.path = pytester.path
        self.assets = assets
        self.xdist = list(xdist)

    def make(
        self,
        manifests: dict[str, str] | None = None,
        *,
        goldens: Sequence[str] = (),
        ini_data: str | None = "data",
    ) -> Project:
        """Write the project; ``goldens``: names of the session's pre-recorded goldens to copy."""
        make_project(self.path, self.assets, manifests=manifests, ini_data=ini_data)
        (self.path / "golden").mkdir(exist_ok=True)
        for name in goldens:
            shutil.copy2(self.assets / "golden" / f"{name}.json", self.golden(name))
        return self

    def manifest(self, name: str, framework: str = "onnxruntime", **kwargs: object) -> str:
        return manifest_text(name, framework, assets=self.assets, **kwargs)  # type: ignore[arg-type]

    def golden(self, name: str) -> Path:
        return self.path / "golden" / f"{name}.json"

    def run(self, *args: str, subprocess: bool = False) -> pytest.RunResult:
        """Serial runs in this process (no interpreter start-up: a second or two each, and
        torch imported once per worker, not once per run); runs with xdist, of TensorFlow
        manifests, or asked for (``subprocess=True``: signals, time limits, killed processes,
        what a fresh process imports) in a subprocess."""
        if self.xdist or subprocess or not in_process_safe(self.path):
            return self.pytester.runpytest_subprocess(
                *QUIET, *self.xdist, *args, timeout=CHILD_TIMEOUT_S
            )
        return run_in_process(self.pytester, *QUIET, *args)


class BareProject:
    """The tiny project in ``pytester.path`` with no manifest and no golden yet (``manifest``
    writes one), run in-process."""

    def __init__(self, pytester: pytest.Pytester, assets: Path) -> None:
        self.pytester = pytester
        self.path = pytester.path
        self.assets = assets
        make_project(self.path, assets, manifests={})

    def manifest(self, name: str, **kwargs: Any) -> None:
        text = manifest_text(name, assets=self.assets, **kwargs)
        (self.path / "manifests" / f"{name}.yaml").write_text(text)

    def golden(self, name: str) -> Path:
        return self.path / "golden" / f"{name}.json"

    def golden_json(self, name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.golden(name).read_text())
        return data

    def data(self) -> Path:
        return self.path / "data" / "tiny"

    def rewrite_checksums(self) -> None:
        """The checksum list made anew: the project's owner accepts the edited data."""
        (self.path / "manifests" / "tiny.sha256").write_text(checksum_list(self.data()))

    def run(self, *args: str) -> pytest.RunResult:
        return run_in_process(self.pytester, *QUIET, *args)


def second_item_waits(project: Project, imports: str, wait: str) -> Project:
    """Two items whose second call first runs ``wait`` (conftest code, indented for the call's
    body; ``done[0]`` is the first item's node id): what a session does between two items."""
    made = project.make(
        {
            "tiny_onnx.yaml": project.manifest("tiny_onnx"),
            "tiny_loose.yaml": project.manifest("tiny_loose"),
        },
        goldens=["tiny_onnx", "tiny_loose"],
    )
    (made.path / "conftest.py").write_text(
        f"{imports}\n\n"
        "done = []\n\n\n"
        "def pytest_runtest_logreport(report):\n"
        "    if report.when == 'call':\n"
        "        done.append(report.nodeid)\n\n\n"
        "def pytest_runtest_call(item):\n"
        "    if not done:\n"
        "        return\n" + wait
    )
    return made


def drifted_project(project: Project) -> Project:
    """tiny_onnx drifts (its decode now gives BGR: red and blue swap), tiny_loose passes."""
    project.make(
        {
            "tiny_onnx.yaml": project.manifest("tiny_onnx"),
            "tiny_loose.yaml": project.manifest(
                "tiny_loose",
                extra="tolerances: {top1: 100, top5: 100, agreement: 0.0, score: 1.0}\n",
            ),
        },
        goldens=["tiny_onnx", "tiny_loose"],
    )
    path = project.path / "manifests" / "tiny_onnx.yaml"
    path.write_text(path.read_text().replace(PREPROCESS_RGB, PREPROCESS_BGR))
    return project


def store_as_jpegs(bare: BareProject, **save: Any) -> None:
    """The tiny data set stored as JPEG files (quality 95; ``save``: Pillow's other options)."""
    from PIL import Image

    data = bare.data()
    rows = ["file,class_index"]
    for line in (data / "labels.csv").read_text().splitlines()[1:]:
        name, label = line.split(",")
        png = data / name
        jpeg = png.with_suffix(".jpg")
        Image.open(png).convert("RGB").save(jpeg, quality=95, **save)
        png.unlink()
        rows.append(f"{jpeg.name},{label}")
    (data / "labels.csv").write_text("\n".join(rows) + "\n")
    bare.rewrite_checksums()


def verdicts(result: pytest.RunResult) -> dict[str, str]:
    """The summary table's verdict column, by manifest."""
    lines = result.stdout.lines
    start = next(
        i for i, line in enumerate(lines) if line.startswith("manifest ") and "verdict" in line
    )
    column = lines[start].index("verdict")
    out = {}
    for line in lines[start + 1 :]:
        if not line.strip() or line.startswith("="):
            break
        out[line.split()[0]] = line[column:].strip()
    return out


def lead_of(result: pytest.RunResult) -> str:
    """The diagnosis's lead sentence, its wrapped lines joined."""
    text = result.stdout.str().split("\ndiagnosis (", 1)[1]
    return " ".join(line.strip() for line in text.split("\n\n")[0].splitlines()[1:])


TF_FRAMEWORK = re.compile(r"name:\s*['\"]?(tensorflow|tflite|litert)", re.IGNORECASE)
TORCH_FRAMEWORK = re.compile(r"name:\s*['\"]?torch\b", re.IGNORECASE)
# Settings TensorFlow takes once per process (its thread pools: fixed by its first op; op
# determinism: on for good once enabled).
PROCESS_WIDE_TF = re.compile(r"\b(intra_op_threads|inter_op_threads|deterministic_ops)\b")


def in_process_safe(project: Path) -> bool:
    """Whether ``project``'s manifests can run inside the test process: ONNX Runtime and torch
    ones, and TensorFlow ones that set nothing TensorFlow takes once per process (thread
    counts, op determinism: a second manifest could not have its own). Imports the package,
    ONNX Runtime and the runner of each framework a manifest names first, so that they outlive
    each run (the torch runner reads torch's default thread count when it is imported)."""
    texts = [p.read_text(errors="replace") for p in project.rglob("*.yaml")]
    tf_texts = [text for text in texts if TF_FRAMEWORK.search(text)]
    if any(PROCESS_WIDE_TF.search(text) for text in tf_texts):
        return False
    import onnxruntime  # noqa: F401

    import pytest_mlrepro.runners.onnx

    for module in pkgutil.iter_modules(pytest_mlrepro.__path__, "pytest_mlrepro."):
        if module.name not in ("pytest_mlrepro._tf_ops", "pytest_mlrepro.zoo"):
            importlib.import_module(module.name)
    if any(TORCH_FRAMEWORK.search(text) for text in texts):
        import pytest_mlrepro.runners.torch
    if tf_texts:
        import pytest_mlrepro.runners.tensorflow
    return True


def _installed_roots() -> tuple[str, ...]:
    """The folders of installed code: the standard library, site-packages, and the package."""
    import pytest_mlrepro

    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots.add(str(Path(pytest_mlrepro.__file__).parent))
    return tuple(str(Path(r).resolve()) + os.sep for r in roots)


# The modules of installed code that tests and in-process runs imported, kept for the worker's
# life (keep_installed_modules); that many at once (TensorFlow, torch.export: hundreds), and what
# is loaded is frozen (freeze_loaded_objects).
_KEPT_MODULES: dict[str, Any] = {}
FREEZE_AFTER_MODULES = 50


def keep_installed_modules(before: set[str]) -> None:
    """Note the modules of installed code imported since ``before`` (a lazily imported torch or
    matplotlib submodule, a runner) to keep them loaded for good: pytester drops every module
    imported during a test or one of its in-process runs, and :func:`restore_kept_modules`
    puts these back. A long-lived process keeps them: importing one afresh would register
    native state twice (torch: "Only a single TORCH_LIBRARY can be used to register the
    namespace") or mix two copies of one class (matplotlib). A project's own modules (its
    conftest.py, its test files) are still dropped, as pytester means them to be."""
    roots = _installed_roots()
    installed: dict[str, bool] = {}
    kept = len(_KEPT_MODULES)
    for name, module in list(sys.modules.items()):
        if name in before or name in _KEPT_MODULES:
            continue
        top = name.partition(".")[0]
        if top not in installed:
            origin = getattr(sys.modules.get(top), "__file__", None)
            installed[top] = (
                isinstance(origin, str)
                and bool(origin)
                and str(Path(origin).resolve()).startswith(roots)
            )
        if installed[top]:
            _KEPT_MODULES[name] = module
    if len(_KEPT_MODULES) - kept >= FREEZE_AFTER_MODULES:
        freeze_loaded_objects()


def freeze_loaded_objects() -> None:
    """The objects alive now (the loaded modules: torch's, TensorFlow's, ...) left out of every
    later garbage collection (``gc.freeze``), after one last collection: a full ``gc.collect()``
    otherwise walks them all, a fifth of a second each once torch and TensorFlow are loaded, and
    the latency items collect before each measurement (four a run), pytest after each session.
    Called when a worker has loaded its modules, and again after a test loaded many more."""
    gc.collect()
    gc.freeze()


def restore_kept_modules() -> None:
    """Put back the kept modules where pytester dropped them (after each in-process run, and
    after each test: tests/conftest.py calls this then)."""
    for name, module in _KEPT_MODULES.items():
        sys.modules.setdefault(name, module)


class _KeepInstalledModules:
    """A plugin for an in-process run: at its end, keeps the installed modules it imported."""

    def __init__(self) -> None:
        self.before = set(sys.modules)

    def pytest_unconfigure(self) -> None:
        keep_installed_modules(self.before)


@contextlib.contextmanager
def _registered_builders_kept() -> Iterator[None]:
    """The model and artifact builders registered meanwhile (by a project's conftest.py) are
    unregistered at the end: the next project registers its own."""
    from pytest_mlrepro import registry

    tables: list[dict[str, Any]] = [
        registry._model_builders,
        registry._artifact_builders,
    ]
    saved = [dict(table) for table in tables]
    try:
        yield
    finally:
        for table, state in zip(tables, saved):
            table.clear()
            table.update(state)


def command_in_process(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``mlrepro ARGS`` from ``cwd``, in this process, as a child process would run it: without
    ``MLREPRO_DATA`` and ``MLREPRO_CACHE``, its output captured; the project's modules (its
    conftest.py, a ``--conftest`` file), the folders it put on sys.path and the builders it
    registered are gone afterwards, the installed modules it imported kept (keep_installed_modules).
    For a command whose subject is not the process (what it imports, a crash, a memory limit)."""
    import io

    from pytest_mlrepro.cli import main

    before, path = set(sys.modules), list(sys.path)
    environ = {k: os.environ.pop(k) for k in ("MLREPRO_DATA", "MLREPRO_CACHE") if k in os.environ}
    here = os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    try:
        os.chdir(cwd)
        with (
            _registered_builders_kept(),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            status = main(list(args))
    finally:
        os.chdir(here)
        os.environ.update(environ)
        keep_installed_modules(before)
        for name in set(sys.modules) - before - set(_KEPT_MODULES):
            del sys.modules[name]
        sys.path[:] = path
    return subprocess.CompletedProcess(["mlrepro", *args], status, out.getvalue(), err.getvalue())


def run_in_process(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """``pytester.runpytest`` in this process, keeping what a long-lived process keeps (the
    installed modules the run imported) and nothing a project registered (its model and
    artifact builders: the next test's project registers its own)."""
    torch = sys.modules.get("torch")
    # What a torch runner sets for the whole process (its manifest's threads and determinism).
    torch_state = (
        (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
        if torch is not None
        else None
    )
    restore_kept_modules()
    try:
        with _registered_builders_kept():
            return pytester.runpytest(*args, plugins=[_KeepInstalledModules()])
    finally:
        restore_kept_modules()
        if torch is not None and torch_state is not None:
            torch.set_num_threads(torch_state[0])
            torch.use_deterministic_algorithms(torch_state[1])


# --- models and builders with one behaviour each (a shaped input, hanging, crashing) --------------


def make_onnx_with_input(
    path: Path, shape: Sequence[int | str], name: str = "input", graph_name: str = "tiny_shaped"
) -> None:
    """The tiny model (10 × channel means) with an input of ``shape`` (NCHW, dims int or
    symbolic), e.g. a fixed size ``["batch", 3, 32, 32]``."""
    import onnx
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("ReduceMean", [name], ["means"], axes=[2, 3], keepdims=1),
        helper.make_node("Flatten", ["means"], ["flat"], axis=1),
        helper.make_node("Mul", ["flat", "scale"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes,
        graph_name,
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 3])],
        initializer=[helper.make_tensor("scale", TensorProto.FLOAT, [], [SCALE])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="mlrepro-tests"
    )
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def make_onnx_with_channels(path: Path, channels: int) -> str:
    """``logits = (channel means) @ W`` (3 classes): a model whose input ``[batch, channels, h,
    w]`` takes ``channels`` channels of any size. Returns the file's sha256."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weights = np.arange(channels * 3, dtype=np.float32).reshape(channels, 3) / 10
    nodes = [
        helper.make_node("ReduceMean", ["input"], ["means"], axes=[2, 3], keepdims=1),
        helper.make_node("Flatten", ["means"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "w"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes,
        "channels",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", channels, "h", "w"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 3])],
        initializer=[numpy_helper.from_array(weights, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return sha256(path)


def means_graph(
    extra_nodes: Sequence[Any] = (),
    extra_inits: Sequence[Any] = (),
    *,
    logits: str = "logits",
    classes: int = 3,
    batch: int | str = "batch",
) -> Any:
    """The tiny model (``logits = 10 × channel means``, as ``scaled``), then ``extra_nodes``
    that make the output ``logits`` from it."""
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("ReduceMean", ["input"], ["means"], axes=[2, 3], keepdims=1),
        helper.make_node("Flatten", ["means"], ["flat"], axis=1),
        helper.make_node("Mul", ["flat", "scale"], ["scaled" if extra_nodes else logits]),
        *extra_nodes,
    ]
    graph = helper.make_graph(
        nodes,
        "means",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, "h", "w"])],
        [helper.make_tensor_value_info(logits, TensorProto.FLOAT, [batch, classes])],
        initializer=[helper.make_tensor("scale", TensorProto.FLOAT, [], [SCALE]), *extra_inits],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def save_onnx(model: Any, path: Path, **kwargs: object) -> str:
    """``model`` checked and saved at ``path`` (IR version 8); returns the file's sha256."""
    import onnx

    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path), **kwargs)  # type: ignore[arg-type]
    return sha256(path)


# A conftest.py for pytester projects: model builders whose modules compute the tiny model's
# 10 × channel means (no parameters: their state_dict is empty), each with one behaviour.
BUILDERS_CONFTEST = """\
import os
import time

import pytest_mlrepro


def _module(behaviour):
    import torch

    class Means(torch.nn.Module):
        def forward(self, x):
            behaviour()
            return x.mean(dim=(2, 3)) * 10.0

    return Means()


def _nothing():
    pass


def _sleeps():
    time.sleep(3600)


def _spins():
    while True:
        pass


def _refuses_to_stop():
    while True:
        try:
            time.sleep(3600)
        except BaseException:
            pass


def _raises():
    raise ValueError("the model broke on this batch")


def _exits():
    os._exit(3)


def _segfaults():
    import ctypes

    ctypes.string_at(0)


for _name, _behaviour in [
    ("means", _nothing),
    ("sleeps", _sleeps),
    ("spins", _spins),
    ("refuses_to_stop", _refuses_to_stop),
    ("raises", _raises),
    ("exits", _exits),
    ("segfaults", _segfaults),
]:
    pytest_mlrepro.model_builder(_name)(lambda b=_behaviour: _module(b))


@pytest_mlrepro.model_builder("noisy")
def _noisy_builder():
    import torch

    class Noisy(torch.nn.Module):
        def forward(self, x):
            out = x.mean(dim=(2, 3)) * 10.0
            return out + torch.rand_like(out) * 1e-4

    return Noisy()


@pytest_mlrepro.model_builder("builder_sleeps")
def _builder_sleeps():
    time.sleep(3600)
"""


def make_empty_weights(path: Path) -> str:
    """A ``torch.save`` of an empty state_dict (the builders' modules have no parameters);
    returns its sha256."""
    import torch

    torch.save({}, str(path))
    return sha256(path)


def state_dict_manifest(
    name: str, builder: str, weights: str, sha: str, *, assets: Path, extra: str = ""
) -> str:
    """A manifest for a registered builder (BUILDERS_CONFTEST) and a weights file, relative to
    the manifest's folder."""
    text = manifest_text(name, "torch", assets=assets, extra=extra)
    start = text.index("model:\n")
    end = text.index("inputs:\n")
    model = textwrap.dedent(f"""\
        model:
          format: state_dict
          builder: {builder}
          weights:
            path: {weights}
            sha256: {sha}
        """)
    return text[:start] + model + text[end:]


def short_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    """The latency items of in-process runs measure the reference workload in blocks of 2 rounds
    between 2 slices (not 4 rounds between 8). The tests through the plugin assert on no
    reference's precision: their verdicts come from 15x slowdowns of a model, contention is not
    judged (``mlrepro_latency_max_contention = 1``), and a regression must hold absolutely too,
    so a noisier reference cannot make one. The rule itself: test_timing.py; subprocess and
    xdist runs keep it."""
    from pytest_mlrepro.latency import _timing

    monkeypatch.setattr(_timing, "REFERENCE_BLOCK_ROUNDS", 2)
    monkeypatch.setattr(_timing, "INTERLEAVE_SLICES", 2)


def run_patiently(project: Project, *args: str, timeout: float = 600) -> pytest.RunResult:
    """``project.run`` with a longer limit, for runs of many torch items on a busy machine."""
    return project.pytester.runpytest_subprocess(*QUIET, *project.xdist, *args, timeout=timeout)


def recorded_project_of(project: Project, images: int) -> Project:
    """The tiny ONNX manifest over ``images`` images, with its golden recorded by the plugin
    (the sharding tests need more samples than the default 24)."""
    project.make({"tiny_onnx.yaml": project.manifest("tiny_onnx")})
    data = project.path / "data" / "tiny"
    shutil.rmtree(data)
    make_images(data, images)
    (project.path / "manifests" / "tiny.sha256").write_text(checksum_list(data))
    recorded = project.run("--mlrepro-update")
    assert recorded.ret == 0, recorded.stdout.str()
    return project


def make_evil_torch_files(models: Path, marker: Path, batch: int = 8) -> None:
    """Torch files whose loading without weights_only would run ``touch marker``: ``evil.pt``
    and ``evil_legacy.pt`` (a state_dict pickle, zip and legacy formats) and ``evil.pt2`` (a
    torch.export archive of the tiny model for batches of ``batch``, whose sample inputs are
    that pickle), beside the honest ``honest.pt2``. Made in this process: torch.export's
    modules stay loaded across tests (tests/conftest.py)."""
    import zipfile

    import torch

    class Evil:
        def __reduce__(self) -> tuple[object, ...]:  # unpickling this runs `touch marker`
            return (os.system, (f"touch {marker}",))

    torch.save({"weight": Evil()}, str(models / "evil.pt"))
    torch.save(
        {"weight": Evil()}, str(models / "evil_legacy.pt"), _use_new_zipfile_serialization=False
    )

    class Means(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.mean(dim=(2, 3)) * 10.0

    program = torch.export.export(Means(), (torch.zeros(batch, 3, 16, 16),))
    torch.export.save(program, str(models / "honest.pt2"))
    # The same archive, with its sample inputs replaced by the pickle above: torch.export.load
    # retries sample inputs with weights_only=False, and so would run it.
    with (
        zipfile.ZipFile(models / "honest.pt2") as source,
        zipfile.ZipFile(models / "evil.pt2", "w") as target,
    ):
        for info in source.infolist():
            data = source.read(info.filename)
            if "/sample_inputs/" in info.filename:
                data = (models / "evil.pt").read_bytes()
            target.writestr(info, data)
    assert not marker.exists()  # making them ran nothing


# --- results files a reader must refuse without hanging or exhausting memory ---------------------


def nested_json(tmp_path: Path) -> Path:
    """100,000 levels of nested lists."""
    path = tmp_path / "r.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    return path


def two_gib_file(tmp_path: Path) -> Path:
    path = tmp_path / "r.json"
    with path.open("wb") as fh:
        fh.truncate(2 << 30)  # sparse: no disk space, every byte reads as NUL
    return path


def fifo_file(tmp_path: Path) -> Path:
    """A named pipe nobody writes to: a read would block forever."""
    path = tmp_path / "r.json"
    os.mkfifo(path)
    return path


def dev_zero_link(tmp_path: Path) -> Path:
    """A link to /dev/zero: endless bytes."""
    path = tmp_path / "r.json"
    path.symlink_to("/dev/zero")
    return path


def pitfall_table(declared_top1: float, *rows: Any) -> Any:
    """A pitfall sensitivity table of manifest "m" on 10 samples, as ``mlrepro pitfalls`` makes
    it: the declared pipeline's top-1 and the variants' ``PitfallRow``s."""
    from pytest_mlrepro.diagnosis import PitfallRow, PitfallTable

    declared = PitfallRow("declared", "", "the declared pipeline", declared_top1, 90.0, 1.0)
    return PitfallTable("m", "onnxruntime", "cpu", "d", 10, None, declared, list(rows))


def tiny_manifest(**runtime: Any) -> Any:
    """A manifest parsed from a minimal mapping (no file behind it), with ``runtime`` set."""
    from pytest_mlrepro.manifest import parse_manifest

    data = {
        "name": "m",
        "version": "1",
        "framework": {"name": "onnxruntime"},
        "model": {"format": "onnx", "file": {"path": "m.onnx", "sha256": "0" * 64}},
        "inputs": [
            {
                "name": "input",
                "layout": "NCHW",
                "preprocess": [{"decode": {}}, {"cast": {}}, {"layout": {}}],
            }
        ],
        "dataset": {"name": "d", "checksums": "d.sha256"},
        "runtime": runtime,
    }
    return parse_manifest(data, "m.yaml", {})
