"""An ONNX model's external data locations (not covered by its sha256), read with a minimal
protobuf reader: no onnx import, it runs before any framework loads anything."""

from __future__ import annotations

from collections.abc import Iterator

# Field numbers from onnx.proto (they are part of the format: never renumbered).
_MODEL_GRAPH, _MODEL_TRAINING, _MODEL_FUNCTIONS = 7, 20, 25
_GRAPH_NODE, _GRAPH_INITIALIZER, _GRAPH_SPARSE = 1, 5, 15
_NODE_ATTRIBUTE = 5
_ATTR_T, _ATTR_G, _ATTR_SPARSE, _ATTR_TENSORS, _ATTR_GRAPHS, _ATTR_SPARSES = 5, 6, 22, 10, 11, 23
_TENSOR_EXTERNAL = 13
_SPARSE_VALUES, _SPARSE_INDICES = 1, 2
_FUNCTION_NODE = 7
_TRAINING_INIT, _TRAINING_ALGORITHM = 1, 2
_ENTRY_KEY, _ENTRY_VALUE = 1, 2
_FIXED = {1: 8, 5: 4}  # wire type → bytes: fixed64, fixed32
_MAX_DEPTH = 64  # nested subgraphs; deeper is a malformed (or hostile) file


class NotOnnx(ValueError):
    """The bytes are not a well-formed ONNX protobuf."""


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(data) or shift > 63:
            raise NotOnnx("truncated or overlong varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(data: memoryview) -> Iterator[tuple[int, memoryview | None]]:
    """(field number, bytes of a length-delimited field or None) for each field of a message."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise NotOnnx("field number 0")
        if wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise NotOnnx("a field runs past the end of the file")
            yield number, data[pos : pos + length]
            pos += length
            continue
        if wire == 0:
            _, pos = _varint(data, pos)
        elif wire in _FIXED:
            pos += _FIXED[wire]
        else:
            raise NotOnnx(f"wire type {wire}")
        yield number, None
        if pos > len(data):
            raise NotOnnx("truncated")


def _messages(data: memoryview, *numbers: int) -> Iterator[tuple[int, memoryview]]:
    for number, value in _fields(data):
        if number in numbers and value is not None:
            yield number, value


def _tensor(data: memoryview, out: set[str]) -> None:
    for _, entry in _messages(data, _TENSOR_EXTERNAL):
        fields = dict(_messages(entry, _ENTRY_KEY, _ENTRY_VALUE))
        key = bytes(fields.get(_ENTRY_KEY, b"")).decode("utf-8", "replace")
        if key == "location":
            try:
                out.add(bytes(fields.get(_ENTRY_VALUE, b"")).decode("utf-8"))
            except UnicodeDecodeError:
                raise NotOnnx("an external data location is not UTF-8") from None


def _sparse(data: memoryview, out: set[str]) -> None:
    for _, tensor in _messages(data, _SPARSE_VALUES, _SPARSE_INDICES):
        _tensor(tensor, out)


def _nodes(data: memoryview, field: int, out: set[str], depth: int) -> None:
    for _, node in _messages(data, field):
        for _, attribute in _messages(node, _NODE_ATTRIBUTE):
            for number, value in _messages(
                attribute, _ATTR_T, _ATTR_G, _ATTR_SPARSE, _ATTR_TENSORS, _ATTR_GRAPHS,
                _ATTR_SPARSES,
            ):  # fmt: skip
                if number in (_ATTR_T, _ATTR_TENSORS):
                    _tensor(value, out)
                elif number in (_ATTR_SPARSE, _ATTR_SPARSES):
                    _sparse(value, out)
                else:
                    _graph(value, out, depth + 1)


def _graph(data: memoryview, out: set[str], depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise NotOnnx(f"subgraphs nested more than {_MAX_DEPTH} deep")
    for number, value in _messages(data, _GRAPH_INITIALIZER, _GRAPH_SPARSE):
        (_tensor if number == _GRAPH_INITIALIZER else _sparse)(value, out)
    _nodes(data, _GRAPH_NODE, out, depth)


def external_locations(data: bytes) -> set[str]:
    """The external data locations of every tensor of the ONNX model ``data``, or NotOnnx."""
    view = memoryview(data)
    out: set[str] = set()
    found_graph = False
    for number, value in _messages(view, _MODEL_GRAPH, _MODEL_TRAINING, _MODEL_FUNCTIONS):
        if number == _MODEL_GRAPH:
            found_graph = True
            _graph(value, out, 0)
        elif number == _MODEL_TRAINING:
            for _, graph in _messages(value, _TRAINING_INIT, _TRAINING_ALGORITHM):
                _graph(graph, out, 1)
        else:
            _nodes(value, _FUNCTION_NODE, out, 0)
    if not found_graph:
        raise NotOnnx("no graph")
    return out
