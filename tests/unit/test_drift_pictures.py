"""The drift pictures without a pytest run: the first preprocessing step whose output differs
from a real golden's (diagnosis/_drift_images.py), its outputs on the probe samples made into
pictures (report/html/_images.py) and rendered on the page (report/html). The golden is the one
the plugin recorded for the tiny project (tests/conftest.py); the manifest is edited one way per
test. That the plugin puts these pictures on a session's page (and sends them from an xdist
worker): test_html_report.py."""

from __future__ import annotations

import base64
import html
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from helpers import PREPROCESS_BGR, PREPROCESS_RGB, make_project, manifest_text

from pytest_mlrepro import goldens
from pytest_mlrepro.data import resolve_dataset
from pytest_mlrepro.diagnosis import FirstStepOutputs, first_step_outputs
from pytest_mlrepro.diagnosis._step_fingerprints import StepDiff
from pytest_mlrepro.manifest import load_manifest
from pytest_mlrepro.report import html as report
from pytest_mlrepro.report._diagnosis_lead import step_text
from pytest_mlrepro.report.html._images import drift_note
from pytest_mlrepro.settings import Settings

pytest.importorskip("jinja2")
pytest.importorskip("matplotlib")

PNG = re.compile(r'<img class="drift-image (drift-\w+)" src="data:image/png;base64,([^"]+)"')


@dataclass
class Drift:
    outputs: FirstStepOutputs
    pictures: tuple[report.DriftImage, ...]
    page: str  # the page of a DriftSet made of them

    @property
    def first(self) -> StepDiff:
        assert self.outputs.first is not None, drift_note(self.outputs)
        return self.outputs.first


def _decode(data: str) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(base64.b64decode(data))))


def _drift(tmp_path: Path, assets: Path, edit: tuple[str, str], *, probes: bool = True) -> Drift:
    """The tiny ONNX manifest with ``edit`` made to its text, against the recorded golden
    (without its step fingerprints when ``probes`` is false)."""
    text = manifest_text("tiny_onnx", assets=assets)
    assert edit[0] in text
    make_project(tmp_path, assets, manifests={"tiny_onnx.yaml": text.replace(*edit)})
    data = json.loads((assets / "golden" / "tiny_onnx.json").read_text())
    if not probes:  # a golden recorded before goldens kept step fingerprints
        del data["probes"]
    (tmp_path / "golden").mkdir()
    (tmp_path / "golden" / "tiny_onnx.json").write_text(json.dumps(data))
    golden = goldens.read(tmp_path / "golden" / "tiny_onnx.json")
    assert golden is not None
    manifest = load_manifest(tmp_path / "manifests" / "tiny_onnx.yaml")
    settings = Settings.for_project(
        tmp_path, cache_dir=tmp_path / "cache", data_mirrors=[tmp_path / "data"]
    )
    samples = resolve_dataset(manifest, settings).samples
    outputs = first_step_outputs(manifest, golden, samples)
    pictures = tuple(
        report.drift_image(p.sample, p.golden, p.now, outputs.golden_layout, outputs.now_layout)
        for p in outputs.probes
    )
    shown = next(a for a in (outputs.probes[0].now, outputs.probes[0].golden) if a is not None)
    drift = report.DriftSet(
        manifest="tiny_onnx",
        machine="",
        device="cpu",
        step=outputs.first.op if outputs.first else "",
        status=outputs.first.status if outputs.first else "",
        description=step_text(outputs.first) if outputs.first else "",
        golden_index=outputs.golden_index,
        now_index=outputs.now_index,
        channels=f"channels in {outputs.now_order} order",
        layout=outputs.now_layout,
        dtype=str(shown.dtype),
        probes=pictures,
        note=drift_note(outputs),
        anchor="drift-1",
    )
    view = report.ReportView(
        title="drift", matrix=report.MatrixTable(("manifest",), ()), drift=(drift,)
    )
    return Drift(outputs, pictures, report.render_html(view))


