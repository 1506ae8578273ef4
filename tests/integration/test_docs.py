"""The user documentation (README.md and docs/) against the code and the data it describes.

* The options table in docs/options.md lists exactly the command-line options, ini keys and
  markers the plugin registers with pytest (read from pytest itself, so a new option without a row
  fails here, and so does a row for an option that is gone).
* Every relative link in README.md and docs/*.md points at a file (and heading) that exists.
* The README's first manifest loads, and its recipe (model file in the project, data folder in a
  mirror, checksum list, labels) records a golden and passes.
* Every manifest key is in the manifest reference; the README stays a short introduction.
* The figures the docs give about the example data are what the data holds.
"""

from __future__ import annotations

import collections
import dataclasses
import re
import typing
from pathlib import Path

import pytest
import yaml
from helpers import DATA, REPO, checksum_list, make_images, make_onnx, needs_imagenet_sample

from pytest_mlrepro._schema import yaml_key
from pytest_mlrepro._yaml import load_yaml
from pytest_mlrepro.manifest import _spec as spec
from pytest_mlrepro.manifest._spec import parse_manifest
from pytest_mlrepro.pipeline import _steps as pipeline

README = REPO / "README.md"
DOCS = REPO / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]


# --- the options table --------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Registered:
    options: frozenset[str]
    ini_keys: frozenset[str]
    markers: frozenset[str]


def _registered(pytester: pytest.Pytester, *args: str) -> Registered:
    """What pytest knows after configuring with ``args``: long option names, ini keys, markers."""
    config = pytester.parseconfigure(*args)
    parser = config._parser  # pytest keeps no public list of registered options
    options = {
        name
        for group in [*parser._groups, parser._anonymous]
        for option in group.options
        for name in option.names()
        if name.startswith("--")
    }
    markers = {
        re.split(r"[:(]", str(line), maxsplit=1)[0].strip() for line in config.getini("markers")
    }
    return Registered(frozenset(options), frozenset(parser._inidict), frozenset(markers))


def _plugin_registered(pytester: pytest.Pytester) -> Registered:
    """What the plugin adds: pytest with it, minus pytest without it (every other plugin of the
    environment, pytest's own options, are on both sides)."""
    with_plugin = _registered(pytester)
    without = _registered(pytester, "-p", "no:mlrepro")
    return Registered(
        with_plugin.options - without.options,
        with_plugin.ini_keys - without.ini_keys,
        with_plugin.markers - without.markers,
    )


