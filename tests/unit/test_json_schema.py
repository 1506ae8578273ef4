"""The fast pass of pytest_mlrepro._json_schema never accepts what the jsonschema library
rejects: every array or mapping it clears is valid by the library, and where it is not sure the
library decides, with its own messages and paths."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pytest_mlrepro
from pytest_mlrepro._json_schema import compile_check, validator

GOLDEN_SCHEMA = json.loads(
    (Path(pytest_mlrepro.__file__).parent / "golden.schema.json").read_text()
)
SAMPLE_ROW = GOLDEN_SCHEMA["properties"]["samples"]["items"]
DIGEST = GOLDEN_SCHEMA["properties"]["data"]["additionalProperties"]
FRAGMENTS: list[Any] = [
    SAMPLE_ROW,
    DIGEST,
    {"type": "integer", "minimum": 0, "maximum": 9},
    {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 3},
    {"type": "array", "uniqueItems": True, "items": {"type": ["integer", "string"]}},
    {"enum": [1, "a", None]},
    {"const": 2},
    {"type": "string", "minLength": 2, "pattern": "^[a-c]+$"},
]

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 12)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.sampled_from([1.0, 0.0, 2.0])
    | st.text("abcz0f\n", max_size=66),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text("ab", max_size=2), inner),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(value=json_values, which=st.integers(0, len(FRAGMENTS) - 1))
def test_a_value_the_pass_clears_is_valid_by_the_library(value: Any, which: int) -> None:
    schema = FRAGMENTS[which]
    if compile_check(schema)(value):
        assert jsonschema.Draft202012Validator(schema).is_valid(value), (schema, value)


def test_the_pass_clears_the_rows_a_golden_holds_and_is_unsure_of_near_misses() -> None:
    assert compile_check(SAMPLE_ROW)(["img1", 3, [3, 7, 1], [0.9, 0.05, 0.01]])
    for row in (
        ["img1", 3.0, [3], [0.9]],  # 1.0-style integer: the library's to judge
        ["img1", True, [3], [0.9]],  # a bool is no integer
        ["img1", 3, [3, 3], [0.9]],  # not unique
        ["", 3, [3], [0.9]],  # minLength
        ["img1", 3, [3], [0.9], "extra"],  # items: false after the prefix
        ["img1", 3, [], [0.9]],  # minItems of the classes
    ):
        assert not compile_check(SAMPLE_ROW)(row), row
    assert compile_check(DIGEST)("ab" * 32) and not compile_check(DIGEST)("AB" * 32)
    assert not compile_check({"type": "integer", "format": "x"})(1)  # an unknown keyword


def test_the_library_judges_what_the_pass_does_not_clear_with_its_own_paths() -> None:
    schema = {"type": "object", "properties": {"samples": {"type": "array", "items": SAMPLE_ROW}}}
    document = {"samples": [["a", 1, [1], [0.5]]] * 50 + [["b", 1, [1, 1], [0.5]]]}
    ours = [(list(e.absolute_path), e.message) for e in validator(schema).iter_errors(document)]
    library = jsonschema.Draft202012Validator(schema).iter_errors(document)
    assert ours == [(list(e.absolute_path), e.message) for e in library]
    assert ours and ours[0][0] == ["samples", 50, 2]


@pytest.mark.parametrize("strict", [True, False])
def test_strict_integers_refuse_a_float_integer_only_when_asked(strict: bool) -> None:
    schema = {"type": "array", "items": {"type": "integer"}}
    assert validator(schema, strict_integers=strict).is_valid([1, 2.0]) is not strict


def test_a_mapping_of_digests_is_cleared_or_left_to_the_library() -> None:
    schema = {"type": "object", "additionalProperties": DIGEST}
    good = {f"s{i}": f"{i:064x}" for i in range(300)}
    assert validator(schema).is_valid(good)
    bad = {**good, "s7": "not a digest"}
    (error,) = validator(schema).iter_errors(bad)
    assert list(error.absolute_path) == ["s7"]
