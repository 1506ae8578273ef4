"""The pitfalls as pure transformations of a manifest, the runner that shares their work, the
sensitivity table, and the ``mlrepro`` command that prints it."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import cast

import diag_helpers as H
import numpy as np
import pytest
from helpers import CHILD_TIMEOUT_S, command_in_process

from pytest_mlrepro.data._datasets import resolve_dataset
from pytest_mlrepro.diagnosis import _pitfalls as pitfalls
from pytest_mlrepro.diagnosis._counterfactual import score_pipelines
from pytest_mlrepro.diagnosis._sensitivity import read, save, sensitivity, table_path
from pytest_mlrepro.errors import MlreproError
from pytest_mlrepro.evaluation import postprocessed, run_model
from pytest_mlrepro.manifest._spec import load_manifest
from pytest_mlrepro.pipeline._steps import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    Color,
    Crop,
    Decode,
    Layout,
    Normalize,
    Pipeline,
    Resize,
    Scale,
)
from pytest_mlrepro.report import pitfall_words, sensitivity_text
from pytest_mlrepro.runners import load_runner
from pytest_mlrepro.settings import Settings

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "manifests" / "efficientnet_lite0_onnx.yaml"


def steps_manifest(tmp_path: Path, steps: list[str], layout: str = "NCHW", dtype: str = "float32"):
    """A manifest (never run) with these preprocessing steps."""
    text = H.manifest_text("x", "m.onnx", "a" * 64, steps).replace(
        "    layout: NCHW\n", f"    layout: {layout}\n    dtype: {dtype}\n"
    )
    path = tmp_path / "m.yaml"
    path.write_text(text)
    return load_manifest(path)


def keys(manifest) -> list[str]:
    return [v.key for v in pitfalls.variants(manifest)]


# --- variants -------------------------------------------------------------------------------


def test_every_category_is_flipped_on_the_example_and_each_variant_is_valid() -> None:
    manifest = load_manifest(EXAMPLE)
    before = manifest.normalized()
    found = pitfalls.variants(manifest)
    grey_only = {pitfalls.INVERTED, pitfalls.GREY, pitfalls.DEPTH}  # test_grey_pitfalls
    assert {v.pitfall for v in found} == set(pitfalls.CATEGORIES) - grey_only
    assert len({v.key for v in found}) == len(found)
    assert len({v.steps for v in found}) == len(found)  # no two variants are the same pipeline
    original = tuple(manifest.input.preprocess)
    for v in found:
        assert v.steps != original
        assert pitfalls.valid_steps(v.steps, manifest.input), v.key
        Pipeline(v.steps)  # validates
    assert manifest.normalized() == before  # pure: the manifest itself is untouched
    assert {
        "colour:BGR", "crop:none", "crop:1.0", "resize:pil-nearest", "resize:opencv-bilinear",
        "decode:opencv", "exif:on", "layout:reshape", "normalize:uint8-saturate",
        "normalize:uint8-wrap", "normalize:imagenet", "normalize:x255",
    } <= {v.key for v in found}  # fmt: skip


GREY_STEPS = [
    "decode: {backend: pil, mode: L, convert: luma}",
    "resize: {size: [16, 16], method: bilinear, backend: pil}",
    "cast: {dtype: float32}",
    "scale: {divisor: 255}",
    "layout: {order: NCHW}",
]


def test_grey_pitfalls(tmp_path: Path) -> None:
    """A grey pipeline: no colour-order flip (it could change nothing on one channel, and the
    decode refuses it), but inverted pixels, the other grey conversions and the MNIST
    constants; ImageNet's three-channel constants are no variant of one channel."""
    manifest = steps_manifest(tmp_path, GREY_STEPS)
    found = {v.key: v for v in pitfalls.variants(manifest)}
    assert not [k for k in found if k.startswith("colour")]
    assert "normalize:imagenet" not in found
    inverted = found["invert:add"]
    assert (
        inverted.pitfall == pitfalls.INVERTED
        and pitfall_words(inverted.flip) == "inverted: 255 − x"
    )
    ops = [s.op for s in inverted.steps]
    assert ops == ["decode", "invert", "resize", "cast", "scale", "layout"]
    assert {k for k in found if k.startswith("grey:")} == {"grey:red", "grey:green", "grey:blue"}
    assert pitfall_words(found["grey:green"].flip) == (
        "grey by the green channel instead of ITU-R 601-2 luma"
    )
    assert found["normalize:mnist"].pitfall == pitfalls.MEAN_STD
    for variant in found.values():
        assert pitfalls.valid_steps(variant.steps, manifest.input), variant.key
    # A pipeline that inverts gets the inversion removed; a colour one gets no inversion added.
    own = steps_manifest(tmp_path, [GREY_STEPS[0], "invert", *GREY_STEPS[1:]])
    assert "invert:none" in keys(own) and "invert:add" not in keys(own)
    assert not [k for k in keys(steps_manifest(tmp_path, H.BASE_STEPS)) if "invert" in k]


