"""The manifest's JSON Schema for editors, generated from the dataclasses and registered steps so
that the published file cannot drift from the code (docs/manifest.md says how to regenerate it)."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import pipeline
from .._json_schema import JsonSchema, SchemaWriter
from . import _spec as spec

SCHEMA_FILE = Path(__file__).parent.parent / "manifest.schema.json"
DRAFT = "http://json-schema.org/draft-07/schema#"

_SHA256 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
_NAME = {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$"}

# The rules of the ``check()`` methods JSON Schema can state, per class and key, or under "" for
# the class's object schema; a field's own bounds are in its metadata (``_spec._bounded``).
RULES: dict[str, dict[str, JsonSchema]] = {
    "Manifest": {"name": _NAME, "inputs": {"minItems": 1, "maxItems": 1}},
    "FileRef": {
        "sha256": _SHA256,
        "url": {"pattern": "^(https?|file)://"},
        "": {
            "oneOf": [{"required": ["path"]}, {"required": ["cache"]}],
            "dependencies": {"package": ["path"], "build": ["cache"], "url": ["cache"]},
        },
    },
    "Model": {
        # ONNX external data: {location as the model records it: sha256}.
        "external_data": {"additionalProperties": _SHA256},
        "": {
            "if": {"properties": {"format": {"const": "state_dict"}}, "required": ["format"]},
            "then": {"required": ["builder", "weights"], "not": {"required": ["file"]}},
            "else": {
                "required": ["file"],
                "not": {"anyOf": [{"required": ["builder"]}, {"required": ["weights"]}]},
            },
        },
    },
    "Dataset": {"name": _NAME, "url": {"pattern": "^https?://"}},
    "Latency": {
        "batch_sizes": {"minItems": 1, "uniqueItems": True},
        "tolerance": {
            "minProperties": 1,
            "propertyNames": {"enum": list(spec.STATISTICS)},
            "additionalProperties": {"exclusiveMinimum": 1, "maximum": 100},
        },
    },
    "Crop": {
        "fraction": {"exclusiveMinimum": 0, "maximum": 1},
        "": {"oneOf": [{"required": ["fraction"]}, {"required": ["size"]}]},
    },
    "Resize": {"": {"oneOf": [{"required": ["size"]}, {"required": ["shorter_side"]}]}},
    "Normalize": {"mean": {"minItems": 1}, "std": {"minItems": 1}},
}


class _ManifestWriter(SchemaWriter):
    """Every object closed, defaults stated, an empty section read as all defaults."""

    draft, defs_key = DRAFT, "definitions"
    closed = defaults = nullable = True

    def __init__(self, steps: Mapping[str, type[pipeline.Step]]) -> None:
        super().__init__(RULES)
        self.steps = steps

    def field_schema(self, f: dataclasses.Field[Any], hint: Any) -> JsonSchema:
        return self.steps_schema() if f.metadata.get("steps") else super().field_schema(f, hint)

    def steps_schema(self) -> JsonSchema:
        ops = sorted(self.steps)
        step = {
            "anyOf": [
                # ``- layout`` is shorthand for ``- layout: {}``.
                {"enum": ops},
                {
                    "type": "object",
                    "description": "one preprocessing step: the op name and its parameters",
                    "minProperties": 1,
                    "maxProperties": 1,
                    "properties": {op: self.ref(self.steps[op]) for op in ops},
                    "additionalProperties": False,
                },
            ]
        }
        return {
            "type": "array",
            "description": "preprocessing steps, executed in exactly this order; the first is "
            "'decode'",
            "minItems": 1,
            "items": step,
        }


def builtin_steps() -> dict[str, type[pipeline.Step]]:
    """The steps pytest-mlrepro itself defines (not a project's custom ones)."""
    own = pipeline.__name__ + "."
    return {op: cls for op, cls in pipeline.STEPS.items() if cls.__module__.startswith(own)}


def manifest_json_schema(steps: Mapping[str, type[pipeline.Step]] | None = None) -> JsonSchema:
    """``steps`` default: the built-in ones, as published."""
    writer = _ManifestWriter(builtin_steps() if steps is None else steps)
    return writer.document(spec.Manifest, title="pytest-mlrepro manifest")


def render(schema: JsonSchema) -> str:
    """Stable text: sorted keys, two-space indent, a final newline (reviewable diffs)."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_mlrepro.manifest.json_schema",
        description="Write the JSON Schema of pytest-mlrepro manifests.",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=SCHEMA_FILE,
        help=f"file to write (default {SCHEMA_FILE}); '-' prints it",
    )
    parser.add_argument(
        "--import",
        dest="modules",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first, so that the custom steps it registers are in the schema",
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path.cwd()))
    for module in args.modules:
        importlib.import_module(module)
    # Every step registered now: the built-in ones and those the imported modules added.
    text = render(manifest_json_schema(pipeline.STEPS))
    if str(args.out) == "-":
        sys.stdout.write(text)
    else:
        args.out.write_text(text, encoding="utf-8")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
