"""The compiled validator of pytest_mlrepro._json_schema judges as the jsonschema library does
(on the keywords the generated schemas use) and names the first bad value by its path in the
document, in jsonschema's words."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_mlrepro._json_schema import Validator, error_path
from pytest_mlrepro.goldens import golden_schema

GOLDEN_SCHEMA = golden_schema()
SAMPLE_ROW = GOLDEN_SCHEMA["properties"]["samples"]["items"]
DIGEST = GOLDEN_SCHEMA["properties"]["data"]["additionalProperties"]
FRAGMENTS: list[Any] = [
    SAMPLE_ROW,
    DIGEST,
    {"type": "integer", "minimum": 0, "maximum": 9},
    {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 3},
    {"type": "array", "uniqueItems": True, "items": {"type": "string"}},
    {"enum": [1, "a", None]},
    {"type": "string", "minLength": 2, "pattern": "^[a-c]+$"},
    {"type": "object", "required": ["a"], "properties": {"a": {"type": ["integer", "null"]}}},
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
def test_the_compiled_validator_judges_as_the_library(value: Any, which: int) -> None:
    schema = FRAGMENTS[which]
    library = jsonschema.Draft202012Validator(schema).is_valid(value)
    assert (Validator(schema).first_error(value) is None) is library, (schema, value)


def test_a_golden_row_is_refused_at_its_first_bad_value_with_the_title_of_its_schema() -> None:
    schema = {"type": "object", "properties": {"samples": {"type": "array", "items": SAMPLE_ROW}}}
    document = {"samples": [["a", 1, [1], [0.5]]] * 50 + [["b", 1, [1, 1], [0.5]]]}
    error = Validator(schema).first_error(document)
    assert error is not None and error.path == ("samples", 50, 2) and error.rule == "uniqueItems"
    assert error.schema["title"] == "a non-empty list of distinct class indices"
    assert Validator(schema).first_error({"samples": [["b", 1, [1], [0.5], 7]]}) is not None


def test_a_key_with_dots_and_brackets_is_named_whole() -> None:
    schema = {"type": "object", "additionalProperties": DIGEST}
    good = {f"s{i}.png": f"{i:064x}" for i in range(300)}
    assert Validator(schema).first_error(good) is None
    for key in ("a.png", "a.png[0]", "x.y.z"):
        error = Validator(schema).first_error({**good, key: "not a digest"})
        assert error is not None and error.path == (key,)
        assert error.message == "'not a digest' does not match '^[0-9a-f]{64}$'"
    assert error_path({"a": {"b.c": [0, {"d": 1}]}}, "data.a.b.c[1].d") == ("a", "b.c", 1, "d")


@pytest.mark.parametrize(
    ("value", "path", "message"),
    [
        ({"inner": {}}, ("inner",), "'n' is a required property"),
        ({"inner": {"n": "7"}}, ("inner", "n"), "'7' is not of type 'integer'"),
        ({"inner": {"n": -1}}, ("inner", "n"), "-1 is less than the minimum of 0"),
        ({"inner": None, "kind": "c"}, ("kind",), "'c' is not one of ['a', 'b']"),
        ({"names": {"z": 1}}, ("names",), "'z' is not one of ['x', 'y']"),
    ],
)
def test_an_optional_object_is_judged_inside_and_worded_as_jsonschema_words_it(
    value: Any, path: tuple[str, ...], message: str
) -> None:
    schema = {
        "$defs": {
            "Inner": {
                "type": "object",
                "required": ["n"],
                "properties": {"n": {"type": "integer", "minimum": 0}},
            }
        },
        "type": "object",
        "properties": {
            "inner": {"anyOf": [{"$ref": "#/$defs/Inner"}, {"type": "null"}]},
            "kind": {"enum": ["a", "b"]},
            "names": {"type": "object", "propertyNames": {"enum": ["x", "y"]}},
        },
    }
    error = Validator(schema).first_error(value)
    assert error is not None and (error.path, error.message) == (path, message)
    library = jsonschema.exceptions.best_match(
        jsonschema.Draft202012Validator(schema).iter_errors(value)
    )
    assert library is not None and library.message == message