def test_a_16_bit_image_read_as_8_bit_is_a_pitfall(tmp_path: Path) -> None:
    deep = steps_manifest(
        tmp_path, ["decode: {backend: pil, mode: L16}", *GREY_STEPS[1:3], "scale: {divisor: 65535}",
                   GREY_STEPS[4]]
    )  # fmt: skip
    found = {v.key: v for v in pitfalls.variants(deep)}
    depth = found["depth:L"]
    assert depth.pitfall == pitfalls.DEPTH
    assert pitfall_words(depth.flip) == (
        "the 16-bit image read as 8-bit (mode L, its high byte) instead of L16"
    )
    assert isinstance(depth.steps[0], Decode) and depth.steps[0].mode == "L"
    assert pitfall_words(found["invert:add"].flip) == "inverted: 65535 − x"
    assert pitfalls.category_of_change("decode", "mode") == pitfalls.DEPTH
    assert pitfalls.category_of_change("decode", "convert") == pitfalls.GREY
    assert pitfalls.category_of_change("invert", None) == pitfalls.INVERTED


def test_one_flip_changes_one_thing(tmp_path: Path) -> None:
    m = steps_manifest(tmp_path, H.BASE_STEPS)
    by_key = {v.key: v for v in pitfalls.variants(m)}
    base = m.input.preprocess
    bgr = by_key["colour:BGR"].steps
    assert bgr[0] == dataclasses.replace(base[0], order="BGR") and bgr[1:] == base[1:]
    assert by_key["crop:none"].steps == (base[0], *base[2:])
    assert by_key["crop:1.0"].steps[1] == Crop(fraction=1.0, rounding="google")
    reshape = by_key["layout:reshape"].steps
    assert reshape[-1] == Layout(order="NCHW", method="reshape") and reshape[:-1] == base[:-1]
    saturate = by_key["normalize:uint8-saturate"].steps
    assert [s.op for s in saturate] == ["decode", "crop", "resize", "normalize", "cast", "layout"]
    assert saturate[3] == Normalize(mean=(127.0,) * 3, std=(128.0,) * 3, on_uint8="saturate")
    imagenet = by_key["normalize:imagenet"].steps
    assert imagenet[4] == Scale(divisor=255.0)
    assert imagenet[5] == Normalize(mean=IMAGENET_MEAN, std=IMAGENET_STD)
    assert by_key["resize:opencv-bilinear"].steps[2] == Resize(size=(12, 12), backend="opencv")
    assert "OpenCV INTER_LINEAR instead of Pillow bilinear" in pitfall_words(
        by_key["resize:opencv-bilinear"].flip
    )


def test_colour_flips_the_last_colour_step_when_there_is_one(tmp_path: Path) -> None:
    m = steps_manifest(tmp_path, [H.BASE_STEPS[0], "color: {order: BGR}", *H.BASE_STEPS[1:]])
    (bgr,) = [v for v in pitfalls.variants(m) if v.pitfall == pitfalls.COLOUR]
    assert pitfall_words(bgr.flip) == "RGB instead of BGR"
    assert bgr.steps[0] == m.input.preprocess[0] and bgr.steps[1] == Color(order="RGB")


def test_a_pipeline_without_crop_gets_the_usual_crop_added(tmp_path: Path) -> None:
    m = steps_manifest(tmp_path, [H.BASE_STEPS[0], *H.BASE_STEPS[2:]])
    (added,) = [v for v in pitfalls.variants(m) if v.pitfall == pitfalls.CROP]
    assert added.key == "crop:add-0.875" and added.steps[1] == Crop(fraction=0.875)
    sized = steps_manifest(tmp_path, H.replace_step(H.BASE_STEPS, 1, "crop: {size: [30, 30]}"))
    assert [k for k in keys(sized) if k.startswith("crop")] == ["crop:none"]


