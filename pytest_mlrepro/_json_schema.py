"""JSON Schema: generated from dataclasses, and validated by the ``jsonschema`` library with one
fast pass over long arrays.

:class:`SchemaWriter` writes the schema of a dataclass tree (the manifest's, draft-07 for editors;
the results file's, draft 2020-12), so that a published schema cannot drift from the types it
describes. A field's type gives its schema, ``metadata={"schema": {...}}`` and the writer's
``rules`` add what a type cannot say (bounds, patterns, rules that span fields).

The results file and the golden are each described by one JSON Schema and validated by
jsonschema, which checks value by value in Python: a golden's 1,000 samples took 190 ms against
33 ms for the hand validator it replaced, and a 50,000-sample file takes seconds. Before the
library's ``items`` check of an array, a :func:`compile_check` runs one pass over its elements,
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

import dataclasses
import inspect
import re
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

from ._schema import to_plain, yaml_key

JsonSchema = dict[str, Any]
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
    """Whether a value is valid under ``schema`` by the rules this module knows (see the module
    docstring; False also when it is not sure), as a check made once: a chain of the checks its
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


def validator(schema: Mapping[str, Any], *, strict_integers: bool = False) -> Any:
    """The library's Draft 2020-12 validator for ``schema`` whose ``items`` and
    ``additionalProperties`` checks first try a :func:`compile_check` on the array's elements
    and the mapping's values. ``strict_integers``: ``1.0`` is no integer (the library counts it as
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


_SCALAR_TYPES: dict[Any, JsonSchema] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    Any: {},
}


def merged(schema: JsonSchema, extra: Mapping[str, Any]) -> JsonSchema:
    """``schema`` with ``extra``'s keywords, nested objects merged key by key."""
    out = dict(schema)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = merged(out[key], value)
        else:
            out[key] = value
    return out


class SchemaWriter:
    """Writes the JSON Schema of dataclasses, each class once under ``defs`` (``definitions``
    in draft-07, ``$defs`` in 2020-12). A field without a default is required; one whose type
    admits None may be null. ``rules[class name]`` adds to a field's schema by its key and to the
    object's under ``""``. ``closed``: objects admit no other key; ``defaults``: fields state
    their defaults; ``nullable``: an object may be null (an empty YAML mapping: all defaults)."""

    def __init__(
        self,
        draft: str,
        defs: Literal["definitions", "$defs"],
        rules: Mapping[str, Mapping[str, JsonSchema]],
        *,
        closed: bool,
        defaults: bool,
        nullable: bool,
    ) -> None:
        self.draft, self.defs_key, self.rules = draft, defs, rules
        self.closed, self.defaults, self.nullable = closed, defaults, nullable
        self.defs: dict[str, JsonSchema] = {}

    def document(self, root: type, **head: Any) -> JsonSchema:
        """The schema of a file whose top-level object is ``root``; ``head``: its title, id."""
        body = {**head, **self.object_schema(root, nullable=False)}
        return {"$schema": self.draft, **body, self.defs_key: dict(sorted(self.defs.items()))}

    def ref(self, cls: type) -> JsonSchema:
        name = cls.__name__
        if name not in self.defs:
            self.defs[name] = {}  # taken: a type that refers to itself stops here
            self.defs[name] = self.object_schema(cls, nullable=self.nullable)
        return {"$ref": f"#/{self.defs_key}/{name}"}

    def of_type(self, tp: Any) -> JsonSchema:
        if tp in _SCALAR_TYPES:
            return dict(_SCALAR_TYPES[tp])
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is Literal:
            return {"enum": list(args)}
        if origin in (typing.Union, types.UnionType):
            arms = [self.of_type(a) for a in args if a is not type(None)]
            schema = arms[0] if len(arms) == 1 else {"anyOf": arms}
            if type(None) not in args:
                return schema
            if isinstance(schema.get("type"), str):  # its errors name the type (not "any of")
                return {**schema, "type": [schema["type"], "null"]}
            if "enum" in schema:  # its errors name the values
                return {"enum": [*schema["enum"], None]}
            return {"anyOf": [*schema.get("anyOf", [schema]), {"type": "null"}]}
        if origin is list or (origin is tuple and args[1:] == (Ellipsis,)):
            return {"type": "array", "items": self.of_type(args[0])}
        if origin is tuple:  # a fixed length, each item its own type
            prefix = "prefixItems" if self.defs_key == "$defs" else "items"
            items = [self.of_type(a) for a in args]
            return {"type": "array", prefix: items, "minItems": len(args), "maxItems": len(args)}
        if origin is dict:
            return {"type": "object", "additionalProperties": self.of_type(args[1])}
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            return self.ref(tp)
        raise TypeError(f"no JSON Schema for the type {tp!r}")

    def field_schema(self, f: dataclasses.Field[Any], hint: Any) -> JsonSchema:
        """Its type's schema with what ``metadata={"schema": {...}}`` adds (bounds...)."""
        return merged(self.of_type(hint), f.metadata.get("schema", {}))

    def object_schema(self, cls: type, *, nullable: bool) -> JsonSchema:
        hints = typing.get_type_hints(cls)
        rules = self.rules.get(cls.__name__, {})
        properties: dict[str, JsonSchema] = {}
        required: list[str] = []
        for f in dataclasses.fields(cls):
            if not f.init or f.metadata.get("internal") or f.metadata.get("extra"):
                continue
            key = yaml_key(f)
            properties[key] = prop = merged(self.field_schema(f, hints[f.name]), rules.get(key, {}))
            if f.default is not dataclasses.MISSING:
                default: Any = f.default
            elif f.default_factory is not dataclasses.MISSING:
                default = f.default_factory()
            else:
                required.append(key)
                continue
            if self.defaults:
                prop["default"] = to_plain(default)
        unknown = set(rules) - set(properties) - {""}
        if unknown:
            raise TypeError(f"rules name keys {sorted(unknown)} that {cls.__name__} does not have")
        schema: JsonSchema = {
            "type": ["object", "null"] if nullable else "object",
            "properties": properties,
        }
        if self.closed:
            schema["additionalProperties"] = False
        doc = cls.__dict__.get("__doc__")  # its own, not one inherited (a step's from Step)
        # dataclasses make up a docstring (the signature) for a class that has none.
        if doc and not doc.startswith(f"{cls.__name__}("):
            schema["description"] = inspect.cleandoc(doc)
        if required:
            schema["required"] = required
        return merged(schema, rules.get("", {}))


__all__ = ["JsonSchema", "SchemaWriter", "compile_check", "merged", "validator"]
