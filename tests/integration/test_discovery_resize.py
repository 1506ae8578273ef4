"""Discovery tells resize methods apart: five conventions (colour order, values, layout) over one
model whose truth is a bilinear resize, 300 images: the resize method found is bilinear on each,
told apart from bicubic by the paired likelihood test, not tied.

The model: a small CNN trained here (seeded, one thread) on the digits' train half, each 8×8
grey image decoded to RGB, its centre 7×7 (crop 0.875, Google's rounding) resized to 32×32 with
Pillow's bilinear filter, (x − 127)/128, NCHW: EfficientNet-Lite0's recipe, bilinear. The five
conventions are re-parametrisations of it, as ``tests/lite0_variants.py`` makes of
EfficientNet-Lite0: each takes its input in another convention and turns it back into the
model's before the model runs. (EfficientNet-Lite0 itself cannot serve: its weights were trained
with bicubic resizing, Google's recipe, and its likelihood prefers bicubic; see
docs/measurements.md#recipe-discovery.)"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from helpers import DATA

from pytest_mlrepro import pipeline
from pytest_mlrepro.data import Sample
from pytest_mlrepro.onboarding import Search, spread
from pytest_mlrepro.onboarding._discovery import Candidate, Scored, versus
from pytest_mlrepro.onboarding._presets import (
    CAFFE,
    IMAGENET,
    LITE,
    MINUS_ONE_ONE,
    RAW,
    ZERO_ONE,
    Geometry,
    Values,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not (DATA / "digits-train" / "labels.csv").is_file(),
        reason=f"the digits data sets are not at {DATA} (set MLREPRO_DATA)",
    ),
]
torch = pytest.importorskip("torch")

SIZE = 32
TRUTH = Candidate("RGB", Geometry("crop_then_resize", 0.875, "bilinear", "google"), LITE)
CONVENTIONS = {  # name: (colour order, values, layout) the re-parametrised model expects
    "bgr_caffe": ("BGR", CAFFE, "NCHW"),
    "rgb_zero_one_nhwc": ("RGB", ZERO_ONE, "NHWC"),
    "rgb_imagenet": ("RGB", IMAGENET, "NCHW"),
    "bgr_minus_one_one_nhwc": ("BGR", MINUS_ONE_ONE, "NHWC"),
    "rgb_raw": ("RGB", RAW, "NCHW"),
}


def _samples(folder: Path) -> list[Sample]:
    rows = (folder / "labels.csv").read_text().splitlines()[1:]
    return [Sample(r.split(",")[0], folder / r.split(",")[0], int(r.split(",")[1])) for r in rows]


def _tensors(samples: list[Sample], candidate: Candidate) -> np.ndarray:
    """``samples`` through ``candidate``'s recipe, with the project's own ops."""
    steps = []
    for text in candidate.steps(SIZE, SIZE, "NCHW", "float32"):
        ((op, params),) = text.items()
        steps.append(pipeline.STEPS[op](**{k: tuple(v) if isinstance(v, list) else v
                                           for k, v in params.items()}))  # fmt: skip
    decode, rest = steps[0], steps[1:]
    out = []
    for sample in samples:
        tensor = decode.decode(sample.read(), sample.id)  # type: ignore[attr-defined]
        for step in rest:
            tensor = step.apply(tensor)
        out.append(tensor.array)
    return np.stack(out)


@pytest.fixture(scope="module")
def bilinear_model() -> Callable[[np.ndarray], np.ndarray]:
    """A CNN trained on the bilinear truth: batch (N×3×24×24, (x − 127)/128) → logits."""
    samples = _samples(DATA / "digits-train")
    x = torch.from_numpy(_tensors(samples, TRUTH))
    y = torch.from_numpy(np.asarray([s.label for s in samples], np.int64))
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        model = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Flatten(), torch.nn.Linear(16 * (SIZE // 4) ** 2, 10),
        )  # fmt: skip
        optimiser = torch.optim.Adam(model.parameters(), lr=0.01)
        for _ in range(120):
            optimiser.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimiser.step()
    finally:
        torch.set_num_threads(threads)
    model.eval()

    def run(batch: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return model(torch.from_numpy(np.ascontiguousarray(batch))).numpy()

    return run


def _reparametrised(
    run: Callable[[np.ndarray], np.ndarray], order: str, values: Values, layout: str
) -> Callable[[np.ndarray], np.ndarray]:
    """``run`` behind a front that takes ``order`` / ``values`` / ``layout`` and gives the model
    its own RGB, (x − 127)/128, NCHW."""
    mean = np.asarray(values.mean or (0.0,) * 3, np.float32).reshape(1, 3, 1, 1)
    std = np.asarray(values.std or (1.0,) * 3, np.float32).reshape(1, 3, 1, 1)
    divisor = np.float32(values.divisor or 1.0)

    def front(batch: np.ndarray) -> np.ndarray:
        nchw = batch.transpose(0, 3, 1, 2) if layout == "NHWC" else batch
        raw = (nchw * std + mean) * divisor
        rgb = raw[:, ::-1] if order == "BGR" else raw
        return run(((rgb - 127.0) / 128.0).astype(np.float32))

    return front


@pytest.mark.parametrize("name", sorted(CONVENTIONS))
def test_discovery_finds_the_bilinear_truth_under_each_convention(
    name: str, bilinear_model: Callable[[np.ndarray], np.ndarray]
) -> None:
    order, values, layout = CONVENTIONS[name]
    subset = spread(_samples(DATA / "digits-test"), 300)
    model = _reparametrised(bilinear_model, order, values, layout)
    found = Search(model, subset, SIZE, SIZE, layout, "float32").discover()
    best = found.best
    assert best.n == 300, found.render()
    assert best.candidate.values == values, found.render()
    # Grey images: RGB and BGR give the same tensors, so either order is the truth; so do the
    # crop fractions that keep the same 7 of 8 pixels (0.875, 0.9, 0.95).
    geometry = best.candidate.geometry
    assert geometry.method == "bilinear", found.render()
    assert geometry.kind == "crop_then_resize" and int(geometry.fraction * 8) == 7, found.render()
    bicubic: list[Scored] = [
        s for s in found.ranking
        if s.n == 300 and s.candidate.geometry.method == "bicubic"
        and s.candidate.values == values
    ]  # fmt: skip
    assert bicubic, found.render()  # the other method was a finalist on the whole subset ...
    assert all(versus(best, s) == "<" for s in bicubic), found.render()  # ... and clearly worse
