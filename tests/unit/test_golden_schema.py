"""The golden's JSON Schema (pytest_mlrepro/golden.schema.json) as a published file: generated
from the golden's types (``mlrepro schema golden``), a valid draft 2020-12 schema that every
golden the store writes satisfies, with a title on every field it checks (the title is what an
error says the field should be), and compiled only where a golden is read back (importing the
package imports no validator)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from pytest_mlrepro.goldens import _store as golden_store

OLD = Path(__file__).resolve().parents[1] / "data" / "old" / "golden"
SCHEMA = json.loads(golden_store.SCHEMA_FILE.read_text())
CHECKS = {"type", "const", "pattern", "minLength", "minItems", "uniqueItems", "minimum", "items"}


def subschemas(node: Any, path: str = "$") -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from subschemas(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from subschemas(value, f"{path}[{i}]")


def test_the_schema_is_a_valid_draft_2020_12_schema_shipped_with_the_package() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    pyproject = (golden_store.SCHEMA_FILE.parents[1] / "pyproject.toml").read_text()
    assert '"golden.schema.json"' in pyproject.split("[tool.setuptools.package-data]")[1]


def test_the_published_file_is_the_one_generated_from_the_types(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from pytest_mlrepro.cli import main

    assert main(["schema", "golden"]) == 0
    assert capsys.readouterr().out == golden_store.SCHEMA_FILE.read_text(), (
        "stale: run mlrepro schema golden --out pytest_mlrepro/golden.schema.json"
    )
    assert json.loads(golden_store.SCHEMA_FILE.read_text()) == golden_store.golden_schema()


def test_every_field_the_schema_checks_has_a_title_for_its_errors() -> None:
    checked = [
        (path, node)
        for path, node in subschemas(SCHEMA)
        if CHECKS & set(node) and not path.endswith(".properties")
    ]
    assert len(checked) > 15
    untitled = [path for path, node in checked if "title" not in node]
    assert untitled == []


@pytest.mark.parametrize("name", ["tiny_onnx", "tiny_swapped"])
def test_what_the_store_writes_satisfies_the_published_schema(name: str) -> None:
    golden = golden_store.read(OLD / f"{name}.json")
    assert golden is not None
    written = json.loads(golden_store.dumps(golden))
    jsonschema.Draft202012Validator(SCHEMA).validate(written)
    # A plain validator accepts 1.0 as an integer (JSON Schema since draft 6); the store's
    # does not: a class index of 1.0 was written by hand.
    written["samples"][0][2][0] = float(written["samples"][0][2][0])
    jsonschema.Draft202012Validator(SCHEMA).validate(written)
    with pytest.raises(golden_store.InvalidField, match=r"expected a class index \(an integer\)"):
        golden_store.validate(written)


def test_importing_the_package_and_its_golden_store_imports_no_validator() -> None:
    code = (
        "import sys, pytest_mlrepro, pytest_mlrepro.goldens, pytest_mlrepro.results; "
        "print(any(m in sys.modules for m in ('jsonschema', 'fastjsonschema')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=600
    )
    assert out.stdout.strip() == "False"
