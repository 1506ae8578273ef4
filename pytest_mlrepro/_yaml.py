"""Safe YAML loading that remembers the line of every value, composed here from PyYAML's events
so that nesting and alias expansion are bounded; every failure names the file and a line."""

from __future__ import annotations

import codecs
import re
from typing import Any, Protocol

import yaml
from yaml.events import (
    AliasEvent,
    CollectionStartEvent,
    Event,
    MappingEndEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import CollectionNode, MappingNode, Node, ScalarNode, SequenceNode

from .errors import ManifestError

KeyPath = tuple[str | int, ...]

MAX_BYTES = 1_000_000
MAX_NODES = 50_000
MAX_DEPTH = 50

# libyaml parses about fifteen times faster than the pure-Python parser; both give the same events.
PARSER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_STANDARD = "tag:yaml.org,2002:"
_MAP, _SEQ, _MERGE = _STANDARD + "map", _STANDARD + "seq", _STANDARD + "merge"
# Scalar tags whose (safe) constructors may run: plain data only.
_SCALAR_TAGS = frozenset(
    _STANDARD + name for name in ("str", "int", "float", "bool", "null", "timestamp", "binary")
)


def _tag_refused(tag: str) -> str:
    shown = "!!" + tag[len(_STANDARD) :] if tag.startswith(_STANDARD) else tag
    return (
        f"the tag {shown!r} is not allowed: a manifest is plain data (mappings, lists, "
        "strings, numbers, booleans, null) and nothing in it is ever constructed or executed"
    )


class _Marked(Protocol):
    """A position in the YAML text: PyYAML's ``Mark`` or libyaml's (two classes, one shape)."""

    @property
    def line(self) -> int: ...


_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")


class _Lines:
    """YAML lines to an editor's: YAML 1.1 also breaks at CR, NEL, U+2028 and U+2029."""

    def __init__(self, text: str) -> None:
        self.table = [1]
        editor = 1
        for match in _BREAK.finditer(text):
            editor += "\n" in match.group()
            self.table.append(editor)

    def __call__(self, mark: _Marked | None) -> int:
        if mark is None:  # the parser's events and nodes always have one: None only in the types
            return 1
        return self.table[min(max(mark.line, 0), len(self.table) - 1)]


class _EventSource(Protocol):
    """What is used of PyYAML's safe loaders (whose stubs leave these methods untyped)."""

    def get_event(self) -> Event: ...
    def check_event(self, *choices: type[Event]) -> bool: ...
    def resolve(self, kind: type[Node], value: str | None, implicit: Any) -> str: ...
    def construct_object(self, node: Node) -> Any: ...
    def dispose(self) -> None: ...


class _Reader:
    """One document, composed like ``yaml.composer.Composer`` but bounded."""

    def __init__(self, file: str, loader: _EventSource, line: _Lines) -> None:
        self.file = file
        self.loader = loader
        self.line = line
        self.anchors: dict[str, Node] = {}
        self.nodes = 0
        self.lines: dict[KeyPath, int] = {}
        self.merging: set[int] = set()  # mappings whose '<<' is being resolved (cycle guard)
        self.sizes: dict[int, int] = {}  # node id → values it expands to

    def fail(self, at: Node | _Marked | None, path: KeyPath, message: str) -> ManifestError:
        mark = at.start_mark if isinstance(at, Node) else at
        return ManifestError(self.file, self.line(mark), format_path(path), message)

    def single_document(self) -> Node:
        loader = self.loader
        loader.get_event()  # stream start
        if loader.check_event(StreamEndEvent):
            raise ManifestError(self.file, 1, "", "the file is empty")
        loader.get_event()  # document start
        root = self._compose()
        loader.get_event()  # document end
        if not loader.check_event(StreamEndEvent):
            event = loader.get_event()
            raise self.fail(
                event.start_mark,
                (),
                "expected a single document, found another one "
                f"(the first starts on line {self.line(root.start_mark)})",
            )
        loader.get_event()  # stream end
        return root

    def _compose(self, path: KeyPath = ()) -> Node:
        # Recursive, one level of the document a call: the depth check below bounds the stack.
        loader = self.loader
        event = loader.get_event()
        if isinstance(event, AliasEvent):
            if event.anchor not in self.anchors:
                raise self.fail(event.start_mark, path, f"undefined alias *{event.anchor}")
            return self.anchors[event.anchor]
        if not isinstance(event, (ScalarEvent, CollectionStartEvent)):
            # The parser gives no other event here; checked rather than assumed.
            raise self.fail(event.start_mark, path, f"unexpected {type(event).__name__}")
        if len(path) > MAX_DEPTH:
            raise self.fail(event.start_mark, path, f"nested deeper than {MAX_DEPTH} levels")
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise self.fail(
                event.start_mark, path, f"the document has more than {MAX_NODES} values"
            )
        if event.anchor in self.anchors:
            first = self.line(self.anchors[event.anchor].start_mark)
            raise self.fail(
                event.start_mark,
                path,
                f"anchor &{event.anchor} is defined twice (first on line {first})",
            )
        tag = event.tag
        # The ignores: types-PyYAML lets nodes hold only PyYAML's own Mark, but with libyaml
        # they hold libyaml's Mark, as in yaml.composer (a class with the same attributes).
        if isinstance(event, ScalarEvent):
            if tag is None or tag == "!":
                tag = loader.resolve(ScalarNode, event.value, event.implicit)
            start, end = event.start_mark, event.end_mark
            node: Node = ScalarNode(tag, event.value, start, end, style=event.style)  # type: ignore[arg-type]
        else:
            kind = SequenceNode if isinstance(event, SequenceStartEvent) else MappingNode
            if tag is None or tag == "!":
                tag = loader.resolve(kind, None, event.implicit)
            node = kind(tag, [], event.start_mark, None, flow_style=event.flow_style)  # type: ignore[arg-type]
        if event.anchor is not None:
            self.anchors[event.anchor] = node
        if isinstance(node, SequenceNode):
            while not loader.check_event(SequenceEndEvent):
                node.value.append(self._compose((*path, len(node.value))))
        elif isinstance(node, MappingNode):
            while not loader.check_event(MappingEndEvent):
                key = self._compose(path)  # errors in a key point at the mapping
                name: str = key.value if isinstance(key, ScalarNode) else "?"
                node.value.append((key, self._compose((*path, name))))
        if isinstance(node, CollectionNode):
            node.end_mark = loader.get_event().end_mark
        return node

    def measure(self, node: Node, path: KeyPath, active: set[int]) -> int:
        """Values ``node`` expands to, counted once per node: an alias bomb (or a self-alias) is
        refused before any of it is built."""
        key = id(node)
        if key in self.sizes:
            return self.sizes[key]
        if key in active:
            raise self.fail(node, path, "an alias refers to a value that contains it (a cycle)")
        if len(path) > MAX_DEPTH:
            raise self.fail(node, path, f"nested deeper than {MAX_DEPTH} levels")
        total = 1
        if isinstance(node, (MappingNode, SequenceNode)):
            active.add(key)
            if isinstance(node, SequenceNode):
                for index, item in enumerate(node.value):
                    total += self.measure(item, (*path, index), active)
            else:
                for key_node, value_node in node.value:
                    name = key_node.value if isinstance(key_node, ScalarNode) else "?"
                    total += self.measure(key_node, path, active)
                    total += self.measure(value_node, (*path, name), active)
            active.discard(key)
        if total > MAX_NODES:
            raise self.fail(
                node, path, f"document expands to more than {MAX_NODES} values (a YAML alias bomb?)"
            )
        self.sizes[key] = total
        return total

    def build(self, node: Node, path: KeyPath) -> Any:
        # Bounded by measure(), which load_yaml calls first: build visits no more nodes, and
        # none deeper, than it counted (merged mappings are built at their mapping's depth).
        self.lines.setdefault(path, self.line(node.start_mark))
        if isinstance(node, ScalarNode):
            return self._scalar(node, path)
        if node.tag != (_MAP if isinstance(node, MappingNode) else _SEQ):
            raise self.fail(node, path, _tag_refused(node.tag))
        if isinstance(node, MappingNode):
            return self._mapping(node, path)
        return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]

    def _scalar(self, node: Node, path: KeyPath) -> Any:
        if node.tag not in _SCALAR_TAGS:
            raise self.fail(node, path, _tag_refused(node.tag))
        try:
            return self.loader.construct_object(node)
        except (yaml.YAMLError, ValueError, OverflowError, TypeError) as exc:
            problem = getattr(exc, "problem", None) or exc
            raise self.fail(node, path, f"cannot read value: {problem}") from None

    def _mapping(self, node: MappingNode, path: KeyPath) -> dict[str, Any]:
        """Keys given once; with ``<<`` merges, explicit keys win, then the first merged one."""
        merged: dict[str, Any] | None = None
        explicit: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE and isinstance(key_node, ScalarNode):
                if merged is not None:
                    raise self.fail(key_node, path, "duplicate merge key '<<'")
                self.merging.add(id(node))  # (a failure ends the whole load: no cleanup)
                merged = self._merge_sources(value_node, path)
                self.merging.discard(id(node))
                continue
            if not isinstance(key_node, ScalarNode):
                raise self.fail(key_node, path, "mapping keys must be plain strings")
            key = self._scalar(key_node, path)
            if not isinstance(key, str):
                raise self.fail(key_node, path, f"mapping key {shown_value(key)} is not a string")
            key_path = (*path, key)
            if key in explicit:
                first = self.lines.get(key_path)
                where = f" (first on line {first})" if first is not None else ""
                raise self.fail(key_node, key_path, f"duplicate key{where}")
            self.lines[key_path] = self.line(key_node.start_mark)
            explicit[key] = self.build(value_node, key_path)
        return {**(merged or {}), **explicit}

    def _merge_sources(self, value: Node, path: KeyPath) -> dict[str, Any]:
        sources = value.value if isinstance(value, SequenceNode) else [value]
        if not all(isinstance(s, MappingNode) for s in sources):
            raise self.fail(value, path, "'<<' merges a mapping or a list of mappings")
        if any(id(s) in self.merging for s in sources):
            raise self.fail(value, path, "'<<' merges a mapping into itself")
        merged: dict[str, Any] = {}
        for source in reversed(sources):  # the first mapping listed wins
            merged.update(self.build(source, path))
        return merged