def test_resize_flips_respect_what_each_backend_can_do(tmp_path: Path) -> None:
    m = steps_manifest(
        tmp_path,
        H.replace_step(H.BASE_STEPS, 2, "resize: {size: [12, 12], method: area, backend: opencv}"),
    )
    resizes = [v.steps[2] for v in pitfalls.variants(m) if v.pitfall == pitfalls.RESIZE]
    assert Resize(size=(12, 12), method="box", backend="pil") in resizes  # area ↔ box
    for r in resizes:
        r.check()  # never Pillow 'area', OpenCV 'box', or an antialias the backend lacks
        assert isinstance(r, Resize)


def test_nhwc_and_uint8_models_get_only_the_flips_they_can_take(tmp_path: Path) -> None:
    nhwc = steps_manifest(
        tmp_path, H.replace_step(H.BASE_STEPS, 5, "layout: {order: NHWC}"), layout="NHWC"
    )
    assert not [k for k in keys(nhwc) if k.startswith("layout")]
    uint8 = steps_manifest(
        tmp_path,
        [*H.BASE_STEPS[:3], "cast: {dtype: uint8}", "layout: {order: NCHW}"],
        dtype="uint8",
    )
    assert not [k for k in keys(uint8) if k.startswith("normalize")]


def test_normalisation_variants_follow_what_is_declared(tmp_path: Path) -> None:
    head, tail = H.BASE_STEPS[:3], H.BASE_STEPS[5:]
    tf_mode = steps_manifest(
        tmp_path, [*head, "cast: {}", "normalize: {mean: [127.5], std: [127.5]}", *tail]
    )
    assert "normalize:tf" not in keys(tf_mode)  # equivalent to what is declared
    x255 = steps_manifest(tmp_path, [*head, "cast: {}", "scale: {divisor: 255}", *tail])
    found = keys(x255)
    assert "normalize:x255" not in found and "normalize:imagenet" in found
    assert not [k for k in found if "uint8" in k or "units" in k]  # nothing to reorder or rescale
    torch_style = steps_manifest(
        tmp_path,
        [*head, "cast: {}", "scale: {divisor: 255}",
         "normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}", *tail],
    )  # fmt: skip
    by_key = {v.key: v for v in pitfalls.variants(torch_style)}
    assert "normalize:imagenet" not in by_key
    dropped = by_key["normalize:units-no-255"]
    assert [s.op for s in dropped.steps][3:5] == ["cast", "normalize"]
    assert dropped.steps[4] == Normalize(mean=IMAGENET_MEAN, std=IMAGENET_STD)
    bytes_first = steps_manifest(
        tmp_path,
        [*head, "normalize: {mean: [127], std: [128], on_uint8: wrap}", "cast: {}", *tail],
    )
    by_key = {v.key: v for v in pitfalls.variants(bytes_first)}
    assert {"normalize:float", "normalize:uint8-saturate"} <= set(by_key)
    assert "normalize:uint8-wrap" not in by_key
    assert [s.op for s in by_key["normalize:float"].steps][3:5] == ["cast", "normalize"]


def test_decoder_flips_cover_every_backend_and_dct_method() -> None:
    m = load_manifest(EXAMPLE)
    decoders = [v for v in pitfalls.variants(m) if v.pitfall == pitfalls.DECODER]
    backends = pitfalls._choices(Decode, "backend")
    # numpy reads .npy arrays (mode bands): it decodes no image file, so it is no decoder flip.
    first_steps = [v.steps[0] for v in decoders]
    assert all(isinstance(step, Decode) for step in first_steps)
    assert {cast(Decode, step).backend for step in first_steps} == set(backends) - {"pil", "numpy"}
    if "dct_method" in {f.name for f in dataclasses.fields(Decode)}:  # the TensorFlow decoder
        assert any("dct" in v.key or "INTEGER" in pitfall_words(v.flip) for v in decoders)


def test_step_descriptions_read_as_the_manifest_diff_shows_values() -> None:
    assert pitfalls.describe_step(Crop(fraction=0.875)) == "crop: {fraction: 0.875}"
    assert pitfalls.describe_step(Decode(order="BGR")) == "decode: {order: 'BGR'}"


