"""Preprocessing shared between a session's evaluations: the same tensors as each pipeline alone,
decoded once, and never shared across a difference in data or in one step's parameter."""

from __future__ import annotations

import hashlib
import io
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from pytest_mlrepro.data import Sample
from pytest_mlrepro.errors import IntegrityError
from pytest_mlrepro.evaluation import PreprocessingShare, SharedLoader
from pytest_mlrepro.evaluation._evaluate import preprocessed
from pytest_mlrepro.pipeline import Cast, Crop, Decode, Layout, Normalize, Pipeline, Resize

GOOGLE = ((127.0, 127.0, 127.0), (128.0, 128.0, 128.0))


def pipeline(
    method: str = "bilinear", mean: tuple[float, ...] = GOOGLE[0], order: str = "NCHW"
) -> Pipeline:
    return Pipeline(
        [
            Decode(),
            Crop(fraction=0.875),
            Resize(size=(24, 24), method=method),  # type: ignore[arg-type]
            Cast(),
            Normalize(mean=mean, std=GOOGLE[1]),
            Layout(order=order),  # type: ignore[arg-type]
        ]
    )


@pytest.fixture
def samples(tmp_path: Path) -> list[Sample]:
    rng = np.random.default_rng(0)
    out = []
    for i in range(6):
        pixels = rng.integers(0, 256, (40 + i, 50, 3), dtype=np.uint8)
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, "PNG")
        path = tmp_path / f"s{i}.png"
        path.write_bytes(buffer.getvalue())
        out.append(Sample(path.name, path, i, hashlib.sha256(buffer.getvalue()).hexdigest()))
    return out


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Calls of the decode and resize ops, by op."""
    calls: Counter[str] = Counter()
    decode, resize = Decode.decode, Resize.apply

    def counting_decode(self: Decode, data: bytes, sample: str) -> object:
        calls["decode"] += 1
        return decode(self, data, sample)

    def counting_resize(self: Resize, t: object) -> object:
        calls["resize"] += 1
        return resize(self, t)  # type: ignore[arg-type]

    monkeypatch.setattr(Decode, "decode", counting_decode)
    monkeypatch.setattr(Resize, "apply", counting_resize)
    return calls


def alone(pipe: Pipeline, samples: list[Sample]) -> list[np.ndarray]:
    return [pipe(s.path.read_bytes(), s.id) for s in samples]


def through(share: PreprocessingShare, pipe: Pipeline, samples: list[Sample]) -> list[np.ndarray]:
    loader = share.loader("data", pipe)
    assert loader is not None, "the plan shares nothing for this pipeline"
    return [loader(s) for s in samples]


def test_two_identical_pipelines_decode_each_sample_once(
    samples: list[Sample], counted: Counter[str]
) -> None:
    expected = alone(pipeline(), samples)
    counted.clear()
    share = PreprocessingShare(budget_bytes=1 << 30)
    first, second = pipeline(), pipeline()
    share.plan([("data", first), ("data", second)])
    got = [through(share, first, samples), through(share, second, samples)]
    assert counted == {"decode": len(samples), "resize": len(samples)}
    for outputs in got:
        for out, want in zip(outputs, expected, strict=True):
            assert out.dtype == want.dtype and np.array_equal(out, want)
    assert share.stats.reused == len(samples)


def test_pipelines_one_parameter_apart_get_their_own_tensors(
    samples: list[Sample], counted: Counter[str]
) -> None:
    """Bilinear against bicubic: the decoded image is shared, the resize is each one's own."""
    bilinear, bicubic = pipeline("bilinear"), pipeline("bicubic")
    expected = {"bilinear": alone(bilinear, samples), "bicubic": alone(bicubic, samples)}
    counted.clear()
    share = PreprocessingShare(budget_bytes=1 << 30)
    share.plan([("data", bilinear), ("data", bicubic)])
    got = {
        "bilinear": through(share, bilinear, samples),
        "bicubic": through(share, bicubic, samples),
    }
    assert counted == {"decode": len(samples), "resize": 2 * len(samples)}
    for name, outputs in got.items():
        for out, want in zip(outputs, expected[name], strict=True):
            assert np.array_equal(out, want)
    assert any(
        not np.array_equal(a, b) for a, b in zip(got["bilinear"], got["bicubic"], strict=True)
    )