def shown_value(value: Any) -> str:
    """``value`` as a message quotes it: its repr, cut to 60 characters."""
    try:
        text = repr(value)
    except ValueError:  # an integer with more digits than Python prints (sys.int_info)
        return f"<{value.bit_length()}-bit integer>" if isinstance(value, int) else "<a value>"
    return text if len(text) <= 60 else text[:57] + "..."


def too_large(size: str) -> str:
    return (
        f"the file is {size}, larger than the limit of {MAX_BYTES} bytes for a manifest "
        "(pytest_mlrepro._yaml.MAX_BYTES): refused without reading it"
    )


# YAML streams may be UTF-8, UTF-16 or UTF-32; the two wider ones start with a byte order mark.
# UTF-32 first: its little-endian mark begins with UTF-16's.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def decode(content: bytes, file: str) -> str:
    """UTF-8, or UTF-16/UTF-32 after their byte order mark, as the YAML specification allows."""
    encoding = next((name for bom, name in _BOMS if content.startswith(bom)), "utf-8-sig")
    try:
        return content.decode(encoding)
    except UnicodeDecodeError as exc:
        if encoding != "utf-8-sig":
            # A YAML file is UTF-8 unless a byte order mark says otherwise.
            raise ManifestError(
                file,
                1,
                "",
                f"not UTF-8 text, nor the {encoding.upper()} its byte order mark announces "
                f"(byte {exc.start})",
            ) from None
        bad = content[: exc.start].count(b"\n") + 1
        raise ManifestError(file, bad, "", f"not UTF-8 text (byte {exc.start})") from None