def _section(text: str, heading: str) -> str:
    """The text of the ``## heading`` section (up to the next heading of level 1 or 2)."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^#{{1,2}} |\Z)", text, re.M | re.S)
    assert match, f"docs/options.md has no section '## {heading}'"
    return match.group(1)


def _table_cells(section: str) -> list[list[str]]:
    """The cells of the table rows of a section (header and separator rows left out)."""
    rows = [line for line in section.splitlines() if line.startswith("|")]
    cells = [[c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]] for row in rows[2:]]
    return cells


def _code_spans(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def _documented() -> Registered:
    text = (DOCS / "options.md").read_text(encoding="utf-8")
    options: set[str] = set()
    ini_keys: set[str] = set()
    for cells in _table_cells(_section(text, "Options and ini keys")):
        options |= {span.split()[0] for span in _code_spans(cells[0])}
        ini_keys |= set(_code_spans(cells[1]))
    markers = {
        span.split("(")[0]
        for cells in _table_cells(_section(text, "Markers"))
        for span in _code_spans(cells[0])
    }
    return Registered(frozenset(options), frozenset(ini_keys), frozenset(markers))


def test_the_options_table_lists_exactly_what_the_plugin_registers(
    pytester: pytest.Pytester,
) -> None:
    registered = _plugin_registered(pytester)
    documented = _documented()
    assert registered.options, "found no option of the plugin: is it installed (pytest11)?"
    assert registered.ini_keys
    for kind in ("options", "ini_keys", "markers"):
        have, doc = getattr(registered, kind), getattr(documented, kind)
        assert have - doc == set(), f"{kind} registered but not in docs/options.md: {have - doc}"
        assert doc - have == set(), f"{kind} in docs/options.md but not registered: {doc - have}"


# --- links ------------------------------------------------------------------------------------


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    return {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def _links(page: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    return re.findall(r"\]\(([^)\s]+)\)", text)


def test_every_relative_link_resolves() -> None:
    assert (DOCS / "index.md").is_file()
    broken: list[str] = []
    checked = 0
    for page in PAGES:
        for link in _links(page):
            if re.match(r"[a-z]+:", link):
                continue  # https://, mailto: ...
            path, _, anchor = link.partition("#")
            target = (page.parent / path).resolve() if path else page
            checked += 1
            if not target.exists():
                broken.append(f"{page.relative_to(REPO)}: {link} (no such file)")
            elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
                broken.append(f"{page.relative_to(REPO)}: {link} (no such heading)")
    assert checked > 20
    assert broken == []


def test_every_docs_page_is_reachable_from_the_readme_and_the_index() -> None:
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    readme = README.read_text(encoding="utf-8")
    for page in sorted(DOCS.glob("*.md")):
        if page.name != "index.md":
            assert f"]({page.name})" in index, f"docs/index.md does not link {page.name}"
            assert f"](docs/{page.name}" in readme, f"README.md does not link {page.name}"


# --- the README -------------------------------------------------------------------------------


def test_the_readme_is_an_introduction() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move reference to docs/"


def _readme_yaml() -> list[str]:
    return re.findall(r"^```yaml\n(.*?)^```", README.read_text(encoding="utf-8"), re.M | re.S)


def _readme_manifests() -> dict[str, str]:
    """The README's ONNX manifest and the same with its PyTorch framework and model sections."""
    blocks = _readme_yaml()
    (full,) = [b for b in blocks if b.startswith("name:")]
    (torch_part,) = [b for b in blocks if b.startswith("framework:")]
    data = yaml.safe_load(full)
    data.update(yaml.safe_load(torch_part))
    return {"onnx": full, "torch": yaml.safe_dump(data, sort_keys=False)}


@pytest.mark.parametrize("kind", ["onnx", "torch"])
def test_the_readme_manifests_load(kind: str) -> None:
    text = _readme_manifests()[kind]
    data, lines = load_yaml(text.encode(), "manifests/my_classifier.yaml")
    manifest = parse_manifest(data, "manifests/my_classifier.yaml", lines)
    assert manifest.model.format == ("onnx" if kind == "onnx" else "state_dict")


