"""Safe YAML loading that remembers the line of every value.

Only ``yaml.SafeLoader`` composes the document; values are built here from the node graph so that
each one can be mapped back to its line, duplicate keys are refused, and alias expansion is bounded
(an alias bomb costs at most ``MAX_NODES`` node visits, not exponential memory).
"""

from __future__ import annotations

from typing import Any

import yaml

from .errors import ManifestError

Path = tuple[str | int, ...]

MAX_BYTES = 1_000_000
MAX_NODES = 50_000
MAX_DEPTH = 50


class _Walker:
    def __init__(self, file: str, loader: yaml.SafeLoader) -> None:
        self.file = file
        self.loader = loader
        self.lines: dict[Path, int] = {}
        self.visited = 0

    def fail(self, node: yaml.Node, path: Path, message: str) -> ManifestError:
        return ManifestError(self.file, node.start_mark.line + 1, format_path(path), message)

    def build(self, node: yaml.Node, path: Path) -> Any:
        self.visited += 1
        if self.visited > MAX_NODES:
            raise self.fail(
                node, path, f"document expands to more than {MAX_NODES} values (a YAML alias bomb?)"
            )
        if len(path) > MAX_DEPTH:
            raise self.fail(node, path, f"nested deeper than {MAX_DEPTH} levels")
        self.lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            own = sum(1 for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge")
            self.loader.flatten_mapping(node)  # resolves YAML merge keys ("<<")
            merged = len(node.value) - own  # merged pairs come first; explicit keys override them
            result: dict[str, Any] = {}
            explicit: set[str] = set()
            for position, (key_node, value_node) in enumerate(node.value):
                if not isinstance(key_node, yaml.ScalarNode):
                    raise self.fail(key_node, path, "mapping keys must be plain strings")
                key = self.loader.construct_object(key_node)
                if not isinstance(key, str):
                    raise self.fail(key_node, path, f"mapping key {key!r} is not a string")
                if position >= merged:
                    if key in explicit:
                        raise self.fail(key_node, (*path, key), "duplicate key")
                    explicit.add(key)
                self.lines[(*path, key)] = key_node.start_mark.line + 1
                result[key] = self.build(value_node, (*path, key))
            return result
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        try:
            return self.loader.construct_object(node)
        except (yaml.YAMLError, ValueError, OverflowError) as exc:
            raise self.fail(node, path, f"cannot read value: {exc}") from None


def load_yaml(content: bytes | str, file: str) -> tuple[Any, dict[Path, int]]:
    """Parse one YAML document safely; return its value and the line of every path in it."""
    if isinstance(content, bytes):
        if len(content) > MAX_BYTES:
            raise ManifestError(file, None, "", f"file is larger than {MAX_BYTES} bytes")
        try:
            content = content.decode("utf-8")
        except UnicodeDecodeError as exc:
            line = content[: exc.start].count(b"\n") + 1
            raise ManifestError(file, line, "", f"not UTF-8 text (byte {exc.start})") from None
    loader = yaml.SafeLoader(content)
    try:
        node = loader.get_single_node()
        if node is None:
            raise ManifestError(file, 1, "", "the file is empty")
        walker = _Walker(file, loader)
        return walker.build(node, ()), walker.lines
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        raise ManifestError(file, line, "", f"invalid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise ManifestError(file, None, "", f"invalid YAML: {exc}") from None
    except RecursionError:
        raise ManifestError(file, None, "", "nested too deeply") from None
    finally:
        loader.dispose()


def format_path(path: Path) -> str:
    """``("inputs", 0, "preprocess", 3)`` → ``inputs[0].preprocess[3]``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out