def test_a_difference_after_the_resize_shares_the_resized_image(
    samples: list[Sample], counted: Counter[str]
) -> None:
    """Another mean (one number) and another layout: both follow the shared resize."""
    google, other, nhwc = pipeline(), pipeline(mean=(127.0, 127.0, 126.0)), pipeline(order="NHWC")
    share = PreprocessingShare(budget_bytes=1 << 30)
    share.plan([("data", google), ("data", other), ("data", nhwc)])
    expected = [alone(p, samples) for p in (google, other, nhwc)]
    counted.clear()
    got = [through(share, p, samples) for p in (google, other, nhwc)]
    assert counted == {"decode": len(samples), "resize": len(samples)}
    for outputs, wanted in zip(got, expected, strict=True):
        assert all(np.array_equal(o, w) for o, w in zip(outputs, wanted, strict=True))
    assert not np.array_equal(got[0][0], got[1][0])
    # What is kept is the resized uint8 image, not the float32 tensor after the cheap steps.
    assert share.stats.peak_bytes == len(samples) * 24 * 24 * 3


def test_different_data_keys_share_nothing(samples: list[Sample]) -> None:
    share = PreprocessingShare(budget_bytes=1 << 30)
    share.plan([("one data set", pipeline()), ("another", pipeline())])
    assert share.loader("one data set", pipeline()) is None
    assert share.loader("another", pipeline()) is None


def test_other_bytes_under_the_same_name_are_not_reused(
    samples: list[Sample], counted: Counter[str]
) -> None:
    share = PreprocessingShare(budget_bytes=1 << 30)
    share.plan([("data", pipeline()), ("data", pipeline())])
    through(share, pipeline(), samples[:1])
    replaced = samples[1]
    renamed = Sample(samples[0].id, replaced.path, replaced.label, replaced.sha256)
    counted.clear()
    (out,) = through(share, pipeline(), [renamed])
    assert counted["decode"] == 1
    assert np.array_equal(out, alone(pipeline(), [replaced])[0])


def test_a_sample_without_a_checksum_is_never_shared(
    samples: list[Sample], counted: Counter[str]
) -> None:
    unpinned = [Sample(s.id, s.path, s.label) for s in samples]
    share = PreprocessingShare(budget_bytes=1 << 30)
    share.plan([("data", pipeline()), ("data", pipeline())])
    for _ in range(2):
        through(share, pipeline(), unpinned)
    assert counted["decode"] == 2 * len(samples)
    assert share.held_bytes == 0


def test_the_budget_bounds_what_is_kept_and_the_rest_is_recomputed(
    samples: list[Sample], counted: Counter[str]
) -> None:
    one = 24 * 24 * 3
    share = PreprocessingShare(budget_bytes=2 * one)
    share.plan([("data", pipeline()), ("data", pipeline())])
    expected = alone(pipeline(), samples)
    counted.clear()
    for _ in range(2):
        outputs = through(share, pipeline(), samples)
        assert all(np.array_equal(o, w) for o, w in zip(outputs, expected, strict=True))
    assert share.held_bytes == share.stats.peak_bytes == 2 * one
    assert share.stats.over_budget == 2 * (len(samples) - 2)  # in each evaluation
    assert counted["decode"] == 2 * len(samples) - 2


def test_kept_tensors_are_read_only_and_dropped_after_the_last_use(samples: list[Sample]) -> None:
    share = PreprocessingShare(budget_bytes=1 << 30)
    first, second = pipeline(), pipeline()
    share.plan([("data", first), ("data", second)])
    through(share, first, samples)
    (node,) = share._nodes.values()
    kept = next(iter(node.tensors.values()))
    with pytest.raises(ValueError, match="read-only"):
        kept.array[0, 0, 0] = 1
    share.finished("data", first)
    assert share.held_bytes > 0
    share.finished("data", second)
    assert share.held_bytes == 0 and not share._nodes