def test_the_readme_recipe_records_and_passes(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The layout the README describes, with a tiny real ONNX model and images: the model inside
    the project, the data folder in a mirror named by MLREPRO_DATA, the checksum list made by
    sha256sum over the data folder."""
    project = pytester.path
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / "models").mkdir()
    make_onnx(project / "models" / "my_classifier.onnx")
    mirror = tmp_path / "data"
    make_images(mirror / "my-images")  # 24 images of 3 classes and labels.csv (file,class_index)
    (project / "manifests" / "datasets").mkdir(parents=True)
    (project / "manifests" / "datasets" / "my-images.sha256").write_text(
        checksum_list(mirror / "my-images")
    )
    from helpers import sha256

    text = re.sub(
        r"sha256: [0-9a-f]{64}", f"sha256: {sha256(project / 'models' / 'my_classifier.onnx')}",
        _readme_manifests()["onnx"],
    ).replace("classes: 10", "classes: 3")  # fmt: skip
    (project / "manifests" / "my_classifier.yaml").write_text(text)
    monkeypatch.setenv("MLREPRO_DATA", str(mirror))
    monkeypatch.setenv("MLREPRO_CACHE", str(tmp_path / "cache"))

    recorded = pytester.runpytest("manifests/", "--mlrepro-update", "-p", "no:cacheprovider")
    recorded.assert_outcomes(passed=1)
    assert (project / "golden" / "my_classifier.json").is_file()
    checked = pytester.runpytest("manifests/", "-p", "no:cacheprovider")
    checked.assert_outcomes(passed=1)


# --- the manifest reference -------------------------------------------------------------------


def _schema_classes() -> list[type]:
    found: dict[str, type] = {}
    todo: list[object] = [spec.Manifest]
    while todo:
        tp = todo.pop()
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            if tp.__name__ not in found:
                found[tp.__name__] = tp
                todo.extend(typing.get_type_hints(tp).values())
        else:
            todo.extend(getattr(tp, "__args__", ()))
    return [*found.values(), *pipeline.STEPS.values()]


def test_every_manifest_key_is_in_the_manifest_reference() -> None:
    text = re.sub(r"^```.*?^```", "", (DOCS / "manifest.md").read_text(), flags=re.M | re.S)
    words = {w for span in re.findall(r"`([^`]+)`", text) for w in re.split(r"[^\w]+", span)}
    missing = {
        f"{cls.__name__}.{yaml_key(f)}"
        for cls in _schema_classes()
        if cls.__module__.startswith("pytest_mlrepro")
        for f in dataclasses.fields(cls)
        if f.init and not f.metadata.get("internal") and yaml_key(f) not in words
    }
    assert missing == set(), f"keys not in docs/manifest.md: {sorted(missing)}"


# --- the example data -------------------------------------------------------------------------


@needs_imagenet_sample
def test_the_exif_figures_in_the_docs_are_the_sample_data() -> None:
    """docs/diagnosis.md counts the EXIF orientation tags of the sample images; count them."""
    from PIL import Image

    text = (DOCS / "diagnosis.md").read_text(encoding="utf-8")
    match = re.search(r"^# Counter\((\{.*\})\)$", text, re.M)
    assert match, "docs/diagnosis.md no longer shows the measured EXIF counts"
    documented = yaml.safe_load(match.group(1).replace("None", "null"))
    counts: collections.Counter[int | None] = collections.Counter()
    for path in (DATA / "imagenet-sample").glob("*.JPEG"):
        with Image.open(path) as image:
            counts[image.getexif().get(0x0112)] += 1
    assert dict(counts) == documented
    total = sum(counts.values())
    other_than_1 = sum(n for tag, n in counts.items() if tag not in (None, 1))
    said = f"{other_than_1} of the {total} images carry an orientation tag other than 1"
    assert said in " ".join(text.split())
    rotated = [tag for tag in counts if tag not in (None, 0, 1)]
    assert rotated == [6] and counts[6] == 1  # what the prose then describes, by name
    assert "`n02951585_can_opener.JPEG` has orientation 6" in " ".join(text.split())


@needs_imagenet_sample
def test_the_data_figures_in_the_example_page_are_the_sample_data() -> None:
    """docs/example.md gives the image count, classes, colour modes and small images, with the
    command's output; measure them the way the command does."""
    import csv

    from PIL import Image

    text = (DOCS / "example.md").read_text(encoding="utf-8")
    match = re.search(r"^# (\d+) (\d+) (\{.*\}) (\d+)$", text, re.M)
    assert match, "docs/example.md no longer shows the measured data figures"
    folder = DATA / "imagenet-sample"
    files = sorted(folder.glob("*.JPEG"))
    with (folder / "labels.csv").open(newline="") as handle:
        classes = {row["class_index"] for row in csv.DictReader(handle)}
    modes: collections.Counter[str] = collections.Counter()
    small = 0
    for path in files:
        with Image.open(path) as image:
            modes[image.mode] += 1
            small += min(image.size) < 224
    assert int(match.group(1)) == len(files)
    assert int(match.group(2)) == len(classes)
    assert yaml.safe_load(match.group(3)) == dict(modes)
    assert int(match.group(4)) == small
    prose = " ".join(text.split())
    assert f"Of the {len(files)} JPEGs, {modes['RGB']} are RGB and {modes['L']} grayscale" in prose
    assert f"{small} have a shorter side under 224 pixels" in prose