# --- running variants on one loaded model ---------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("onnxruntime")
    root = tmp_path_factory.mktemp("pitfalls")
    H.make_data(root / "data" / "blocks")
    (root / "manifests").mkdir()
    (root / "models").mkdir()
    (root / "manifests" / "blocks.sha256").write_text(H.checksums(root / "data" / "blocks"))
    w, b = H.classifier()
    sha = H.write_onnx(root / "models" / "m.onnx", w, b)
    (root / "manifests" / "m.yaml").write_text(H.manifest_text("blocks_model", "m.onnx", sha))
    manifest = load_manifest(root / "manifests" / "m.yaml")
    settings = Settings.for_project(root, data_mirrors=[root / "data"])
    dataset = resolve_dataset(manifest, settings)
    runner = load_runner(manifest, "cpu", settings)
    return root, manifest, settings, dataset, runner


class Counting:
    """A runner that counts the samples it is asked to run."""

    def __init__(self, runner) -> None:
        self.runner, self.samples, self.info = runner, 0, runner.info

    def check_batch(self, batch: np.ndarray, layout: str) -> None:
        self.runner.check_batch(batch, layout)

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        self.samples += len(batch)
        return self.runner(batch)


def test_shared_work_gives_what_each_variant_gives_on_its_own(tiny) -> None:
    _, manifest, _, dataset, runner = tiny
    found = pitfalls.variants(manifest)
    samples = dataset.samples[:10]
    counting = Counting(runner)
    outcomes = score_pipelines(counting, manifest, samples, [v.steps for v in found], chunk=4)
    for v, outcome in zip(found, outcomes):
        assert outcome.error is None, (v.key, outcome.error)
        variant = dataclasses.replace(
            manifest, inputs=(dataclasses.replace(manifest.input, preprocess=v.steps),)
        )
        # The variant's pipeline alone over the same samples, on the same loaded runner.
        subset = dataclasses.replace(dataset, samples=tuple(samples))
        alone = postprocessed(variant, run_model(runner, variant, subset))
        assert outcome.scores is not None
        # Batched in other groups than alone: float32 sums in another order (an atol of 1e-7
        # failed once on a loaded machine); a pipeline mixed up between variants moves far more.
        np.testing.assert_allclose(outcome.scores, alone, rtol=0, atol=1e-6, err_msg=v.key)
    # The OpenCV and Pillow decoders agree on PNG: that batch is not run again.
    assert counting.samples < len(found) * len(samples)


def test_a_variant_that_cannot_run_fails_alone(tiny) -> None:
    _, manifest, _, dataset, runner = tiny
    base = tuple(manifest.input.preprocess)
    too_big = (base[0], Crop(size=(400, 400)), *base[1:])  # larger than the images
    wrong_size = (*base[:2], Resize(size=(10, 10)), *base[3:])  # the model takes 12 × 12
    outcomes = score_pipelines(runner, manifest, dataset.samples[:4], [too_big, base, wrong_size])
    assert outcomes[0].scores is None and "crop" in (outcomes[0].error or "")
    assert outcomes[1].error is None and outcomes[1].scores is not None
    assert outcomes[2].scores is None and "model" in (outcomes[2].error or "")


def test_the_sensitivity_table(tiny, tmp_path: Path) -> None:
    _, manifest, _, dataset, runner = tiny
    table = sensitivity(manifest, runner, dataset.samples, dataset="blocks", describe=pitfall_words)
    assert table.declared.agreement == 1.0
    rows = {r.key: r for r in table.rows}
    assert set(rows) == {v.key for v in pitfalls.variants(manifest)}
    assert rows["colour:BGR"].agreement is not None and rows["colour:BGR"].agreement < 0.9
    assert rows["decode:opencv"].agreement == 1.0  # PNG decodes alike
    text = sensitivity_text(table)
    assert all(len(line) <= 100 for line in text.splitlines()), text
    assert "BGR instead of RGB" in text and f"on all {len(dataset.samples)} samples" in text
    path = table_path(tmp_path / "golden" / "blocks_model.json")
    assert path == tmp_path / "golden" / "pitfalls" / "blocks_model.json"
    save(path, table)
    saved = json.loads(path.read_text())
    assert saved["samples"] == len(dataset.samples)
    assert {r["key"]: r["agreement"] for r in saved["rows"]}["colour:BGR"] == round(
        rows["colour:BGR"].agreement, 6
    )
    # Read back as the report shows it: the same table, its figures rounded as saved.
    again = read(path)
    assert again is not None and again.rows[0].key == table.rows[0].key
    assert again.declared.top1 == round(table.declared.top1 or 0.0, 4)
    assert read(tmp_path / "none.json") is None
    del saved["declared"]
    path.write_text(json.dumps(saved))
    with pytest.raises(MlreproError, match=f"{re.escape(str(path))}: not a pitfall table"):
        read(path)
    only = sensitivity(
        manifest,
        runner,
        dataset.samples[:5],
        only=["colour order", "layout:reshape"],
        describe=pitfall_words,
    )
    assert [r.key for r in only.rows] == ["colour:BGR", "layout:reshape"]