@pytest.mark.parametrize(
    ("edit", "step", "shape", "kind"),
    [
        ((PREPROCESS_RGB, PREPROCESS_BGR), "decode", (40, 48, 3), "uint8"),
        (
            ("method: bilinear, backend: pil", "method: nearest, backend: pil"),
            "resize",
            (16, 16, 3),
            "uint8",
        ),
        (
            ("{normalize: {mean: [0], std: [255]}}", "{normalize: {mean: [0], std: [64]}}"),
            "normalize",
            (16, 16, 3),
            "float32",
        ),
    ],
    ids=["colour order", "resize method", "normalisation"],
)
def test_the_pictures_are_of_the_first_differing_step(
    tmp_path: Path,
    mlrepro_assets: Path,
    edit: tuple[str, str],
    step: str,
    shape: tuple[int, ...],
    kind: str,
) -> None:
    drift = _drift(tmp_path, mlrepro_assets, edit)
    assert (drift.first.op, drift.first.status) == (step, "differs")
    assert len(drift.outputs.probes) == 3
    for probe in drift.outputs.probes:
        assert probe.golden is not None and probe.now is not None
        assert probe.golden.shape == probe.now.shape == shape and str(probe.now.dtype) == kind
        assert not np.array_equal(probe.golden, probe.now)
    page = drift.page
    assert f'<span class="step first-step">{step}</span>' in page
    assert f"; {kind}</p>" in page  # the outputs' type is said
    pictures = PNG.findall(page)
    assert [k for k, _ in pictures] == ["drift-golden", "drift-now", "drift-diff"] * 3
    for k, data in pictures:
        image = _decode(data)
        assert image.shape[:2] == shape[:2], (k, image.shape)
    ranges = re.findall(
        r"values ([-0-9.e+]+) … ([-0-9.e+]+) shown black … white", html.unescape(page)
    )
    assert len(ranges) == 3
    if kind == "uint8":
        assert set(ranges) == {("0", "255")}
    else:  # floats: the two outputs' common range, std 64 giving values up to 255/64
        assert all(0 <= float(lo) < float(hi) <= 255 / 64 + 1e-6 for lo, hi in ranges)
        assert any(float(hi) > 1.5 for _, hi in ranges)


def test_the_colour_swap_shows_the_same_pixels_red_and_blue_swapped(
    tmp_path: Path, mlrepro_assets: Path
) -> None:
    drift = _drift(tmp_path, mlrepro_assets, (PREPROCESS_RGB, PREPROCESS_BGR))
    for picture in drift.pictures:
        golden, now, diff = (_decode(p) for p in (picture.golden_png, picture.now_png,
                                                   picture.diff_png))  # fmt: skip
        assert np.array_equal(golden[:, :, ::-1], now) and not np.array_equal(golden, now)
        assert diff.shape[:2] == (40, 48) and diff.max() == 255
        peak = float(np.abs(golden.astype(int) - now.astype(int)).max())
        assert picture.max_abs_diff == peak


def test_a_removed_step_is_shown_beside_the_step_before_it(
    tmp_path: Path, mlrepro_assets: Path
) -> None:
    line = "      - {crop: {size: [32, 32], rounding: google}}\n"
    drift = _drift(tmp_path, mlrepro_assets, (line, ""))
    assert (drift.first.op, drift.first.status) == ("crop", "removed")
    page = drift.page
    assert '<span class="step first-step">crop</span>' in page
    assert "crop is gone from the current pipeline" in page
    # The golden's crop output (32 × 32) beside the current decode output (40 × 48): no
    # difference picture between outputs of different shapes.
    pictures = [(k, _decode(d).shape[:2]) for k, d in PNG.findall(page)]
    assert pictures == [("drift-golden", (32, 32)), ("drift-now", (40, 48))] * 3
    assert page.count("the outputs differ in shape: no difference image") == 3


def test_a_golden_without_step_fingerprints_still_gets_its_pictures(
    tmp_path: Path, mlrepro_assets: Path
) -> None:
    """The recorded pipeline's fingerprints are made here to find the first differing step."""
    drift = _drift(tmp_path, mlrepro_assets, (PREPROCESS_RGB, PREPROCESS_BGR), probes=False)
    assert drift.first.op == "decode"
    assert '<span class="step first-step">decode</span>' in drift.page
    assert "on 3/3 probes" in step_text(drift.first)
    assert html.escape(step_text(drift.first)) in drift.page
    assert [k for k, _ in PNG.findall(drift.page)] == [
        "drift-golden",
        "drift-now",
        "drift-diff",
    ] * 3
