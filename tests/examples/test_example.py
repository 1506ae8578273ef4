"""The built-in example on the real 1000-image ImageNet sample, through pytester.

Skipped when ../shared/data/imagenet-sample is absent. Each pitfall variant compares with a copy of
the unchanged example's golden, so it fails exactly as a user's edited manifest would.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from helpers import DATA, REPO, needs_imagenet_sample

pytestmark = [pytest.mark.slow, needs_imagenet_sample]
pytest.importorskip("onnxruntime")
pytest.importorskip("torch")  # the ONNX model is exported from the PyTorch weights

ONNX_MANIFEST = REPO / "manifests" / "efficientnet_lite0_onnx.yaml"
VARIANTS = {
    # name: (old text, new text) applied to the ONNX manifest
    "bgr": ("decode: {backend: pil, order: RGB", "decode: {backend: pil, order: BGR"),
    "nocrop": ("      - crop: {fraction: 0.875, rounding: google}\n", ""),
    "interp": ("method: bilinear, backend: pil", "method: bilinear, backend: opencv"),
}


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(os.environ.get("MLREPRO_CACHE") or tmp_path_factory.mktemp("mlrepro-cache"))


def _project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    (pytester.path / "manifests").mkdir()
    shutil.copytree(REPO / "manifests" / "datasets", pytester.path / "manifests" / "datasets")
    shutil.copy(ONNX_MANIFEST, pytester.path / "manifests")
    shutil.copytree(REPO / "golden", pytester.path / "golden")
    shutil.copy(REPO / "conftest.py", pytester.path)
    shutil.copytree(REPO / "examples", pytester.path / "examples")  # its builders
    text = ONNX_MANIFEST.read_text()
    for name, (old, new) in VARIANTS.items():
        assert old in text, f"the example manifest no longer contains {old!r}"
        variant = text.replace(old, new).replace(
            "name: efficientnet_lite0_onnx",
            f"name: variant_{name}",
        )
        # Each variant compares with a copy of the example's golden (two manifests may not share
        # one golden file: their recordings would overwrite each other).
        # The copy is the variant's own golden (a golden names the manifest it belongs to), as
        # if the owner had recorded it before editing the manifest.
        (pytester.path / "golden" / f"variant_{name}.json").write_text(
            _golden_named(f"variant_{name}"), encoding="utf-8"
        )
        (pytester.path / "manifests" / f"variant_{name}.yaml").write_text(variant)
    pytester.makeini("[pytest]\n")
    monkeypatch.setenv("MLREPRO_DATA", str(DATA))
    monkeypatch.setenv("MLREPRO_CACHE", str(cache))


def _golden_named(name: str) -> str:
    """The example's committed ONNX golden, renamed to belong to the manifest ``name``."""
    text = (REPO / "golden" / "efficientnet_lite0_onnx.json").read_text(encoding="utf-8")
    head = '\n  "name": "efficientnet_lite0_onnx",\n'
    assert text.count(head) == 1
    return text.replace(head, f'\n  "name": "{name}",\n')


def _section(output: str, name: str) -> str:
    """The failure text of one variant's item."""
    match = re.search(
        rf"_+ variant_{name}::accuracy\[cpu\] _+\n(.*?)(?=\n_{{3,}} |\n={{3,}} )",
        output,
        re.S,
    )
    assert match, f"no failure section for variant {name}"
    # Under xdist the section opens with the worker's line ("[gw0] linux -- Python ...").
    return re.sub(r"\A\[gw\d+\] [^\n]*\n", "", match.group(1))


def _row(section: str, label: str) -> tuple[float, float]:
    match = re.search(rf"{re.escape(label)}\s+(\S+)\s+(\S+)", section)
    assert match, f"no {label!r} row in:\n{section}"
    return float(match.group(1)), float(match.group(2))


def test_pitfall_variants_fail_for_the_right_reason(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, model_cache: Path
) -> None:
    """Run under xdist, whose failure sections open with the worker's line: the harder reading.
    (A serial twin ran the same 4000 evaluations again; the serial drift path is proven by the
    fast tier's drift tests on the tiny models.)"""
    _project(pytester, monkeypatch, model_cache)
    result = pytester.runpytest_subprocess(
        "manifests/",
        "-k",
        "accuracy",
        "--mlrepro-device=cpu",
        "-p",
        "no:cacheprovider",
        "-n",
        "2",
    )
    result.assert_outcomes(passed=1, failed=3)
    output = result.stdout.str()

    for name in ("bgr", "nocrop"):
        section = _section(output, name)
        golden_top1, now_top1 = _row(section, "top-1 %")
        _, agreement = _row(section, "top-1 agreement")
        assert now_top1 < golden_top1 - 1.0, section  # a real accuracy drop
        assert agreement < 0.95, section
        assert "top-1 accuracy" in section.splitlines()[0]
        assert "pytest manifests/variant_" in section and "--mlrepro-update" in section
    # The diagnosis names the cause first.
    leads = {
        "bgr": "Likely cause: colour order — the manifest changed decode.order from 'RGB' to 'BGR'",
        "nocrop": "Likely cause: crop — the manifest removed the step crop",
        "interp": "Likely cause: resize — the manifest changed resize.backend from 'pil' to",
    }
    for name, lead in leads.items():
        assert lead in " ".join(_section(output, name).split()), _section(output, name)

    interp = _section(output, "interp")
    golden_top1, now_top1 = _row(interp, "top-1 %")
    _, agreement = _row(interp, "top-1 agreement")
    lead = interp.splitlines()[0]
    assert abs(now_top1 - golden_top1) <= 0.5, interp  # accuracy alone would pass ...
    assert (
        "top-1 accuracy" not in lead and "per-sample top-1 agreement" in lead
    )  # ... agreement fails
    assert 0.9 < agreement < 0.99, interp
    # Nothing is ever written without --mlrepro-update.
    assert (pytester.path / "golden" / "efficientnet_lite0_onnx.json").read_bytes() == (
        REPO / "golden" / "efficientnet_lite0_onnx.json"
    ).read_bytes()
    for name in (f"variant_{v}" for v in VARIANTS):
        assert (pytester.path / "golden" / f"{name}.json").read_text(
            encoding="utf-8"
        ) == _golden_named(name)