def test_batches_through_the_thread_pool_match_the_pipeline_alone(samples: list[Sample]) -> None:
    share = PreprocessingShare(budget_bytes=1 << 30)
    pipe = pipeline()
    share.plan([("data", pipe), ("data", pipeline())])
    loader = share.loader("data", pipe)

    def batches(**kw: object) -> Iterator[np.ndarray]:
        return preprocessed(pipe, samples, 4, workers=2, **kw)  # type: ignore[arg-type]

    for shared, own in zip(batches(load=loader), batches(), strict=True):
        assert np.array_equal(shared, own)
    for shared, own in zip(batches(load=loader), batches(overlap=False), strict=True):
        assert np.array_equal(shared, own)


def twice_planned(budget_bytes: int = 1 << 30) -> tuple[PreprocessingShare, SharedLoader]:
    """A share planned for two evaluations of :func:`pipeline` over one data set, and the
    loader of the first."""
    share = PreprocessingShare(budget_bytes=budget_bytes)
    share.plan([("data", pipeline()), ("data", pipeline())])
    loader = share.loader("data", pipeline())
    assert loader is not None
    return share, loader


def test_fill_decodes_every_sample_once_up_front_and_the_evaluations_reuse_it(
    samples: list[Sample], counted: Counter[str]
) -> None:
    expected = alone(pipeline(), samples)
    counted.clear()
    share, loader = twice_planned()
    first, second = pipeline(), pipeline()
    assert loader.fill(samples, workers=2) == len(samples)
    assert counted == {"decode": len(samples), "resize": len(samples)}
    # Filled already: a second fill (the next evaluation's) computes nothing.
    assert loader.fill(samples, workers=2) == 0
    got = [through(share, first, samples), through(share, second, samples)]
    assert counted == {"decode": len(samples), "resize": len(samples)}
    for outputs in got:
        assert all(np.array_equal(o, w) for o, w in zip(outputs, expected, strict=True))
    assert share.stats.reused == 2 * len(samples)


def test_fill_stops_at_the_budget_and_leaves_the_rest_to_the_evaluation(
    samples: list[Sample], counted: Counter[str]
) -> None:
    one = 24 * 24 * 3
    share, loader = twice_planned(budget_bytes=2 * one)
    counted.clear()
    filled = loader.fill(samples, workers=1)  # one worker: in order, so the first two fit
    assert share.held_bytes == 2 * one
    # The sample that found the budget spent was computed, not kept; none after it.
    assert filled == counted["decode"] == 3
    expected = alone(pipeline(), samples)
    outputs = through(share, pipeline(), samples)
    assert all(np.array_equal(o, w) for o, w in zip(outputs, expected, strict=True))


def test_fill_leaves_an_unreadable_sample_to_the_evaluation_to_report(
    samples: list[Sample],
) -> None:
    _, loader = twice_planned()
    samples[2].path.write_bytes(b"not the bytes the checksum names")
    assert loader.fill(samples, workers=2) == len(samples) - 1
    with pytest.raises(IntegrityError):
        loader(samples[2])
    assert np.array_equal(loader(samples[3]), alone(pipeline(), samples[3:4])[0])


def test_an_interrupted_fill_stops_without_decoding_the_rest(
    samples: list[Sample], counted: Counter[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, loader = twice_planned()
    many = samples * 50  # 300 samples (the same six, none kept yet)
    decode = Decode.decode

    raised: list[bool] = []

    def interrupted(self: Decode, data: bytes, sample: str) -> object:
        if counted["decode"] == 3 and not raised:
            raised.append(True)
            raise KeyboardInterrupt  # what a time limit's interruption looks like to the pool
        return decode(self, data, sample)

    counted.clear()
    monkeypatch.setattr(Decode, "decode", interrupted)
    with pytest.raises(KeyboardInterrupt):
        loader.fill(many, workers=1)
    assert counted["decode"] < 10, counted
