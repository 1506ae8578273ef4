"""JSON Schema validation by the ``jsonschema`` library, with one fast pass over long arrays.

The results file and the golden are each described by one JSON Schema and validated by
jsonschema, which checks value by value in Python: a golden's 1,000 samples took 190 ms against
33 ms for the hand validator it replaced, and a 50,000-sample file takes seconds. Before the
library's ``items`` check of an array, :func:`plainly_valid` runs one pass over its elements,
interpreting the small part of JSON Schema these files' rows use (``type``, ``const``,
``enum``, ``minimum``, ``maximum``, ``minLength``, ``pattern``, ``minItems``, ``maxItems``,
``uniqueItems``, ``prefixItems``, ``items``); likewise over the values of a mapping that has
only ``additionalProperties``. Its answer is "valid" or "not sure": a keyword it
does not know, a value it is unsure of (``1.0`` for an integer, ``True`` beside ``1`` in a
unique list) or a value the schema rejects leaves the whole array to the library. So what is
accepted, and every message and path, is the library's; the pass only saves the library's time
on the arrays it clears (``tests/unit/test_json_schema.py`` holds the two to that).

jsonschema is imported by :func:`validator`, that is where a file is read back: importing the
plugin imports no validator.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

Check = Callable[[Any], bool]

_TYPES: dict[str, Check] = {
    # JSON's types as the library counts them, less what it may count otherwise: a bool is no
    # integer or number, and an integer is an int (the library may take 1.0 for one).
    "integer": lambda v: type(v) is int,
    "number": lambda v: type(v) is int or type(v) is float,
    "string": lambda v: type(v) is str,
    "array": lambda v: type(v) is list,
    "object": lambda v: type(v) is dict,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
}
_SCALARS = (int, float, str, bool, type(None))
_ARRAY_KEYS = frozenset({"minItems", "maxItems", "uniqueItems", "prefixItems", "items"})
_KNOWN = _ARRAY_KEYS | {
    "title",
    "description",
    "$comment",
    "type",
    "const",
    "enum",
    "minimum",
    "maximum",
    "minLength",
    "pattern",
}


def _same(value: Any, expected: Any) -> bool:
    """JSON equality where it is certain: scalars of one Python type (``1`` and ``True`` are
    equal in Python, not in JSON)."""
    return type(value) is type(expected) and type(value) in _SCALARS and value == expected


def _never(value: Any) -> bool:
    return False


def _always(value: Any) -> bool:
    return True


def compile_check(schema: Any) -> Check:
    """The check of :func:`plainly_valid` for ``schema``, made once: a chain of the checks its
    keywords ask for (a value is cleared when every one of them clears it)."""
    if schema is True:
        return _always
    if not isinstance(schema, Mapping) or not schema.keys() <= _KNOWN:
        return _never
    checks: list[Check] = []
    kinds = schema.get("type")
    if kinds is not None:
        names = [kinds] if isinstance(kinds, str) else list(kinds)
        if not all(name in _TYPES for name in names):
            return _never
        tests = [_TYPES[name] for name in names]
        checks.append(tests[0] if len(tests) == 1 else lambda v: any(t(v) for t in tests))
    if "const" in schema:
        const = schema["const"]
        checks.append(lambda v: _same(v, const))
    if "enum" in schema:
        enum = list(schema["enum"])
        checks.append(lambda v: any(_same(v, e) for e in enum))
    if "minimum" in schema or "maximum" in schema:
        low, high = schema.get("minimum"), schema.get("maximum")
        number = _TYPES["number"]
        checks.append(
            lambda v: number(v) and (low is None or v >= low) and (high is None or v <= high)
        )
    if "minLength" in schema:
        least = schema["minLength"]
        checks.append(lambda v: type(v) is str and len(v) >= least)
    if "pattern" in schema:
        search = re.compile(schema["pattern"]).search  # the library's own test: re.search
        checks.append(lambda v: type(v) is str and search(v) is not None)
    if _ARRAY_KEYS & schema.keys():
        checks.append(_array_check(schema))
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]
    return lambda v: all(check(v) for check in checks)


def _array_check(schema: Mapping[str, Any]) -> Check:
    least, most = schema.get("minItems", 0), schema.get("maxItems")
    unique = bool(schema.get("uniqueItems"))
    prefix = [compile_check(s) for s in schema.get("prefixItems", [])]
    items = schema.get("items", True)
    rest: Check | None = None if items is False else compile_check(items)

    def check(value: Any) -> bool:
        if type(value) is not list or len(value) < least:
            return False
        if most is not None and len(value) > most:
            return False
        if unique and (
            not all(type(v) in _SCALARS for v in value) or len(set(value)) != len(value)
        ):
            return False
        if not all(c(v) for c, v in zip(prefix, value)):
            return False
        if rest is None:
            return len(value) <= len(prefix)
        return rest is _always or all(rest(v) for v in value[len(prefix) :])

    return check


def plainly_valid(schema: Any, value: Any) -> bool:
    """Whether ``value`` is valid under ``schema`` by the rules this module knows (see the
    module docstring); False also when it is not sure."""
    return compile_check(schema)(value)


def validator(schema: Mapping[str, Any], *, strict_integers: bool = False) -> Any:
    """The library's Draft 2020-12 validator for ``schema`` whose ``items`` and
    ``additionalProperties`` checks first try :func:`plainly_valid` on the array's elements and
    the mapping's values. ``strict_integers``: ``1.0`` is no integer (the library counts it as
    one, as JSON Schema does since draft 6)."""
    import jsonschema

    base = jsonschema.Draft202012Validator
    library_items = base.VALIDATORS["items"]
    library_additional = base.VALIDATORS["additionalProperties"]
    compiled: dict[int, Check] = {}  # by the id of a sub-schema of ``schema``, kept alive by it

    def check_of(sub: Any) -> Check:
        found = compiled.get(id(sub))
        if found is None:
            found = compiled[id(sub)] = compile_check(sub)
        return found

    def items(validator: Any, items: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if isinstance(instance, list) and isinstance(items, Mapping):
            check = check_of(items)
            if all(check(v) for v in instance[len(schema.get("prefixItems", [])) :]):
                return
        yield from library_items(validator, items, instance, schema)

    def additional(validator: Any, extra: Any, instance: Any, schema: Any) -> Iterator[Any]:
        # Only a mapping whose every key is an additional one (no properties, no patterns).
        if (
            isinstance(instance, dict)
            and isinstance(extra, Mapping)
            and "properties" not in schema
            and "patternProperties" not in schema
        ):
            check = check_of(extra)
            if all(check(v) for v in instance.values()):
                return
        yield from library_additional(validator, extra, instance, schema)

    checker = base.TYPE_CHECKER
    if strict_integers:
        checker = checker.redefine("integer", lambda _, value: type(value) is int)
    extend: Any = jsonschema.validators.extend  # not annotated in jsonschema 4.x
    keywords = {"items": items, "additionalProperties": additional}
    return extend(base, validators=keywords, type_checker=checker)(schema)


__all__ = ["compile_check", "plainly_valid", "validator"]
