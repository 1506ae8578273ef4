"""JSON Schema generated from dataclasses and compiled by fastjsonschema to read files back, so
that a published schema cannot drift from its types (docs/measurements.md)."""

from __future__ import annotations

import dataclasses
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal

from ._schema import to_plain, yaml_key

JsonSchema = dict[str, Any]


def draft07(schema: Any) -> Any:
    """Draft 2020-12 in the draft-07 words fastjsonschema compiles (``prefixItems``)."""
    if isinstance(schema, list):
        return [draft07(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: draft07(v) for k, v in schema.items() if k not in ("prefixItems", "$schema")}
    if "prefixItems" in schema:
        out["items"] = draft07(schema["prefixItems"])
        if "items" in schema:
            out["additionalItems"] = draft07(schema["items"])
    return out


@dataclasses.dataclass(frozen=True)
class SchemaError:
    """The first value a schema refuses; ``schema``'s ``title`` says what the value should be,
    ``message`` is in jsonschema's words."""

    path: tuple[str | int, ...]
    rule: str
    schema: JsonSchema
    value: Any
    message: str


_MESSAGES: dict[str, Callable[[Any, Any], str]] = {
    "type": lambda v, r: (
        f"{v!r} is not of type {', '.join(map(repr, r if isinstance(r, list) else [r]))}"
    ),
    "enum": lambda v, r: f"{v!r} is not one of {r!r}",
    "const": lambda v, r: f"{r!r} was expected",
    "pattern": lambda v, r: f"{v!r} does not match {r!r}",
    "uniqueItems": lambda v, r: f"{v!r} has non-unique elements",
    "minimum": lambda v, r: f"{v!r} is less than the minimum of {r!r}",
    "maximum": lambda v, r: f"{v!r} is greater than the maximum of {r!r}",
    "exclusiveMinimum": lambda v, r: f"{v!r} is less than or equal to the minimum of {r!r}",
    "minItems": lambda v, r: f"{v!r} should be non-empty" if r == 1 else f"{v!r} is too short",
    "maxItems": lambda v, r: f"{v!r} is too long",
    "minLength": lambda v, r: f"{v!r} should be non-empty" if r == 1 else f"{v!r} is too short",
}


class Validator:
    """Compiled once; fastjsonschema is imported here, not with the plugin."""

    def __init__(self, schema: JsonSchema) -> None:
        import fastjsonschema

        self.schema = schema
        self.check = fastjsonschema.compile(draft07(schema), use_default=False, use_formats=False)
        self.refused = fastjsonschema.JsonSchemaValueException

    def first_error(self, document: Any) -> SchemaError | None:
        try:
            self.check(document)
            return None
        except self.refused as exc:
            path = error_path(document, exc.name or "data")
            rule, schema, value, said = exc.rule or "", exc.definition or {}, exc.value, exc.message
        arms = [a for a in schema.get("anyOf", ()) if a != {"type": "null"}]
        if rule == "anyOf" and value is not None and len(arms) == 1:  # an optional field's own
            # (fastjsonschema names the arm's references in full: the root's $id, then #/$defs)
            root = {k: v for k, v in self.schema.items() if k in ("$id", "$defs")}
            inner = Validator({**root, **arms[0]}).first_error(value)
            if inner is not None:
                return dataclasses.replace(inner, path=(*path, *inner.path))
        if rule == "required":
            missing = next(k for k in schema["required"] if k not in value)
            return SchemaError(path, rule, schema, value, f"{missing!r} is a required property")
        if rule == "propertyNames":
            names = schema["propertyNames"].get("enum", [])
            value = next((k for k in value if k not in names), value)
            rule, schema = "enum", {**schema["propertyNames"]}
        words = _MESSAGES.get(rule)
        message = words(value, schema[rule]) if words else said.split(" ", 1)[-1]
        return SchemaError(path, rule, schema, value, message)


def error_path(document: Any, name: str) -> tuple[str | int, ...]:
    """Found by walking ``document``: a key may hold dots or brackets."""
    path: list[str | int] = []
    rest, node = name[len("data") :], document
    while rest:
        if isinstance(node, list) and (index := re.match(r"\[(\d+)\]", rest)):
            path.append(int(index[1]))
            node, rest = node[int(index[1])], rest[index.end() :]
            continue
        keys = [str(k) for k in node] if isinstance(node, dict) else []
        ends = [k for k in keys if re.match(r"\." + re.escape(k) + r"(?=[.\[]|$)", rest)]
        if not ends:
            break
        key = max(ends, key=len)
        path.append(key)
        node, rest = node[key], rest[len(key) + 1 :]
    return tuple(path)


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
    """Each class once under ``$defs``; ``rules[class]`` adds to a field's schema by its key (the
    object's: ``""``)."""

    draft = "https://json-schema.org/draft/2020-12/schema"
    defs_key: Literal["definitions", "$defs"] = "$defs"
    closed = defaults = nullable = False

    def __init__(self, rules: Mapping[str, Mapping[str, JsonSchema]]) -> None:
        self.rules = rules
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
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin is typing.Annotated:  # a type with its schema: Annotated[int, {"minimum": 0}]
            return merged(self.of_type(args[0]), args[1])
        if (isinstance(tp, type) and tp in _SCALAR_TYPES) or tp is Any:  # (Annotated: unhashable)
            return dict(_SCALAR_TYPES[tp])
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
        hints = typing.get_type_hints(cls, include_extras=True)
        rules = self.rules.get(cls.__name__, {})
        properties: dict[str, JsonSchema] = {}
        required: list[str] = []
        for f in dataclasses.fields(cls):
            if not f.init or f.metadata.get("internal") or f.metadata.get("extra"):
                continue
            key = yaml_key(f)
            properties[key] = prop = merged(self.field_schema(f, hints[f.name]), rules.get(key, {}))
            default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()
            if default is dataclasses.MISSING:
                required.append(key)
            elif self.defaults:
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