# --- the mlrepro command --------------------------------------------------------------------

CONFTEST = """\
import shutil
from pathlib import Path

import pytest_mlrepro

MODEL = Path(__file__).parent / "source" / "m.onnx"


@pytest_mlrepro.artifact_builder("blocks_model")
def build(target: Path) -> None:
    shutil.copyfile(MODEL, target)
"""


@pytest.fixture
def cli_project(tmp_path: Path) -> Path:
    """A project whose model is made by an artifact builder registered in its conftest.py."""
    H.make_data(tmp_path / "data" / "blocks")
    (tmp_path / "manifests").mkdir()
    (tmp_path / "source").mkdir()
    (tmp_path / "manifests" / "blocks.sha256").write_text(H.checksums(tmp_path / "data" / "blocks"))
    w, b = H.classifier()
    sha = H.write_onnx(tmp_path / "source" / "m.onnx", w, b)
    text = H.manifest_text("blocks_model", "m.onnx", sha).replace(
        f"file: {{path: ../models/m.onnx, sha256: {sha}}}",
        f"file: {{cache: blocks.onnx, build: blocks_model, sha256: {sha}}}",
    )
    (tmp_path / "manifests" / "blocks.yaml").write_text(text)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmlrepro_data = data\nmlrepro_cache = .cache\n")
    return tmp_path


def mlrepro(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The command in this process (what it imports: a child process, below)."""
    return command_in_process(cwd, *args)


def test_the_command_prints_and_saves_the_table(cli_project: Path) -> None:
    done = mlrepro(cli_project, "pitfalls", "manifests/blocks.yaml", "--limit", "12", "--save")
    assert done.returncode == 0, done.stderr
    assert "12/12 samples" in done.stderr  # the progress, a line in a log (stderr no terminal)
    out = done.stdout
    assert "pitfall sensitivity of blocks_model (onnxruntime" in out
    assert "on the first 12 samples of blocks" in out
    assert "the declared pipeline" in out and "100.0%" in out
    grey_only = {pitfalls.INVERTED, pitfalls.GREY, pitfalls.DEPTH}  # a colour pipeline's table
    for category in pitfalls.CATEGORIES:
        assert (f"{category}:" in out) == (category not in grey_only)
    assert all(len(line) <= 100 for line in out.splitlines()), out
    assert out.rstrip().endswith("saved golden/pitfalls/blocks_model.json")
    saved = json.loads((cli_project / "golden" / "pitfalls" / "blocks_model.json").read_text())
    assert saved["limit"] == 12 and saved["samples"] == 12
    assert saved["environment"]["runtime"]["framework"] == "onnxruntime"


def test_the_command_registers_builders_only_from_conftest(cli_project: Path) -> None:
    bare = mlrepro(
        cli_project, "pitfalls", "manifests/blocks.yaml", "--limit", "4", "--no-conftest"
    )
    assert bare.returncode == 2  # the manifest names a builder nobody registered
    assert "no artifact builder 'blocks_model' is registered" in bare.stderr
    (cli_project / "conftest.py").rename(cli_project / "builders.py")
    explicit = mlrepro(
        cli_project, "pitfalls", "manifests/blocks.yaml", "--limit", "4", "--only", "colour order",
        "--conftest", "builders.py",
    )  # fmt: skip
    assert explicit.returncode == 0, explicit.stderr
    assert "BGR instead of RGB" in explicit.stdout and "layout:" not in explicit.stdout


def test_the_command_reports_usage_and_manifest_errors(cli_project: Path) -> None:
    missing = mlrepro(cli_project, "pitfalls", "manifests/nope.yaml")
    assert missing.returncode == 2 and "no such manifest" in missing.stderr
    (cli_project / "manifests" / "bad.yaml").write_text("name: bad\nversion: 1\n")
    bad = mlrepro(cli_project, "pitfalls", "manifests/bad.yaml")
    assert bad.returncode == 2 and "manifests/bad.yaml" in bad.stderr


def test_the_diagnose_command(cli_project: Path) -> None:
    """It names the golden as the project does, the changed samples with their class names,
    and the command that records this manifest's golden (a bare pytest collects tests/)."""
    pytest.importorskip("onnxruntime")
    data = cli_project / "data" / "blocks"
    (data / "names.txt").write_text("".join(f"digit {i}\n" for i in range(H.CLASSES)))
    (cli_project / "manifests" / "blocks.sha256").write_text(H.checksums(data))
    path = cli_project / "manifests" / "blocks.yaml"
    named = path.read_text().replace("classes: 10}", "classes: 10, class_names: names.txt}")
    path.write_text(named)
    missing = mlrepro(cli_project, "diagnose", "manifests/blocks.yaml")
    assert missing.returncode != 0
    assert (
        "no golden at golden/blocks_model.json: record one with "
        "pytest manifests/blocks.yaml --mlrepro-update"
    ) in missing.stderr + missing.stdout
    recorded = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--mlrepro-update",
         "manifests/blocks.yaml"],
        cwd=cli_project, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S,
        env={k: v for k, v in os.environ.items() if k not in ("MLREPRO_DATA", "MLREPRO_CACHE")},
    )  # fmt: skip
    assert recorded.returncode == 0, recorded.stdout
    same = mlrepro(cli_project, "diagnose", "manifests/blocks.yaml")
    assert same.returncode == 0, same.stdout + same.stderr
    assert "matches its golden (golden/blocks_model.json)" in same.stdout
    path.write_text(
        path.read_text().replace("method: bilinear, backend: pil", "method: nearest, backend: pil")
    )
    drift = mlrepro(cli_project, "diagnose", "manifests/blocks.yaml", "--probes", "12")
    assert drift.returncode == 1, drift.stderr
    flat = " ".join(drift.stdout.split())
    assert (
        "Likely cause: resize — the manifest changed resize.method from 'bilinear' to 'nearest'"
        in flat
    )
    assert "golden: golden/blocks_model.json " in flat and str(cli_project) not in flat
    assert "record a new golden: pytest manifests/blocks.yaml --mlrepro-update" in flat
    assert re.search(r"img\d\d\.png: (\d) digit \1 \(\d\.\d{3}\) → (\d) digit \2", flat), flat


