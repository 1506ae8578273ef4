"""Label offsets and class-index maps named from the recorded top-k (diagnosis/_class_maps.py):
a constant shift, a class added or dropped at the front or the end (1001 ↔ 1000), another index
order, and nothing named for predictions that no map brings back."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pytest_mlrepro.diagnosis import DataFacts, Lead, explain_class_count
from pytest_mlrepro.diagnosis._class_maps import class_count_map, constant_shift, index_map
from pytest_mlrepro.goldens import Results
from pytest_mlrepro.report import DIAGNOSIS_WORDING
from pytest_mlrepro.report._diagnosis_lead import class_map_text, lead_text

CLASSES = 1000
K = 5


def golden_results(n: int = CLASSES) -> Results:
    """One sample per class, each ranking its own class first and its neighbours after."""
    top = (np.arange(n)[:, None] + np.arange(K)[None, :]) % CLASSES
    scores = np.tile(np.linspace(0.9, 0.01, K), (n, 1))
    return Results(tuple(f"s{i:04d}" for i in range(n)), np.arange(n) % CLASSES, top, scores)


def mapped(golden: Results, to: Callable[[np.ndarray], np.ndarray]) -> Results:
    return Results(golden.ids, golden.labels, to(golden.topk), golden.topk_scores.copy())


def test_a_sliced_background_head_is_named_a_plus_one_offset() -> None:
    golden = golden_results()

    def sliced(top: np.ndarray) -> np.ndarray:
        out = top + 1
        out[out >= CLASSES] = 500  # the last class was cut off: its sample reads another class
        return out

    found = constant_shift(golden, mapped(golden, sliced), CLASSES)
    assert found is not None
    assert found.cause == "label offset"
    assert "every prediction is the golden's class +1" in class_map_text(found)[0]
    assert "with labels shifted by −1, 999/1000 predictions match" in class_map_text(found)[1]
    assert index_map(golden, mapped(golden, sliced)) is not None  # the shift is a map too


def test_a_negative_shift_modulo_the_classes() -> None:
    golden = golden_results()
    found = constant_shift(golden, mapped(golden, lambda t: (t - 3) % CLASSES), CLASSES)
    assert found is not None
    assert "class −3" in class_map_text(found)[0]
    assert "shifted by +3, 1000/1000" in class_map_text(found)[1]


def test_another_class_order_is_named_an_index_map() -> None:
    golden = golden_results()
    order = np.random.default_rng(3).permutation(CLASSES)
    now = mapped(golden, lambda t: order[t])
    assert constant_shift(golden, now, CLASSES) is None
    found = index_map(golden, now)
    assert found is not None and found.cause == "class index map"
    assert "1000/1000 predictions match" in class_map_text(found)[1]


def test_predictions_no_map_brings_back_are_not_named() -> None:
    golden = golden_results()
    rng = np.random.default_rng(5)
    now = mapped(golden, lambda t: rng.integers(0, CLASSES, t.shape))
    assert constant_shift(golden, now, CLASSES) is None
    assert index_map(golden, now) is None
    # Nearly the golden's predictions: nothing to map (the drift is elsewhere).
    almost = mapped(golden, lambda t: np.where(np.arange(len(t))[:, None] % 10 == 0, t + 1, t))
    assert constant_shift(golden, almost, CLASSES) is None
    assert index_map(golden, almost) is None
    # A model collapsed onto one ranking (10 samples per class): many classes onto one,
    # no map.
    per_class = golden_results(CLASSES * 10)
    runners_up = rng.integers(0, CLASSES, (CLASSES * 10, K - 1))
    per_class = Results(
        per_class.ids,
        per_class.labels,
        np.concatenate([per_class.topk[:, :1], runners_up], axis=1),
        per_class.topk_scores,
    )
    collapsed = mapped(per_class, lambda t: np.tile(np.arange(K), (len(t), 1)))
    assert index_map(per_class, collapsed) is None


def test_a_background_class_added_or_dropped() -> None:
    golden = golden_results()
    added = class_count_map(golden, mapped(golden, lambda t: t + 1), CLASSES, CLASSES + 1)
    assert added is not None
    assert (
        "a background class at index 0 — the model has 1001 output classes"
        in class_map_text(added)[0]
    )
    assert "labels shifted by −1), 1000/1000 predictions match" in class_map_text(added)[1]
    at_end = class_count_map(golden, mapped(golden, lambda t: t), CLASSES, CLASSES + 1)
    assert at_end is not None and "an extra class at the end" in class_map_text(at_end)[0]
    dropped = class_count_map(golden, mapped(golden, lambda t: t - 1), CLASSES, CLASSES - 1)
    assert (
        dropped is not None and "background class at index 0 is gone" in class_map_text(dropped)[0]
    )
    assert class_count_map(golden, mapped(golden, lambda t: t + 1), CLASSES, CLASSES + 2) is None
    text = explain_class_count(
        golden, mapped(golden, lambda t: t + 1), CLASSES, CLASSES + 1, DIAGNOSIS_WORDING
    )
    assert text is not None and text[1] == "label offset"
    assert text[0].startswith("diagnosis (from the golden's recorded top-k")


def test_an_index_map_is_checked_on_the_classes_other_samples_rank() -> None:
    """One image per class, ranked among few others: the map is learnt and checked where other
    samples rank the class, and the rest are said to be unchecked."""
    golden = golden_results()
    # Classes 0..199 are never in another sample's top-k: each sample's runners-up are among
    # 200..999 only.
    top = golden.topk.copy()
    top[:, 1:] = 200 + (np.arange(CLASSES)[:, None] * 7 + np.arange(1, K)[None, :]) % 800
    golden = Results(golden.ids, golden.labels, top, golden.topk_scores)
    order = np.random.default_rng(9).permutation(CLASSES)
    found = index_map(golden, mapped(golden, lambda t: order[t]))
    assert found is not None
    assert (
        "800/800 predictions match the golden's (the other 200 have classes no other"
        in (class_map_text(found)[1])
    )


def test_labels_that_all_moved_by_one_are_named_a_label_offset() -> None:
    from pytest_mlrepro.diagnosis._data_changes import _label_shift
    from pytest_mlrepro.goldens import DataChange
    from pytest_mlrepro.goldens._data_identity import LabelChange

    shifted = DataChange(24, labels=[LabelChange(f"i{i}", i % 2, i % 2 + 1) for i in range(20)])
    assert _label_shift(shifted) == 1
    said = lead_text(Lead("data labels", "data", data=DataFacts(("labels",), 0, 0, None, 1)))
    assert said == (
        "Likely cause: the data — labels: a label offset, every changed label is the golden's +1 "
        "(with labels shifted by −1, they are the golden's); every prediction is the golden's: "
        "the accuracy moved with the labels."
    )
    swapped = DataChange(24, labels=[LabelChange("a", 0, 1), LabelChange("b", 1, 0)])
    assert _label_shift(swapped) is None
