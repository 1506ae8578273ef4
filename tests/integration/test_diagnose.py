"""Drift diagnosis: every known pitfall, as a manifest edit and as a model-side change with the
manifest's preprocessing untouched, must be named first by the report.

The scenarios run in-process on the tiny project of ``diag_helpers.py`` (block images, linear
ONNX classifiers): a golden is recorded with one manifest and model, then the manifest or the
model changes, the evaluation drifts, and :func:`diagnose` must name the cause. The plugin-level
tests at the end check, through pytester (serial and ``-n 2``), that the diagnosis appears in a
failure and only there.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import diag_helpers as H
import numpy as np
import pytest
from helpers import PREPROCESS_BGR, PREPROCESS_RGB, Project

from pytest_mlrepro.diagnosis import Evidence, Section, record_layer_fingerprints
from pytest_mlrepro.diagnosis import _pitfalls as pitfalls
from pytest_mlrepro.diagnosis import _step_fingerprints as probes
from pytest_mlrepro.diagnosis._explain import DriftDiagnosis, diagnose
from pytest_mlrepro.diagnosis._manifest_diff import manifest_diff
from pytest_mlrepro.diagnosis._probe_trials import probe_order
from pytest_mlrepro.evaluation._evaluate import Evaluation, evaluate
from pytest_mlrepro.fingerprint import environment
from pytest_mlrepro.goldens import _store as golden_store
from pytest_mlrepro.goldens._metrics import Comparison, compare
from pytest_mlrepro.manifest._spec import load_manifest
from pytest_mlrepro.pipeline import _decode as decoders
from pytest_mlrepro.pipeline import _steps as pipeline
from pytest_mlrepro.report import DIAGNOSIS_WORDING as WORDING
from pytest_mlrepro.settings import Settings

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

B = H.BASE_STEPS
DECODE_BGR = "decode: {backend: pil, order: BGR, exif_orientation: false}"
DECODE_OPENCV = "decode: {backend: opencv, order: RGB, exif_orientation: false}"
DECODE_EXIF = "decode: {backend: pil, order: RGB, exif_orientation: true}"
RESIZE_NEAREST = "resize: {size: [12, 12], method: nearest, backend: pil}"
RESIZE_OPENCV = "resize: {size: [12, 12], method: bilinear, backend: opencv}"
LAYOUT_RESHAPE = "layout: {order: NCHW, method: reshape}"
CAST = "cast: {dtype: float32}"
SCALE = "scale: {divisor: 255}"
IMAGENET = "normalize: {mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}"
NORM_127 = "normalize: {mean: [127, 127, 127], std: [128, 128, 128]}"
IMAGENET_MEAN = np.array(pipeline.IMAGENET_MEAN)
IMAGENET_STD = np.array(pipeline.IMAGENET_STD)


def values(*middle: str) -> list[str]:
    """The base pipeline with its cast + normalize replaced by ``middle``."""
    return [*B[:3], *middle, B[5]]


# --- the in-process lab ---------------------------------------------------------------------


@dataclass
class Run:
    diagnosis: DriftDiagnosis
    comparison: Comparison
    evaluation: Evaluation


class Lab:
    """The tiny project: data sets, models and manifests under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "models").mkdir(parents=True)
        (root / "manifests").mkdir()
        for kind, name in (
            ("png", "blocks"),
            ("smooth", "smooth"),
            ("exif", "exif"),
            ("cmyk", "cmyk"),
        ):
            H.make_data(root / "data" / name, kind)
            (root / "manifests" / f"{name}.sha256").write_text(H.checksums(root / "data" / name))
        self.settings = Settings.for_project(root, data_mirrors=[root / "data"])
        self.count = 0

    def model(
        self,
        smooth: bool = False,
        adapter: Callable[[np.ndarray], np.ndarray] | None = None,
        pre: str | None = None,
        seed: int = 3,
    ) -> tuple[str, str]:
        """(file name, sha256) of a classifier, optionally behind an input adapter."""
        w, b = H.classifier(seed=seed, smooth=smooth)
        if adapter is not None:
            w, b = H.fold(w, b, adapter)
        self.count += 1
        name = f"m{self.count}.onnx"
        return name, H.write_onnx(self.root / "models" / name, w, b, pre=pre)

    def manifest(self, text: str) -> Any:
        self.count += 1
        path = self.root / "manifests" / f"m{self.count}.yaml"
        path.write_text(text)
        return load_manifest(path)

    def record(self, text: str, n: int = 8) -> golden_store.Golden:
        """A golden as ``--mlrepro-update`` records it (results, manifest, environment,
        step probes and layer fingerprints), through a write and a read of the golden file."""
        m = self.manifest(text)
        ev = evaluate(m, "cpu", self.settings)
        step_probes = probes.record(m.input.preprocess, ev.samples, n)
        if step_probes is not None:
            layers = record_layer_fingerprints(ev.runner, m, ev.samples, step_probes["samples"])
            if layers is not None:
                step_probes["layers"] = layers
        golden = golden_store.Golden(
            m.name, m.normalized(), environment(ev.runner_info), ev.results, step_probes
        )
        path = self.root / "golden.json"
        golden_store.write(path, golden)
        read = golden_store.read(path)
        assert read is not None
        return read

    def check(self, golden: golden_store.Golden, text: str, n: int = 24) -> Run:
        m = self.manifest(text)
        ev = evaluate(m, "cpu", self.settings)
        comparison = compare(golden.results, ev.results, ev.scores, m.tolerances)
        assert not comparison.ok, "the scenario must drift"
        return Run(diagnose(m, golden, comparison, ev, wording=WORDING, probes=n), comparison, ev)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Lab:
    return Lab(tmp_path_factory.mktemp("diag-lab"))


def lead_of(run: Run) -> str:
    return run.diagnosis.lead


def assert_readable(text: str) -> None:
    long = [line for line in text.splitlines() if len(line) > 100]
    assert not long, long


# --- manifest edits -------------------------------------------------------------------------

