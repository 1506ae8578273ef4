"""Plain YAML values into typed, frozen dataclasses, with errors that name the field; bounds live
in a field's ``metadata={"schema": ...}``, cross-field rules in ``check(self)``."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import types
import typing
from typing import TYPE_CHECKING, Any, Literal, TypeVar, Union, get_args, get_origin

from ._yaml import KeyPath, format_path, shown_value
from .errors import ManifestError


class Invalid(Exception):
    """A rule failed; ``field`` is relative to the object that raised it (``""`` for itself)."""

    def __init__(self, field: str | int | tuple[str | int, ...], message: str) -> None:
        if isinstance(field, tuple):
            self.path: KeyPath = field
        else:
            self.path = (field,) if field != "" else ()
        self.message = message
        super().__init__(message)


@dataclasses.dataclass
class Context:
    """Where values came from: the file and the line of each path."""

    file: str
    lines: dict[KeyPath, int]

    def line(self, path: KeyPath) -> int | None:
        cuts = (path[:cut] for cut in range(len(path), -1, -1))
        return next((self.lines[cut] for cut in cuts if cut in self.lines), None)

    def error(self, path: KeyPath, message: str) -> ManifestError:
        return ManifestError(self.file, self.line(path), format_path(path), message)


def suggest(word: str, choices: typing.Iterable[str]) -> str:
    by_lower = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    return f" (did you mean {by_lower[close[0]]!r}?)" if close else ""


def yaml_key(f: dataclasses.Field[Any]) -> str:
    return str(f.metadata.get("key", f.name))


# How messages name a value of each plain type, and several of them.
_WORDS: dict[Any, tuple[str, str]] = {
    bool: ("true or false", "booleans"),
    int: ("an integer", "integers"),
    float: ("a number", "numbers"),
    str: ("a string", "strings"),
}


def _describe(tp: Any) -> str:
    origin, args = get_origin(tp), get_args(tp)
    if tp in _WORDS:
        return _WORDS[tp][0]
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (list, tuple):
        count = "" if origin is list or args[1:] == (Ellipsis,) else f"{len(args)} "
        return f"a list of {count}{_WORDS.get(args[0], ('', 'items'))[1]}"
    if origin is dict or dataclasses.is_dataclass(tp):
        return "a mapping"
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(a) for a in args if a is not type(None))
    return str(tp)


def convert(tp: Any, value: Any, path: KeyPath, ctx: Context) -> Any:
    """Convert ``value`` (plain YAML data at ``path``) to type ``tp``, or raise ManifestError."""
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        arms = [arm for arm in get_args(tp) if arm is not type(None)]
        if value is None and len(arms) < len(get_args(tp)):
            return None
        errors: list[tuple[Any, ManifestError]] = []
        for arm in arms:
            try:
                return convert(arm, value, path, ctx)
            except ManifestError as exc:
                errors.append((arm, exc))
        # A single non-None arm gives its own, more precise, message; so does the one mapping
        # arm (a dataclass) when the value is a mapping.
        mapping_errors = [exc for arm, exc in errors if dataclasses.is_dataclass(arm)]
        if len(errors) == 1:
            raise errors[0][1]
        if isinstance(value, dict) and len(mapping_errors) == 1:
            raise mapping_errors[0]
        raise ctx.error(path, f"expected {_describe(tp)}, got {shown_value(value)}")
    if tp is Any:
        return value
    if tp in _WORDS:  # bool, int, float, str; a bool is no number
        kinds = (int, float) if tp is float else tp
        if not isinstance(value, kinds) or (tp is not bool and isinstance(value, bool)):
            raise ctx.error(path, f"expected {_describe(tp)}, got {shown_value(value)}")
        if tp is int and abs(value) > 2**53:
            raise ctx.error(path, f"integer {shown_value(value)} is out of range")
        if tp is float and not math.isfinite(float(value) if abs(value) < 1e308 else math.inf):
            raise ctx.error(path, f"expected a finite number, got {shown_value(value)}")
        return float(value) if tp is float else value
    if origin is Literal:
        choices = get_args(tp)
        if value in choices and type(value) in {type(c) for c in choices}:
            return value
        hint = suggest(value, [str(c) for c in choices]) if isinstance(value, str) else ""
        listed = ", ".join(repr(c) for c in choices)
        raise ctx.error(path, f"{shown_value(value)} is not one of {listed}{hint}")
    if origin is list or origin is tuple:
        if not isinstance(value, list):
            raise ctx.error(path, f"expected {_describe(tp)}, got {shown_value(value)}")
        args = get_args(tp)
        if origin is list or args[1:] == (Ellipsis,):
            args = (args[0],) * len(value)
        elif len(value) != len(args):
            raise ctx.error(path, f"expected {_describe(tp)}, got {len(value)} items")
        items = [convert(a, item, (*path, i), ctx) for i, (a, item) in enumerate(zip(args, value))]
        return items if origin is list else tuple(items)
    if origin is dict:
        key_tp, value_tp = get_args(tp)
        if not isinstance(value, dict):
            raise ctx.error(path, f"expected a mapping, got {shown_value(value)}")
        return {
            convert(key_tp, k, path, ctx): convert(value_tp, v, (*path, k), ctx)
            for k, v in value.items()
        }
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return convert_dataclass(tp, value, path, ctx)
    raise TypeError(f"unsupported schema type {tp!r}")  # a bug in the schema, not in the manifest


def unbuildable(tp: Any, seen: frozenset[type] = frozenset()) -> str | None:
    """Why :func:`convert` cannot build ``tp``, None when it can: asked at registration, not as
    a ``TypeError`` while a manifest loads."""
    origin, args = get_origin(tp), get_args(tp)
    if tp in (Any, bool, str, int, float, type(None)) or origin is Literal:
        return None
    if tp in (list, tuple, dict) or (origin in (list, tuple, dict) and not args):
        name = getattr(tp, "__name__", str(tp))
        example = "dict[str, float]" if dict in (tp, origin) else f"{name}[float]"
        return f"a bare {name} does not say what it holds: name the item type ({example})"
    if origin in (Union, types.UnionType, list, tuple, dict):
        arms = (arm for arm in args if arm is not Ellipsis)
        return next((why for arm in arms if (why := unbuildable(arm, seen))), None)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if tp in seen:
            return None
        try:
            hints = typing.get_type_hints(tp)
        except Exception as exc:  # a forward reference that does not resolve, ...
            return f"its type hints cannot be resolved ({type(exc).__name__}: {exc})"
        for f in dataclasses.fields(tp):
            why = unbuildable(hints.get(f.name, Any), seen | {tp})
            if why is not None:
                return f"{tp.__name__}.{f.name}: {why}"
        return None
    return f"{tp!r} is not a type a manifest value can be read as"


if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_D = TypeVar("_D", bound="DataclassInstance")

_hints = functools.cache(typing.get_type_hints)


def convert_dataclass(cls: type[_D], value: Any, path: KeyPath, ctx: Context) -> _D:
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise ctx.error(path, f"expected a mapping, got {shown_value(value)}")
    fields = {
        yaml_key(f): f for f in dataclasses.fields(cls) if f.init and not f.metadata.get("internal")
    }
    for key in value:
        if key not in fields:
            known = ", ".join(sorted(fields))
            raise ctx.error((*path, key), f"unknown key{suggest(key, fields)}; known keys: {known}")
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for key, f in fields.items():
        if key in value:
            # A field may name its own converter (a manifest's preprocessing steps).
            field_convert = f.metadata.get("convert", functools.partial(convert, hints[f.name]))
            kwargs[f.name] = field_convert(value[key], (*path, key), ctx)
            problem = broken_bound(f, kwargs[f.name])
            if problem is not None:
                raise ctx.error((*path, key), problem)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ctx.error(path, f"missing required key {key!r}")
    try:
        obj = cls(**kwargs)
        getattr(obj, "check", lambda: None)()
    except Invalid as exc:
        raise ctx.error((*path, *exc.path), exc.message) from None
    except Exception as exc:  # a rule (e.g. a registered custom step's) that failed to say Invalid
        # Still refused at its line, saying whose code to fix.
        raise ctx.error(
            path,
            f"{cls.__name__} refused these values with {type(exc).__name__}: {exc} "
            "(its check() should raise pytest_mlrepro.Invalid naming the field)",
        ) from None
    return obj


def broken_bound(f: dataclasses.Field[Any], value: Any) -> str | None:
    """Which bound ``value`` breaks, in words; None when it keeps them (or is None)."""
    bounds = f.metadata.get("schema", {})
    low, high, above = (bounds.get(k) for k in ("minimum", "maximum", "exclusiveMinimum"))
    if value is None:
        return None
    if isinstance(value, tuple):
        repeated = bounds.get("uniqueItems") and len(set(value)) != len(value)
        if len(value) >= bounds.get("minItems", 0) and not repeated:
            return None
    elif (
        (low is None or value >= low)
        and (high is None or value <= high)
        and (above is None or value > above)
    ):
        return None
    if "says" in f.metadata:
        return str(f.metadata["says"])
    if above is not None:
        return f"must be above {above} and at most {high}"
    if high is not None:
        return f"must be between {low} and {high}"
    return {0: "must not be negative", 1: "must be positive"}.get(low, f"must be at least {low}")


def to_plain(obj: Any) -> Any:
    """A dataclass tree back to plain data, every default filled in (the normalised form)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            if f.init and not f.metadata.get("internal"):
                value = getattr(obj, f.name)
                if value is None and f.metadata.get("plain_omit_none"):
                    continue  # an option that does not apply here (e.g. a backend's own)
                out[yaml_key(f)] = to_plain(value)
        return out
    if isinstance(obj, (list, tuple)):
        return [to_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): to_plain(v) for k, v in obj.items()}
    return obj