def test_the_command_imports_only_the_framework_the_manifest_needs(cli_project: Path) -> None:
    """An ONNX manifest's table needs ONNX Runtime: TensorFlow's decoder and resize flips (an
    import of seconds, with its log noise) are left out, and the output says so and how to
    include them."""
    pytest.importorskip("tensorflow")
    code = (
        "import sys\n"
        "from pytest_mlrepro.cli import main\n"
        "status = main(sys.argv[1:])\n"
        "print('imported tensorflow:', 'tensorflow' in sys.modules)\n"
        "raise SystemExit(status)\n"
    )
    args = ["pitfalls", "manifests/blocks.yaml", "--limit", "6"]
    env = {k: v for k, v in os.environ.items() if k not in ("MLREPRO_DATA", "MLREPRO_CACHE")}

    def run(*more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", code, *args, *more],
            cwd=cli_project, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, env=env,
        )  # fmt: skip

    plain = run()
    assert plain.returncode == 0, plain.stderr
    assert "imported tensorflow: False" in plain.stdout
    assert "TensorFlow" not in plain.stdout.split("left out:")[0]
    assert "left out: flips to TensorFlow" in plain.stdout
    assert "include them with --backend tf" in plain.stdout
    assert all(len(line) <= 100 for line in plain.stdout.splitlines()), plain.stdout

    # Asked for, they are in the table (in this process: what a child imports is the subject
    # above only).
    asked = command_in_process(cli_project, *args, "--backend", "tf")
    assert asked.returncode == 0, asked.stderr
    assert "decode:tf" in asked.stdout or "TensorFlow" in asked.stdout
    assert "left out:" not in asked.stdout


def test_the_command_imports_no_framework() -> None:
    """The command is pytest's configuration with another action: it imports pytest, but no
    framework until a manifest needs one."""
    code = (
        "import sys, pytest_mlrepro.cli; "
        "print('torch' in sys.modules, 'onnxruntime' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=CHILD_TIMEOUT_S
    )
    assert done.stdout.split() == ["False", "False"], done.stderr