# name: (data set, golden steps, edited steps, expected category, words the lead must contain)
MANIFEST_EDITS: dict[str, tuple[str, list[str], list[str], str, tuple[str, ...]]] = {
    "colour order": (
        "blocks", B, H.replace_step(B, 0, DECODE_BGR), pitfalls.COLOUR,
        ("decode.order from 'RGB' to 'BGR'", "with RGB instead of BGR"),
    ),
    "crop off": (
        "blocks", B, [B[0], *B[2:]], pitfalls.CROP,
        ("removed the step crop", "put back"),
    ),
    "crop fraction": (
        "blocks", B, H.replace_step(B, 1, "crop: {fraction: 1.0, rounding: google}"),
        pitfalls.CROP, ("crop.fraction from 0.75 to 1",),
    ),
    "interpolation": (
        "blocks", B, H.replace_step(B, 2, RESIZE_NEAREST), pitfalls.RESIZE,
        ("resize.method from 'bilinear' to 'nearest'", "Pillow bilinear instead of Pillow nearest"),
    ),
    "antialias and backend": (
        "blocks", B, H.replace_step(B, 2, RESIZE_OPENCV), pitfalls.RESIZE,
        ("resize.backend from 'pil' to 'opencv'", "Pillow bilinear instead of OpenCV INTER_LINEAR"),
    ),
    "decoder": (
        "cmyk", B, H.replace_step(B, 0, DECODE_OPENCV), pitfalls.DECODER,
        ("decode.backend from 'pil' to 'opencv'", "the Pillow decoder instead of OpenCV"),
    ),
    "EXIF orientation": (
        "exif", B, H.replace_step(B, 0, DECODE_EXIF), pitfalls.EXIF,
        ("decode.exif_orientation from False to True", "the EXIF orientation ignored"),
    ),
    "layout": (
        "blocks", B, H.replace_step(B, 5, LAYOUT_RESHAPE), pitfalls.LAYOUT,
        ("layout.method from 'transpose' to 'reshape'", "a transpose to NCHW instead of a reshape"),
    ),
    "normalisation order (saturate)": (
        "blocks", B, values(NORM_127[:-1] + ", on_uint8: saturate}", CAST), pitfalls.NORM_ORDER,
        ("moved the normalize step", "normalised in float after the cast"),
    ),
    "normalisation order (wrap)": (
        "blocks", B, values(NORM_127[:-1] + ", on_uint8: wrap}", CAST), pitfalls.NORM_ORDER,
        ("normalize.on_uint8 from 'error' to 'wrap'", "normalised in float after the cast"),
    ),
    "ImageNet mean/std": (
        "blocks", B, values(CAST, SCALE, IMAGENET), pitfalls.MEAN_STD,
        ("normalize.mean from [127, 127, 127] to [0.485, 0.456, 0.406]",),
    ),
    "x/255 only": (
        "blocks", B, values(CAST, SCALE), pitfalls.MEAN_STD, ("added the step scale",),
    ),
    "mean/std units (a /255 added)": (
        "blocks", B, values(CAST, SCALE, NORM_127), pitfalls.MEAN_STD,
        ("added the step scale", "the /255 dropped"),
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", list(MANIFEST_EDITS))
def test_a_manifest_edit_is_named_first(lab: Lab, name: str) -> None:
    dataset, before, after, category, words = MANIFEST_EDITS[name]
    model, sha = lab.model()
    golden = lab.record(H.manifest_text("edit", model, sha, before, dataset))
    run = lab.check(golden, H.manifest_text("edit", model, sha, after, dataset))
    d = run.diagnosis
    assert d.cause == category, d.render()
    assert d.lead.startswith(f"Likely cause: {category} — the manifest "), d.lead
    for word in words:
        assert word in d.lead, d.render()
    # The flip that undoes the edit reproduces the golden on every probe, scores included.
    assert f"{d.probes}/{d.probes} probe predictions match the golden and their scores" in d.lead
    assert d.probes == min(24, H.N_SAMPLES)
    text = d.render()
    assert_readable(text)
    assert text.splitlines()[1].startswith("  Likely cause:")


# --- model-side changes, the manifest's preprocessing untouched -----------------------------

OPENCV_BASE = H.replace_step(B, 2, RESIZE_OPENCV)


@dataclass
class ModelSide:
    """The golden's model (``golden_*``) and the re-exported one (``now_*``): the re-export
    expects the pitfall's preprocessing; the manifest's steps stay ``steps``."""

    category: str
    words: tuple[str, ...]  # each must be in the lead ("a | b": one of them)
    dataset: str = "blocks"
    steps: tuple[str, ...] = tuple(B)
    smooth: bool = False
    golden_pre: str | None = None
    now_adapter: Callable[[np.ndarray], np.ndarray] | None = None
    exact: bool = True  # the re-export undoes the pitfall exactly (else: approximately)


MODEL_SIDE: dict[str, ModelSide] = {
    "colour order": ModelSide(
        pitfalls.COLOUR, ("BGR instead of RGB",), now_adapter=H.flip_channels
    ),
    "crop off": ModelSide(
        pitfalls.CROP, ("no crop",), "smooth", smooth=True, exact=False,
        now_adapter=H.crop_resample(1.5, 15 / 5.5, 9, 36 / 5.5),
    ),
    "crop fraction": ModelSide(
        pitfalls.CROP, ("crop fraction 1.0 instead of 0.75",), "smooth", smooth=True, exact=False,
        now_adapter=H.crop_resample(1.5, 1.5, 9, 9),
    ),
    "interpolation": ModelSide(
        pitfalls.RESIZE, ("Pillow nearest instead of Pillow bilinear",), exact=False,
        now_adapter=H.block_blur,
    ),
    "antialias and backend": ModelSide(
        # When TensorFlow is loaded, its antialiased bilinear (no uint8 rounding) fits better.
        pitfalls.RESIZE, (
            "Pillow bilinear instead of OpenCV INTER_LINEAR"
            " | TensorFlow bilinear with antialias instead of OpenCV INTER_LINEAR",
        ),
        steps=tuple(OPENCV_BASE), exact=False, now_adapter=H.block_unblur,
    ),
    "EXIF orientation": ModelSide(
        pitfalls.EXIF, ("the EXIF orientation applied",), "exif", exact=False,
        now_adapter=H.rotate_back,
    ),
    "layout": ModelSide(
        pitfalls.LAYOUT, ("the NHWC buffer reshaped as NCHW instead of transposed",),
        now_adapter=H.unreshape,
    ),
    "normalisation order (saturate)": ModelSide(
        pitfalls.NORM_ORDER, ("normalised in uint8 before the cast (saturate)",), golden_pre="relu",
    ),
    "normalisation order (wrap)": ModelSide(
        pitfalls.NORM_ORDER, ("normalised in uint8 before the cast (wrap)",), golden_pre="wrap",
    ),
    "ImageNet mean/std": ModelSide(
        pitfalls.MEAN_STD, ("ImageNet mean/std",),
        now_adapter=H.affine(
            list(IMAGENET_STD * 255 / 128), list((IMAGENET_MEAN * 255 - 127) / 128)
        ),
    ),
    "x/255 only": ModelSide(
        pitfalls.MEAN_STD, ("x/255 only instead of (x − 127) / 128",),
        now_adapter=H.affine([255 / 128] * 3, [-127 / 128] * 3),
    ),
    "mean/std units (a /255 added)": ModelSide(
        pitfalls.MEAN_STD, ("(x/255 − 127) / 128 (a /255 added",),
        now_adapter=H.affine([255.0] * 3, [(127 * 255 - 127) / 128] * 3),
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", list(MODEL_SIDE))
def test_a_model_side_change_is_named_first(lab: Lab, name: str) -> None:
    case = MODEL_SIDE[name]
    golden_model, golden_sha = lab.model(case.smooth, pre=case.golden_pre)
    now_model, now_sha = lab.model(case.smooth, adapter=case.now_adapter)
    golden = lab.record(H.manifest_text("side", golden_model, golden_sha, case.steps, case.dataset))
    run = lab.check(golden, H.manifest_text("side", now_model, now_sha, case.steps, case.dataset))
    d = run.diagnosis
    assert d.cause == case.category, d.render()
    # Preprocessing is untouched: the manifest diff names the model only ...
    assert f"the model changed (model.file.sha256: {golden_sha[:12]}… → {now_sha[:12]}…)" in d.lead
    assert "preprocess" not in "\n".join(d.sections[0][1])
    # ... and the step fingerprints say every step's output is as recorded.
    assert "every step's output is identical to the golden's on 8 probes" in d.render()
    for word in case.words:  # "a | b": either
        assert any(choice in d.lead for choice in word.split(" | ")), d.render()
    assert f"{d.probes}/{d.probes} probe predictions match the golden" in d.lead
    if case.exact:
        assert "their scores are within tolerance" in d.lead
    assert_readable(d.render())


def test_a_decoder_change_in_the_environment_is_named_with_the_library(
    lab: Lab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Manifest and model untouched; the golden was recorded where "Pillow" decoded CMYK JPEGs
    like OpenCV does (simulated: another decoder build behind the same manifest)."""
    model, sha = lab.model()
    text = H.manifest_text("env", model, sha, B, "cmyk")
    with monkeypatch.context() as patch:
        # Pillow's decode replaced by OpenCV's (BGR, flipped to the same RGB order).
        patch.setattr(decoders, "_mode_pil", lambda *a: decoders._mode_opencv(*a)[..., ::-1])
        golden = lab.record(text)
    env = dict(golden.environment, libjpeg="8.0", pillow="12.1.0")
    golden = golden_store.Golden(golden.name, golden.manifest, env, golden.results, golden.probes)
    run = lab.check(golden, text)
    d = run.diagnosis
    # The manifest is the golden's: what the decode step runs on changed (issue 33), and the
    # flip that restores the output is a workaround, said second.
    assert d.cause == "environment", d.render()
    assert d.lead.startswith(
        "Likely cause: the environment — the manifest is unchanged, and the decode step's output "
        "differs from the golden's"
    ), d.lead
    assert "Pillow changed: libjpeg '8.0' →" in d.lead
    assert "pillow '12.1.0' →" in d.lead
    flip = "with the OpenCV decoder instead of Pillow"
    assert d.lead.index("Pillow changed") < d.lead.index(flip)
    text_out = d.render()
    assert (
        "with the golden's own recorded pipeline, this machine's decode output differs" in text_out
    )
    assert "pillow: '12.1.0' →" in text_out
    assert_readable(text_out)


@pytest.mark.skipif(
    "dct_method" not in {f.name for f in pipeline.Decode.__dataclass_fields__.values()},
    reason="the TensorFlow decoder (dct_method) is not in this pipeline",
)
def test_the_tf_decoders_dct_method_is_a_decoder_pitfall(lab: Lab) -> None:
    pytest.importorskip("tensorflow")
    model, sha = lab.model()
    accurate = (
        "decode: {backend: tf, order: RGB, exif_orientation: false, dct_method: INTEGER_ACCURATE}"
    )
    fast = accurate.replace("INTEGER_ACCURATE", "INTEGER_FAST")
    golden = lab.record(H.manifest_text("dct", model, sha, H.replace_step(B, 0, accurate), "cmyk"))
    run = lab.check(golden, H.manifest_text("dct", model, sha, H.replace_step(B, 0, fast), "cmyk"))
    assert run.diagnosis.cause == pitfalls.DECODER, run.diagnosis.render()
    assert "dct_method" in run.diagnosis.lead


# --- what is not a pitfall ------------------------------------------------------------------


def test_another_model_is_blamed_on_the_model_when_no_flip_brings_it_back(lab: Lab) -> None:
    model, sha = lab.model()
    other, other_sha = lab.model(seed=11)
    golden = lab.record(H.manifest_text("other", model, sha))
    d = lab.check(golden, H.manifest_text("other", other, other_sha)).diagnosis
    assert d.cause == "model", d.render()
    assert d.lead.startswith("Likely cause: the model — preprocessing is identical"), d.lead
    assert "no known pitfall brings the predictions back" in d.lead
    assert not [line for line in d.render().splitlines() if line.startswith("    ✓")]


def test_a_golden_without_probes_still_gets_a_diagnosis(lab: Lab) -> None:
    model, sha = lab.model()
    golden = lab.record(H.manifest_text("old", model, sha), n=0)
    assert golden.probes is None
    d = lab.check(
        golden, H.manifest_text("old", model, sha, H.replace_step(B, 0, DECODE_BGR))
    ).diagnosis
    assert d.cause == pitfalls.COLOUR
    assert "the golden keeps no step fingerprints (re-record it with --mlrepro-update" in d.render()


def test_counterfactuals_can_be_turned_off(lab: Lab) -> None:
    model, sha = lab.model()
    golden = lab.record(H.manifest_text("noflips", model, sha))
    m = lab.manifest(H.manifest_text("noflips", model, sha, H.replace_step(B, 2, RESIZE_NEAREST)))
    ev = evaluate(m, "cpu", lab.settings)
    c = compare(golden.results, ev.results, ev.scores, m.tolerances)
    d = diagnose(m, golden, c, ev, wording=WORDING, probes=0)
    assert d.counterfactuals == 0
    assert "counterfactual probes are turned off" in d.render()
    # Without flips the manifest diff and the step fingerprints still name the edit.
    assert d.cause == pitfalls.RESIZE, d.render()
    assert "resize: mean |Δ|" in d.render()


def test_the_words_are_the_wording_handed_in(lab: Lab) -> None:
    """diagnosis/ gathers facts; the words are the report's, handed in: another wording, other
    words, for the failure's text and for the sections the results file keeps alike."""
    model, sha = lab.model()
    golden = lab.record(H.manifest_text("worded", model, sha))
    m = lab.manifest(H.manifest_text("worded", model, sha, H.replace_step(B, 2, RESIZE_NEAREST)))
    ev = evaluate(m, "cpu", lab.settings)
    c = compare(golden.results, ev.results, ev.scores, m.tolerances)
    kinds: list[str] = []

    def section(evidence: Evidence) -> Section:
        kinds.append(type(evidence).__name__)
        return f"custom {type(evidence).__name__}:", ["a line"]

    custom = dataclasses.replace(WORDING, section=section)
    found = diagnose(m, golden, c, ev, wording=custom, probes=0)
    text = found.render()
    assert found.cause == pitfalls.RESIZE, text
    assert "  custom ManifestEvidence:\n    a line" in text
    assert "  custom EnvironmentEvidence:" in text
    assert "manifest diff against" not in text  # the report's own words are not used
    assert [title for title, _ in found.sections][:2] == [
        "custom ManifestEvidence:",
        "custom StepEvidence:",
    ]
    assert {"ManifestEvidence", "StepEvidence", "EnvironmentEvidence"} <= set(kinds)
    # The report's wording, handed in the same way, says it in its own words.
    text = diagnose(m, golden, c, ev, wording=WORDING, probes=0).render()
    assert "manifest diff against the manifest the golden was recorded with:" in text
    assert "custom" not in text
    # A diagnosis that fails says why instead of raising: the verdict stands on its own.
    failed = diagnose(m, golden, cast(Any, None), ev, wording=WORDING, probes=0)
    assert failed.cause == "error" and not failed.layer_rows
    assert failed.render().startswith("diagnosis failed (AttributeError: "), failed.render()


def test_manifest_diff_sees_moves_and_ignores_what_cannot_move_outputs() -> None:
    base = {
        "name": "x",
        "runtime": {"batch_size": 32, "intra_op_threads": None},
        "inputs": [
            {
                "preprocess": [
                    {"decode": {"order": "RGB"}},
                    {"cast": {}},
                    {"normalize": {"on_uint8": "error"}},
                ]
            }
        ],
    }
    edited = json.loads(json.dumps(base))
    edited["runtime"] = {"batch_size": 1, "intra_op_threads": 2}
    edited["inputs"][0]["preprocess"] = [
        {"decode": {"order": "BGR"}},
        {"normalize": {"on_uint8": "saturate"}},
        {"cast": {}},
    ]
    changes = {c.path: c for c in manifest_diff(base, edited)}
    assert changes["runtime.batch_size"].area == "neutral"
    assert changes["runtime.intra_op_threads"].area == "neutral"
    assert changes["inputs[0].preprocess[0].decode.order"].category == pitfalls.COLOUR
    assert changes["inputs[0].preprocess[1].normalize.on_uint8"].category == pitfalls.NORM_ORDER
    moved = [c for c in changes.values() if c.moved]
    assert {c.moved for c in moved} == {"normalize", "cast"}
    assert all(c.category == pitfalls.NORM_ORDER for c in moved)


def test_probes_are_stable_and_mix_changed_and_unchanged_samples() -> None:
    ids = [f"img{i:03d}.png" for i in range(200)]
    changed = ids[::7]
    order = probe_order(ids, 16, changed)
    assert len(order) == 16 and len(set(order)) == 16
    assert order == probe_order(list(reversed(ids)), 16, changed)  # independent of data order
    assert [i in changed for i in order[:8]] == [True, False] * 4  # any prefix holds both kinds
    assert probes.select(ids, 8) == probes.select(ids[::-1], 8)
    assert probes.select(ids, 0) == []


# --- causes inside the model, or in the data ------------------------------------------------------


def _copy_data(lab: Lab, name: str) -> Path:
    """A copy of the ``blocks`` data set as ``name`` (its own checksum list), to be edited."""
    import shutil

    folder = lab.root / "data" / name
    shutil.copytree(lab.root / "data" / "blocks", folder)
    _accept(lab, name)
    return folder


def _accept(lab: Lab, name: str) -> None:
    """The checksum list made anew: the owner accepts the edited data."""
    (lab.root / "manifests" / f"{name}.sha256").write_text(H.checksums(lab.root / "data" / name))


def _with_data(golden: golden_store.Golden, folder: Path) -> golden_store.Golden:
    """The golden with the sha256 of the files it was measured on, as a plugin run records."""
    files = {p.name: H.sha256(p) for p in folder.iterdir() if p.suffix in (".png", ".jpg")}
    return golden_store.Golden(
        golden.name, golden.manifest, golden.environment, golden.results, golden.probes, files
    )


def _check_data(lab: Lab, golden: golden_store.Golden, text: str, folder: Path) -> DriftDiagnosis:
    """Diagnose the run of ``text`` with the data change the plugin would pass."""
    from pytest_mlrepro.goldens import data_change

    m = lab.manifest(text)
    ev = evaluate(m, "cpu", lab.settings)
    c = compare(golden.results, ev.results, ev.scores, m.tolerances)
    now = {p.name: H.sha256(p) for p in folder.iterdir()}
    change = data_change(golden, ev.results, now)
    assert change.changed
    return diagnose(m, golden, c, ev, wording=WORDING, probes=24, data=change)


def test_a_model_with_the_normalisation_built_in_is_found_by_dropping_the_manifest_step(
    lab: Lab,
) -> None:
    """The new model normalises its input itself, so the manifest's normalize runs twice:
    dropping the manifest's step brings every probe back, and leads."""
    model, sha = lab.model()
    built_in, built_in_sha = lab.model(adapter=H.affine([1 / 128] * 3, [-127 / 128] * 3))
    golden = lab.record(H.manifest_text("twice", model, sha))
    d = lab.check(golden, H.manifest_text("twice", built_in, built_in_sha)).diagnosis
    assert d.cause == pitfalls.MEAN_STD, d.render()
    assert d.lead.startswith(f"Likely cause: {pitfalls.MEAN_STD} — the model changed"), d.lead
    assert "with the manifest's normalize: {mean: [127, 127, 127], std: [128, 128, 128]}" in d.lead
    assert "dropped (the new model does it itself), 24/24 probe predictions match" in d.lead
    assert_readable(d.render())


def test_exchanged_classes_are_named_as_the_permutation(lab: Lab) -> None:
    model, sha = lab.model()
    w, b = H.classifier()
    w[:, [2, 5]], b[[2, 5]] = w[:, [5, 2]], b[[5, 2]]
    swapped = lab.root / "models" / "swapped.onnx"
    swapped_sha = H.write_onnx(swapped, w, b)
    golden = lab.record(H.manifest_text("swap", model, sha))
    d = lab.check(golden, H.manifest_text("swap", "swapped.onnx", swapped_sha)).diagnosis
    assert d.cause == "class permutation", d.render()
    assert d.lead.startswith("Likely cause: the model's output classes — the model changed"), d.lead
    assert "its output classes are permuted (2 ↔ 5): on all 24 samples" in d.lead


def test_the_score_transform_leads_when_the_model_file_changed_with_the_same_outputs(
    lab: Lab,
) -> None:
    """Softmax turned off and the model rebuilt elsewhere (another file, identical outputs):
    the score transform is the cause, the model file comes second."""
    import onnx

    model, sha = lab.model()
    rebuilt = onnx.load(str(lab.root / "models" / model))
    rebuilt.doc_string = "rebuilt on another CPU"
    onnx.save(rebuilt, str(lab.root / "models" / "rebuilt.onnx"))
    rebuilt_sha = H.sha256(lab.root / "models" / "rebuilt.onnx")
    golden = lab.record(H.manifest_text("soft", model, sha))
    d = lab.check(
        golden,
        H.manifest_text("soft", "rebuilt.onnx", rebuilt_sha, extra="postprocess: {softmax: false}"),
    ).diagnosis
    assert d.cause == "score transform", d.render()
    assert d.lead.startswith("Likely cause: the score transform — the ranking is identical"), d.lead
    assert "the model changed (model.file.sha256" in d.lead
    assert "too, with the same ranking." in d.lead


def test_the_header_counts_the_probes_every_line_counts(lab: Lab) -> None:
    model, sha = lab.model()
    other, other_sha = lab.model(seed=11)
    golden = lab.record(H.manifest_text("count", model, sha))
    text = lab.check(golden, H.manifest_text("count", other, other_sha)).diagnosis.render()
    first = next(line for line in text.splitlines() if "as the manifest is now:" in line)
    assert "/24 match" in first
    assert (
        text.splitlines()[0].startswith("diagnosis (")
        and " on 24 probe samples, 8 first, " in (text.splitlines()[0])
    )


def test_a_label_change_names_the_data_and_ticks_no_flip_that_changes_nothing(lab: Lab) -> None:
    """One label changed: every prediction is the golden's, so every flip that changes nothing
    on the probes matches them all; none of them is marked as reproducing the golden."""
    folder = _copy_data(lab, "relabel")
    model, sha = lab.model()
    golden = _with_data(lab.record(H.manifest_text("lbl", model, sha, dataset="relabel")), folder)
    labels = folder / "labels.csv"
    labels.write_text(labels.read_text().replace("img05.png,5", "img05.png,6"))
    _accept(lab, "relabel")
    d = _check_data(lab, golden, H.manifest_text("lbl", model, sha, dataset="relabel"), folder)
    assert d.cause == "data"
    assert d.lead.startswith("Likely cause: the data — the label of 1 sample of 24 changed "
                             "(img05.png 5 → 6)"), d.lead  # fmt: skip
    text = d.render()
    flat = " ".join(text.split())
    assert "with the EXIF orientation applied: 24/24 match (max score diff" in flat
    assert "the same outputs as the manifest as it is)" in flat  # the no-op flips, named so
    assert not [line for line in text.splitlines() if line.strip().startswith("✓")], text


def test_photos_replaced_by_rotated_copies_lead_with_the_exif_orientation(lab: Lab) -> None:
    """Half the photos replaced by copies stored rotated with EXIF orientation 6: the data
    changed, and applying the EXIF orientation brings every probe back: that leads."""
    from PIL import Image

    folder = _copy_data(lab, "rotated")
    model, sha = lab.model()
    golden = _with_data(lab.record(H.manifest_text("rot", model, sha, dataset="rotated")), folder)
    for index in range(0, H.N_SAMPLES, 2):
        path = folder / f"img{index:02d}.png"
        image = Image.open(path)
        exif = Image.Exif()
        exif[0x0112] = 6  # a viewer turns it 90° clockwise: stored 90° counter-clockwise
        image.transpose(Image.Transpose.ROTATE_90).save(path, exif=exif.tobytes())
    _accept(lab, "rotated")
    d = _check_data(lab, golden, H.manifest_text("rot", model, sha, dataset="rotated"), folder)
    assert d.cause == "data", d.render()
    assert d.lead.startswith(
        f"Likely cause: {pitfalls.EXIF}, in the changed data — 12 files of 24 have other content"
    ), d.lead
    assert "with the EXIF orientation applied" in d.lead and "24/24 probe predictions" in d.lead
    assert_readable(d.render())


def _conv_net(
    path: Path, scale_middle: float = 1.0, prefix: str = "", qdq: float | None = None
) -> str:
    """A small real convolutional ONNX model on the (3, 12, 12) input: three Conv + Relu, a
    global average pool and a linear head; ``scale_middle`` perturbs the middle Conv's weights;
    ``prefix`` renames every node and tensor (a re-export). Returns its sha256."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(5)
    w1 = rng.normal(0, 0.3, (8, 3, 3, 3))
    w2 = rng.normal(0, 0.2, (8, 8, 3, 3))
    w2[0] *= scale_middle  # one output channel of the middle Conv
    w3 = rng.normal(0, 0.2, (8, 8, 3, 3))
    head = rng.normal(0, 1.0, (8, H.CLASSES))
    p = prefix
    inits = [
        numpy_helper.from_array(a.astype(np.float32), p + n)
        for a, n in ((w1, "w1"), (w2, "w2"), (w3, "w3"), (head, "head"))
    ]
    nodes = []
    source = "input"
    for i in (1, 2, 3):
        nodes.append(
            helper.make_node(
                "Conv", [source, f"{p}w{i}"], [f"{p}conv{i}"], name=f"{p}conv{i}", pads=[1] * 4
            )
        )
        nodes.append(helper.make_node("Relu", [f"{p}conv{i}"], [f"{p}relu{i}"], name=f"{p}relu{i}"))
        source = f"{p}relu{i}"
        if i == 1 and qdq is not None:  # the activations quantised to uint8 with scale ``qdq``
            inits += [
                numpy_helper.from_array(np.array(qdq, np.float32), "qscale"),
                numpy_helper.from_array(np.array(0, np.uint8), "qzero"),
            ]
            nodes += [
                helper.make_node("QuantizeLinear", [source, "qscale", "qzero"], ["q1"], name="q1"),
                helper.make_node(
                    "DequantizeLinear", ["q1", "qscale", "qzero"], ["dq1"], name="dq1"
                ),
            ]
            source = "dq1"
    nodes += [
        helper.make_node("GlobalAveragePool", [source], [f"{p}pool"], name=f"{p}pool"),
        helper.make_node("Flatten", [f"{p}pool"], [f"{p}flat"], name=f"{p}flat"),
        helper.make_node("MatMul", [f"{p}flat", f"{p}head"], ["logits"], name=f"{p}head"),
    ]
    graph = helper.make_graph(
        nodes,
        "convnet",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, H.SIDE, H.SIDE])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", H.CLASSES])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return H.sha256(path)


def test_a_perturbed_middle_conv_is_named_by_the_layer_fingerprints(lab: Lab) -> None:
    """A real ONNX model whose middle Conv's weights were perturbed: preprocessing is identical,
    no flip brings it back, and the layer fingerprints name that node as the first whose output
    differs, with how much, and that the difference carries to the last layer."""
    sha = _conv_net(lab.root / "models" / "convnet.onnx")
    perturbed_sha = _conv_net(lab.root / "models" / "convnet_perturbed.onnx", scale_middle=-3.0)
    golden = lab.record(H.manifest_text("conv", "convnet.onnx", sha))
    assert golden.probes is not None
    layers = golden.probes["layers"]
    assert [row[:2] for row in layers["rows"]][:3] == [
        ["conv1", "Conv"], ["relu1", "Relu"], ["conv2", "Conv"]
    ]  # fmt: skip
    d = lab.check(golden, H.manifest_text("conv", "convnet_perturbed.onnx", perturbed_sha))
    lead = d.diagnosis.lead
    assert d.diagnosis.cause == "model", d.diagnosis.render()
    assert "the first layer whose output differs is Conv 'conv2' (layer 3 of 9: max |x|" in lead
    assert "at the last layer (head)" in lead
    text = " ".join(d.diagnosis.render().split())
    section = "the model, layer by layer, on the golden's 2 layer probes: 9 layers aligned by name"
    assert section in text
    assert "the 2 layers before it are as the golden's" in text
    assert_readable(d.diagnosis.render())


def test_layers_that_do_not_align_are_said_so(lab: Lab) -> None:
    """Another architecture altogether: neither names nor positions and shapes match."""
    sha = _conv_net(lab.root / "models" / "convnet_arch.onnx")
    other, other_sha = lab.model(seed=11)
    golden = lab.record(H.manifest_text("arch", "convnet_arch.onnx", sha))
    d = lab.check(golden, H.manifest_text("arch", other, other_sha)).diagnosis
    assert "the first layer whose output differs" not in d.lead
    text = " ".join(d.render().split())
    assert (
        "the model, layer by layer, on the golden's 2 layer probes: no alignment holds: the "
        "golden's model has 9 layers, this one 3, and their names and shapes do not match in order"
    ) in text


def test_a_quantised_model_is_named_as_a_precision_change(lab: Lab) -> None:
    """The same model with its activations quantised (QuantizeLinear + DequantizeLinear after
    the first Relu): the precision change leads, with where the outputs first differ."""
    sha = _conv_net(lab.root / "models" / "convnet_float.onnx")
    q_sha = _conv_net(lab.root / "models" / "convnet_qdq.onnx", qdq=0.25)
    golden = lab.record(H.manifest_text("qdq", "convnet_float.onnx", sha))
    d = lab.check(golden, H.manifest_text("qdq", "convnet_qdq.onnx", q_sha)).diagnosis
    assert d.cause == "precision", d.render()
    assert d.lead.startswith(
        "Likely cause: the model's precision — the new model has 2 quantisation ops "
        "(DequantizeLinear, QuantizeLinear) where the golden's had 0; 1 layer outputs are uint8 "
        "where the golden's had 0 (the model changed: model.file.sha256:"
    ), d.lead
    assert "the first layer whose output differs is Conv 'conv2'" in d.lead


def test_a_changed_quantisation_scale_is_named(lab: Lab) -> None:
    sha = _conv_net(lab.root / "models" / "convnet_q25.onnx", qdq=0.25)
    coarse_sha = _conv_net(lab.root / "models" / "convnet_q50.onnx", qdq=0.5)
    golden = lab.record(H.manifest_text("qscale", "convnet_q25.onnx", sha))
    assert golden.probes is not None
    quantise = next(r for r in golden.probes["layers"]["rows"] if r[1] == "QuantizeLinear")
    assert quantise[8] == 0.25  # the scale, kept as the row's ninth field
    d = lab.check(golden, H.manifest_text("qscale", "convnet_q50.onnx", coarse_sha)).diagnosis
    assert d.cause == "precision", d.render()
    assert d.lead.startswith(
        "Likely cause: the model's precision — the quantisation scale changed: q1 0.25 → 0.5"
    ), d.lead


def test_renamed_layers_are_aligned_by_position_and_shape(lab: Lab) -> None:
    sha = _conv_net(lab.root / "models" / "convnet_a.onnx")
    renamed_sha = _conv_net(
        lab.root / "models" / "convnet_b.onnx", scale_middle=-3.0, prefix="export/"
    )
    golden = lab.record(H.manifest_text("rename", "convnet_a.onnx", sha))
    d = lab.check(golden, H.manifest_text("rename", "convnet_b.onnx", renamed_sha)).diagnosis
    assert "is Conv 'export/conv2' (layer 3 of 9" in d.lead, d.render()
    assert "aligned by position and shape (the names differ)" in d.render()


def _torch_convnet() -> Any:
    import torch

    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.Conv2d(8, 8, 3, padding=1),
        torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(2),
        torch.nn.Flatten(),
        torch.nn.Linear(32, H.CLASSES),
    )


def test_a_changed_torch_layer_is_named_by_the_layer_fingerprints(lab: Lab) -> None:
    """The same with PyTorch (a state_dict and its builder): forward hooks on every leaf module;
    the second Conv2d's weights changed, and the diagnosis names that module."""
    torch = pytest.importorskip("torch")
    import pytest_mlrepro

    pytest_mlrepro.model_builder("diag_convnet")(_torch_convnet)
    torch.manual_seed(0)
    state = _torch_convnet().state_dict()
    state["0.weight"] = torch.randn(8, 3, 3, 3) * 0.3
    state["2.weight"] = torch.randn(8, 8, 3, 3) * 0.2
    state["6.weight"] = torch.randn(H.CLASSES, 32) * 3.0
    for key in ("0.bias", "2.bias", "6.bias"):  # no bias: every class is earned by the input
        state[key] = torch.zeros_like(state[key])
    torch.save(state, lab.root / "models" / "convnet.pt")
    changed = {k: v.clone() for k, v in state.items()}
    changed["2.weight"][:4] *= -3.0  # half the output channels of the second Conv2d
    torch.save(changed, lab.root / "models" / "convnet_changed.pt")

    def text(weights: str) -> str:
        onnx_text = H.manifest_text("torchconv", "x.onnx", "0" * 64)
        model = (
            "model:\n  format: state_dict\n  builder: diag_convnet\n"
            f"  weights: {{path: ../models/{weights}, "
            f"sha256: {H.sha256(lab.root / 'models' / weights)}}}\n"
        )
        onnx_text = re.sub(r"model:\n(?:  .*\n)+", model, onnx_text, count=1)
        return onnx_text.replace("framework: {name: onnxruntime}", "framework: {name: torch}")

    golden = lab.record(text("convnet.pt"))
    assert golden.probes is not None
    assert [row[:2] for row in golden.probes["layers"]["rows"]][:3] == [
        ["0", "Conv2d"], ["1", "ReLU"], ["2", "Conv2d"]
    ]  # fmt: skip
    d = lab.check(golden, text("convnet_changed.pt")).diagnosis
    assert d.cause == "model", d.render()
    assert "the first layer whose output differs is Conv2d '2' (layer 3 of 7:" in d.lead


# --- through pytest: the failure carries the diagnosis, and only a failure ------------------


def _failure_section(output: str) -> str:
    match = re.search(
        r"_{3,} tiny_onnx::accuracy\[cpu\] _{3,}\n(.*?)(?=\n_{3,} |\n={3,} )", output, re.S
    )
    assert match, output
    return match.group(1)


def test_a_drift_failure_carries_the_diagnosis(project: Project) -> None:
    project.make({"tiny_onnx.yaml": project.manifest("tiny_onnx")}, goldens=["tiny_onnx"])
    golden = json.loads(project.golden("tiny_onnx").read_text())
    assert golden["probes"]["steps"] == ["decode", "crop", "resize", "cast", "normalize", "layout"]
    path = project.path / "manifests" / "tiny_onnx.yaml"
    path.write_text(path.read_text().replace(PREPROCESS_RGB, PREPROCESS_BGR))
    result = project.run("--mlrepro-json", "out.json")
    result.assert_outcomes(failed=1)
    section = _failure_section(result.stdout.str())
    lines = section.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("diagnosis ("))
    assert lines[start + 1].startswith(
        "  Likely cause: colour order — the manifest changed decode.order"
    )
    flat = " ".join(section.split())
    assert "with RGB instead of BGR, 24/24 probe predictions match the golden" in flat
    assert "manifest diff against the manifest the golden was recorded with:" in flat
    # The first step whose output changed, and how: its channel means are the golden's, moved.
    assert (
        "decode: the channels in another order (now ← golden, by their means: 0←2, 2←0), "
        "mean |Δ|" in flat
    ), flat
    # The verdict comes first, untouched; the diagnosis follows it.
    verdict = next(
        i for i, line in enumerate(lines) if line.startswith("manifests/tiny_onnx.yaml [cpu]:")
    )
    assert "results drifted from the golden" in lines[verdict] and verdict < start
    assert all(len(line) <= 100 for line in lines[start:]), section
    rows = json.loads((project.path / "out.json").read_text())["results"]
    assert [r["diagnosis"] for r in rows] == ["colour order"]


def test_diagnosis_can_be_turned_off(project: Project) -> None:
    project.make({"tiny_onnx.yaml": project.manifest("tiny_onnx")}, goldens=["tiny_onnx"])
    path = project.path / "manifests" / "tiny_onnx.yaml"
    path.write_text(path.read_text().replace(PREPROCESS_RGB, PREPROCESS_BGR))
    off = project.run("--mlrepro-no-diagnose")
    off.assert_outcomes(failed=1)
    assert "results drifted from the golden" in off.stdout.str()
    assert "Likely cause" not in off.stdout.str()
    (project.path / "pytest.ini").write_text(
        "[pytest]\nmlrepro_data = data\nmlrepro_diagnose = false\n"
    )
    ini_off = project.run()
    ini_off.assert_outcomes(failed=1)
    assert "Likely cause" not in ini_off.stdout.str()
    (project.path / "pytest.ini").write_text(
        "[pytest]\nmlrepro_data = data\nmlrepro_counterfactual_samples = 0\n"
    )
    no_flips = project.run()
    no_flips.assert_outcomes(failed=1)
    flat = " ".join(no_flips.stdout.str().split())
    assert "counterfactual probes are turned off" in flat
    assert "Likely cause: the manifest's preprocessing edits (colour order)" in flat


def _reordered(text: str) -> str:
    """The same manifest with its last keys moved first and comments added."""
    head, dataset = text.split("dataset:", 1)
    return "# the same manifest, reordered\ndataset:" + dataset + "# the model\n" + head


BENIGN = {
    "key order and comments": _reordered,
    "thread count": lambda text: text.replace(
        "runtime: {batch_size: 8, devices: [cpu]}",
        "runtime: {batch_size: 8, devices: [cpu], intra_op_threads: 1, inter_op_threads: 1}",
    ),
    "batch size": lambda text: text.replace("batch_size: 8", "batch_size: 3"),
}


def test_benign_changes_pass_without_a_diagnosis(project: Project) -> None:
    text = project.manifest("tiny_onnx")
    project.make({"tiny_onnx.yaml": text}, goldens=["tiny_onnx"])
    path = project.path / "manifests" / "tiny_onnx.yaml"
    before = project.golden("tiny_onnx").read_bytes()
    for name, change in BENIGN.items():
        changed = change(text)
        assert changed != text, name
        path.write_text(changed)
        result = project.run()
        result.assert_outcomes(passed=1)
        out = result.stdout.str()
        assert "diagnosis (" not in out and "Likely cause" not in out, (name, out)
    rerun = project.run()  # and re-running
    rerun.assert_outcomes(passed=1)
    assert "Likely cause" not in rerun.stdout.str()
    assert project.golden("tiny_onnx").read_bytes() == before


def test_update_adds_step_probes_to_an_old_golden_once(serial_project: Project) -> None:
    project = serial_project
    project.make({"tiny_onnx.yaml": project.manifest("tiny_onnx")}, goldens=["tiny_onnx"])
    path = project.golden("tiny_onnx")
    data = json.loads(path.read_text())
    old = golden_store.Golden(
        data["name"],
        data["manifest"],
        data["environment"],
        golden_store.read(path).results,  # type: ignore[union-attr]
    )
    golden_store.write(path, old)  # as recorded before step probes existed
    assert "probes" not in json.loads(path.read_text())
    passed = project.run()
    passed.assert_outcomes(passed=1)  # an old golden is still a valid golden
    assert path.read_bytes() == golden_store.dumps(old).encode()
    updated = project.run("--mlrepro-update")
    updated.stdout.fnmatch_lines(["tiny_onnx *golden updated (step probes added)"])
    probes_now = json.loads(path.read_text())["probes"]
    assert len(probes_now["samples"]) == 8 and len(probes_now["fingerprints"]) == 8 * 6
    again = project.run("--mlrepro-update")
    again.stdout.fnmatch_lines(["tiny_onnx *pass"])
    (project.path / "pytest.ini").write_text(
        "[pytest]\nmlrepro_data = data\nmlrepro_fingerprint_samples = 3\n"
    )
    fewer = project.run("--mlrepro-update")
    fewer.stdout.fnmatch_lines(["tiny_onnx *golden updated (step probes added)"])
    assert len(json.loads(path.read_text())["probes"]["samples"]) == 3


# --- grey images --------------------------------------------------------------------------------

GREY_STEPS = [
    "decode: {backend: pil, mode: L, convert: luma}",
    f"crop: {{fraction: {H.CROP}, rounding: google}}",
    f"resize: {{size: [{H.SIDE}, {H.SIDE}], method: bilinear, backend: pil}}",
    "cast: {dtype: float32}",
    "normalize: {mean: [127], std: [128]}",
    "layout: {order: NCHW}",
]


def _grey_model(lab: Lab) -> tuple[str, str]:
    """A linear classifier over a (1, 12, 12) grey input, as ONNX: (file name, sha256)."""
    return _linear_model(lab, 1, seed=11)


def test_a_grey_data_set_replaced_by_negatives_is_diagnosed_as_inverted(lab: Lab) -> None:
    """Every image of a grey model's data set replaced by its negative (255 − x, as
    ImageOps.invert saves it): the data changed, and the lead says the files are inverted and
    that 255 − x restores the golden, not merely that the data changed."""
    from PIL import Image, ImageOps

    folder = _copy_data(lab, "negatives")
    model, sha = _grey_model(lab)
    text = H.manifest_text("neg", model, sha, GREY_STEPS, dataset="negatives")
    golden = _with_data(lab.record(text), folder)
    for path in folder.glob("*.png"):
        with Image.open(path) as image:
            grey = image.convert("L")
        ImageOps.invert(grey).save(path)
    _accept(lab, "negatives")
    d = _check_data(lab, golden, text, folder)
    assert d.cause == "data", d.render()
    assert d.lead.startswith(f"Likely cause: {pitfalls.INVERTED}, in the changed data — "), d.lead
    assert "the new files are inverted: 255 − x restores the golden (24/24 probe" in d.lead
    assert "colour order" not in d.render()  # no flip of a grey input's colour order is tried
    assert_readable(d.render())


def _linear_model(lab: Lab, bands: int, seed: int = 12) -> tuple[str, str]:
    """A linear classifier over a (bands, 12, 12) input, as ONNX: (file name, sha256)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = np.random.default_rng(seed).normal(0, 0.2, (bands * H.SIDE * H.SIDE, H.CLASSES))
    nodes = [
        helper.make_node("Flatten", ["input"], ["flat"], axis=1),
        helper.make_node("MatMul", ["flat", "w"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes,
        "bands",
        [
            helper.make_tensor_value_info(
                "input", TensorProto.FLOAT, ["batch", bands, H.SIDE, H.SIDE]
            )
        ],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", H.CLASSES])],
        initializer=[numpy_helper.from_array(w.astype(np.float32), "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    lab.count += 1
    name = f"bands{lab.count}.onnx"
    onnx.save(model, str(lab.root / "models" / name))
    return name, H.sha256(lab.root / "models" / name)


def test_bands_saved_in_another_order_are_put_back_by_the_band_order_flip(lab: Lab) -> None:
    """A 5-band uint16 .npy data set whose files were re-saved with bands 1 and 3 exchanged (issue
    43): the data changed, and the lead names the band order and the permutation that restores
    the golden, not merely that the data changed; no decoder flip is tried on .npy arrays."""
    folder = lab.root / "data" / "bands5"
    folder.mkdir()
    rng = np.random.default_rng(5)
    rows = ["file,class_index"]
    for index in range(H.N_SAMPLES):
        levels = np.array([5000, 15000, 25000, 35000, 45000]) + rng.normal(0, 2000, 5)
        array = levels[None, None, :] + rng.normal(0, 3000, (H.SIDE, H.SIDE, 5))
        np.save(folder / f"t{index:02d}.npy", np.clip(array, 0, 65535).astype(np.uint16))
        rows.append(f"t{index:02d}.npy,{index % H.CLASSES}")
    (folder / "labels.csv").write_text("\n".join(rows) + "\n")
    _accept(lab, "bands5")
    model, sha = _linear_model(lab, 5)
    steps = [
        "decode: {mode: bands, channels: 5, dtype: uint16, backend: numpy}",
        CAST,
        "scale: {divisor: 65535}",
        "layout: {order: NCHW}",
    ]
    text = H.manifest_text("bands", model, sha, steps, dataset="bands5")
    golden = lab.record(text)
    files = {p.name: H.sha256(p) for p in folder.iterdir() if p.suffix == ".npy"}
    golden = dataclasses.replace(golden, data=files)
    for path in folder.glob("*.npy"):
        np.save(path, np.load(path)[:, :, [0, 3, 2, 1, 4]])
    _accept(lab, "bands5")
    d = _check_data(lab, golden, text, folder)
    said = d.render()
    assert d.cause == "data", said
    assert d.lead.startswith("Likely cause: band order, in the changed data — "), d.lead
    assert "put back in the golden's order (now ← golden: 1←3, 3←1), 24/24 probe" in d.lead
    assert "decoder" not in said and "BytesIO" not in said
    assert_readable(said)


def _rgba_data(lab: Lab, name: str, disc: bool) -> Path:
    """24 RGBA PNGs of 18 × 18. ``disc``: an opaque disc of one colour on transparent pixels
    whose colours are noise (what a premultiplying resize ignores and a plain one bleeds in);
    else one colour (with a little noise) under an alpha ramp."""
    from PIL import Image

    folder = lab.root / "data" / name
    folder.mkdir()
    rng = np.random.default_rng(8)
    yy, xx = np.mgrid[0:18, 0:18]
    rows = ["file,class_index"]
    for index in range(H.N_SAMPLES):
        image = rng.integers(0, 256, (18, 18, 4)).astype(np.uint8)
        if disc:
            inside = (yy - rng.integers(6, 12)) ** 2 + (xx - rng.integers(6, 12)) ** 2 < 20
            image[..., 3] = np.where(inside, 255, 0)
            image[inside, :3] = rng.integers(0, 256, 3)
        else:
            colour = rng.integers(60, 200, 3)
            image[..., :3] = colour + rng.integers(-5, 6, (18, 18, 3))
            image[..., 3] = np.rint(xx * 15).astype(np.uint8)
        Image.fromarray(image, "RGBA").save(folder / f"a{index:02d}.png")
        rows.append(f"a{index:02d}.png,{index % H.CLASSES}")
    (folder / "labels.csv").write_text("\n".join(rows) + "\n")
    _accept(lab, name)
    return folder


RGBA_STEPS = [
    "decode: {mode: RGBA, exif_orientation: false}",
    "resize: {size: [12, 12], method: bilinear, backend: pil}",
    CAST,
    SCALE,
    "layout: {order: NCHW}",
]


def test_an_rgba_resize_through_opencv_says_that_pillow_premultiplies(lab: Lab) -> None:
    """Colour with alpha resized through OpenCV where the golden used Pillow (issue 43): the
    lead names the resize and why it matters for RGBA, in words."""
    pytest.importorskip("cv2")
    _rgba_data(lab, "rgba", disc=True)
    model, sha = _linear_model(lab, 4)
    golden = lab.record(H.manifest_text("rgba", model, sha, RGBA_STEPS, dataset="rgba"))
    resize = "resize: {size: [12, 12], method: bilinear, backend: opencv}"
    opencv = H.replace_step(RGBA_STEPS, 1, resize)
    run = lab.check(golden, H.manifest_text("rgba", model, sha, opencv, dataset="rgba"))
    assert run.diagnosis.cause == pitfalls.RESIZE, run.diagnosis.render()
    assert "changed resize.backend from 'pil' to 'opencv'" in lead_of(run)
    assert (
        "(on colour with alpha: Pillow premultiplies the colours by alpha while it filters, "
        "OpenCV filters each channel alone" in lead_of(run)
    )


def test_rgba_files_saved_premultiplied_say_the_mechanism(lab: Lab) -> None:
    """The RGBA files re-saved with their colours premultiplied by alpha (issue 43): the data
    changed, and the step-by-step evidence says premultiplied alpha, not only that the decode
    differs."""
    from PIL import Image

    folder = _rgba_data(lab, "rgba_pm", disc=False)
    model, sha = _linear_model(lab, 4)
    text = H.manifest_text("rgba_pm", model, sha, RGBA_STEPS, dataset="rgba_pm")
    golden = lab.record(text)
    golden = dataclasses.replace(golden, data={p.name: H.sha256(p) for p in folder.glob("*.png")})
    for path in folder.glob("*.png"):
        with Image.open(path) as image:
            array = np.asarray(image).astype(np.float64)
        array[..., :3] = np.rint(array[..., :3] * array[..., 3:] / 255)
        Image.fromarray(array.astype(np.uint8), "RGBA").save(path)
    _accept(lab, "rgba_pm")
    d = _check_data(lab, golden, text, folder)
    assert d.cause == "data", d.render()
    assert "decode: the colours premultiplied by alpha (alpha the same, every colour mean ×" in (
        d.render().replace("\n        ", " ")
    )