def load_yaml(content: bytes | str, file: str) -> tuple[Any, dict[KeyPath, int]]:
    """Parse one YAML document safely; return its value and the line of every path in it."""
    if isinstance(content, bytes):
        if len(content) > MAX_BYTES:
            raise ManifestError(file, None, "", too_large(f"{len(content)} bytes"))
        text = decode(content, file)
    else:
        text = content
    loader: _EventSource | None = None
    line = _Lines(text)
    try:
        loader = PARSER(text)  # the pure-Python reader checks every character here
        reader = _Reader(file, loader, line)
        node = reader.single_document()
        reader.measure(node, (), set())
        return reader.build(node, ()), reader.lines
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = line(mark) if mark is not None else 1
        raise ManifestError(file, at, "", f"invalid YAML: {exc.problem or exc}") from None
    except yaml.reader.ReaderError as exc:
        # libyaml counts UTF-8 bytes (latin-1: one character a byte), the pure-Python reader
        # characters.
        utf8 = text.encode("utf-8", "surrogatepass").decode("latin-1")
        at = (text if PARSER is yaml.SafeLoader else utf8)[: exc.position].count("\n") + 1
        raise ManifestError(
            file, at, "", f"invalid YAML: {exc.reason} (character {exc.character!r})"
        ) from None
    except yaml.YAMLError as exc:
        raise ManifestError(file, 1, "", f"invalid YAML: {exc}") from None
    except RecursionError:  # not expected (nothing recurses deeper than MAX_DEPTH): a safety net
        raise ManifestError(file, 1, "", "nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")


def format_path(path: KeyPath) -> str:
    """``("inputs", 0, "preprocess", 3)`` → ``inputs[0].preprocess[3]``; a key that is not a
    plain word is quoted, ``runtime['batch size']``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif not _PLAIN_KEY.fullmatch(part):
            out += f"[{part!r}]"
        else:
            out += f".{part}" if out else part
    return out
