"""Fuzzing the manifest loader: every input loads, or fails with one ManifestError naming the
file and a line (and the field, when the error is about one). Never another exception, never a
hang, never unbounded memory, and nothing in a manifest is ever executed.

Inputs (10,500 in all, derandomised so that CI sees the same ones every run):

* the real example manifests and a manifest using every section, parsed, mutated (values
  replaced by wrong types, odd unicode, huge numbers, deep nesting; keys deleted, added,
  misspelt), dumped back to YAML, then mutated as text (lines duplicated — duplicate keys —,
  deleted, swapped, re-indented; anchors and aliases, an alias bomb, unsafe tags, merge keys,
  control characters spliced in; truncated; re-encoded);
* random YAML documents, YAML-ish token soup, and random bytes.
"""

from __future__ import annotations

import copy
import json
import random
import re
import resource
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pytest_mlrepro
from pytest_mlrepro import _yaml
from pytest_mlrepro.errors import ManifestError
from pytest_mlrepro.manifest._spec import Manifest, load_manifest, parse_manifest
from pytest_mlrepro.pipeline import _steps as pipeline

REPO = Path(__file__).resolve().parents[2]
SHOWN = "manifests/fuzzed.yaml"  # the name errors must start with
MARKER = "mlrepro-fuzz-was-executed"  # a file that unsafe YAML would create, were it executed

FUZZ = settings(
    deadline=None,
    derandomize=True,  # the same inputs on every run: CI is stable
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# Example counts: ``examples(n)`` is n under the fast tier's ``ci`` profile (5,250 inputs in all,
# half of what every run fuzzed before the tiers) and 5n under the slow tier's ``deep`` profile.
PER_INPUT_LIMIT_S = 10.0  # CPU seconds: a hang detector (the slowest input takes about one)
RSS_GROWTH_LIMIT_MB = 300  # for the whole run; one expanded alias bomb would take gigabytes
OUTCOME_SAMPLE = 300  # mutated manifests whose outcomes are counted (see the test)

RICH = f"""\
name: rich-manifest
version: "2.0"
task: image-classification
description: every section, so that mutations reach every part of the schema
framework: {{name: torch, version: ">=2.2,<3"}}
model:
  format: state_dict
  builder: some_builder
  weights: {{path: ../models/w.pt, sha256: {"ab" * 32}}}
inputs:
  - name: input
    dtype: float32
    layout: NHWC
    preprocess:
      - decode: {{backend: opencv, order: BGR, exif_orientation: true}}
      - color: {{order: RGB}}
      - resize: {{shorter_side: 256, method: bicubic, backend: opencv}}
      - crop: {{size: [224, 224], rounding: torchvision}}
      - cast: {{dtype: float32}}
      - scale: {{divisor: 255}}
      - normalize: {{mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]}}
      - layout: {{order: NHWC, method: transpose}}
postprocess: {{softmax: false, top_k: 3, output: logits}}
dataset:
  name: imagenet-sample
  checksums: data.sha256
  labels: labels.csv
  labels_dir: labels
  file_column: file
  label_column: class_index
  classes: 1000
  class_names: synset.txt
  url: https://example.com/data/
  limit: 10
tolerances: {{top1: 0.5, top5: 0.5, agreement: 0.99, score: 0.001}}
runtime:
  batch_size: 8
  intra_op_threads: 1
  inter_op_threads: 1
  devices: [cpu]
  seed: 0
  deterministic_ops: true
  timeout_s: 60
determinism: {{runs: 2, tolerance: 0.0}}
golden: golden/rich.json
"""


def _bases() -> list[tuple[str, Any]]:
    texts = [p.read_text() for p in sorted((REPO / "manifests").glob("*.yaml"))]
    assert len(texts) >= 2
    return [(text, yaml.safe_load(text)) for text in [*texts, RICH]]


BASES = _bases()


def test_the_unmutated_bases_load(tmp_path: Path) -> None:
    """The fuzzing starts from valid manifests (else every mutation tests the same error)."""
    for text, _ in BASES:
        (tmp_path / "m.yaml").write_text(text)
        assert isinstance(load_manifest(tmp_path / "m.yaml", display=SHOWN), Manifest)


# --- values and mutations -------------------------------------------------------------------------

ODD_CHARS = (
    "\u202e\u200b\ufeff\x85\u2028\u2029\x00\x07\x1b\t\r"  # bidi, zero-width, BOM, breaks, controls
    "é\u0301\u4e2d\U0001f600\ud7ff\ue000\ufffd\U0010ffff"  # combining, CJK, emoji, private use
    ":-?[]{},#&*!|>'\"%@`"  # YAML indicators
)
odd_text = st.text(
    alphabet=st.one_of(st.characters(codec="utf-8"), st.sampled_from(ODD_CHARS)), max_size=24
)
VALID_TOKENS = [
    "pil",
    "opencv",
    "RGB",
    "BGR",
    "NCHW",
    "NHWC",
    "float32",
    "uint8",
    "bilinear",
    "google",
    "onnxruntime",
    "torch",
    "onnx",
    "state_dict",
    "cpu",
    "cuda",
    "decode",
    "resize",
    "x.json",
    "../outside",
    "/etc/passwd",
]
HUGE = [
    2**53,
    2**53 + 1,
    -(2**63),
    10**30,
    10**400,
    1e308,
    -1e308,
    5e-324,
    float("inf"),
    float("-inf"),
    float("nan"),
    0,
    -1,
    4097,
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from(HUGE),
    st.floats(),
    odd_text,
    st.sampled_from(VALID_TOKENS),
)
keys = st.one_of(odd_text, st.sampled_from(["name", "size", "order", "path", "sha256", "<<", ""]))
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=8,
)


def _paths(data: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every position in a plain YAML value (the value itself included)."""
    out = [prefix]
    if isinstance(data, dict):
        for key, value in data.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            out += _paths(value, (*prefix, index))
    return out


def _parent(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path[:-1]:
        data = data[part]
    return data


def _nested(value: Any, depth: int, kind: str) -> Any:
    for _ in range(depth):
        value = [value] if kind == "list" else {"k": value}
    return value


def random_value(rnd: random.Random, text: str, depth: int = 0) -> Any:
    """A value of any YAML type, often the wrong one: odd unicode, huge numbers, nesting."""
    kind = rnd.randrange(12 if depth < 3 else 9)
    if kind == 0:
        return None
    if kind == 1:
        return rnd.random() < 0.5
    if kind == 2:
        return rnd.randint(-(10**6), 10**6)
    if kind == 3:
        return rnd.choice(HUGE)
    if kind == 4:
        return rnd.uniform(-1e6, 1e6)
    if kind == 5:
        return text  # drawn by hypothesis: arbitrary unicode
    if kind == 6:
        return "".join(rnd.choice(ODD_CHARS) for _ in range(rnd.randint(1, 8)))
    if kind in (7, 8):
        return rnd.choice(VALID_TOKENS)
    if kind in (9, 10):
        return [random_value(rnd, text, depth + 1) for _ in range(rnd.randint(0, 3))]
    return {random_key(rnd, text): random_value(rnd, text, depth + 1) for _ in range(3)}


def random_text(rnd: random.Random) -> str:
    """Up to 16 characters: YAML indicators, invisible and control characters, any code point."""
    chars = []
    for _ in range(rnd.randint(0, 16)):
        if rnd.random() < 0.5:
            chars.append(rnd.choice(ODD_CHARS))
        else:
            point = rnd.choice([rnd.randint(32, 126), rnd.randint(0, 0x10FFFF)])
            chars.append(chr(point) if not 0xD800 <= point <= 0xDFFF else "\ufffd")
    return "".join(chars)


def random_key(rnd: random.Random, text: str) -> str:
    return rnd.choice([text, "name", "size", "order", "path", "sha256", "<<", "", "Name", "x y"])


def mutated_data(rnd: random.Random, text: str) -> Any:
    """A base manifest with 0 to 4 structural mutations."""
    _, base = rnd.choice(BASES)
    data = copy.deepcopy(base)
    for _ in range(rnd.choice([0, 1, 1, 1, 2, 2, 3, 4])):
        path = rnd.choice(_paths(data))
        op = rnd.choice(["replace", "delete", "add", "rename", "nest", "swap-type", "valid"])
        if not path:  # the document itself
            if op in ("replace", "swap-type"):
                data = random_value(rnd, text)
            continue
        parent, last = _parent(data, path), path[-1]
        if op == "replace":
            parent[last] = random_value(rnd, text)
        elif op == "valid":  # a plausible value: often still valid, to reach deeper rules
            parent[last] = rnd.choice([*VALID_TOKENS, 0, 1, 3, 224, 0.5, 1.0, True, False])
        elif op == "swap-type":  # the same value, in another type
            old = parent[last]
            parent[last] = rnd.choice([str(old), [old], {"value": old}, None, 1, 1.5, True])
        elif op == "delete":
            del parent[last]
        elif op == "add" and isinstance(parent, dict):
            parent[random_key(rnd, text)] = random_value(rnd, text)
        elif op == "add":
            parent.insert(rnd.randint(0, len(parent)), random_value(rnd, text))
        elif op == "rename" and isinstance(parent, dict) and isinstance(last, str):
            new = rnd.choice(
                [last.upper(), last[:-1] + "x" if last else "x", last + rnd.choice(ODD_CHARS)]
            )
            parent[new] = parent.pop(last)
        elif op == "nest":
            depth = rnd.choice([1, 5, 30, _yaml.MAX_DEPTH + 5])
            parent[last] = _nested(parent[last], depth, rnd.choice(["list", "map"]))
    return data


ALIAS_BOMB = "\n".join(
    ["bomb0: &b0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    + [f"bomb{n}: &b{n} [{', '.join([f'*b{n - 1}'] * 9)}]" for n in range(1, 9)]
)
SNIPPETS = [
    ALIAS_BOMB,
    f"evil: !!python/object/apply:os.system ['touch {MARKER}']",
    f"evil: !!python/object/new:subprocess.check_output [['touch', '{MARKER}']]",
    "evil: !!python/name:os.system",
    "evil: !!set {a, b}",
    "evil: !custom value",
    "evil: !!binary aGVsbG8=",
    "when: 2001-12-14t21:59:43.10-05:00",
    "bad_date: 2001-13-45",
    "<<: *undefined",
    "<<: {name: merged}",
    "anchor: &a {x: 1}\nagain: *a\nmerged: {<<: *a, x: 2}",
    "self: &s [*s]",
    "selfmerge: &m {<<: *m}",
    "dup: &d 1\ndup2: &d 2",
    "---\nsecond: document",
    "? [complex, key]\n: value",
    "1: integer key",
    "null: null key",
    "x: " + "[" * 200 + "]" * 200,
    "x: 0x" + "f" * 6000,
    "x: " + "9" * 5000,
    "x: |\n  literal\n   block",
    "\tindented: with a tab",
    "%YAML 1.1\n---",
    "x: 'unterminated",
]


@st.composite
def mutated_text(draw: st.DrawFn) -> bytes:
    """A manifest mutated as data, dumped, then mutated as text and bytes.

    Hypothesis draws the seed of the mutations (derandomised: the same seeds on every run); the
    mutations themselves come from that seeded generator, which costs a fraction of a draw each.
    A failure prints the input itself (``raw``), so shrinking is not needed to read it."""
    rnd = draw(st.randoms(use_true_random=True))
    data = mutated_data(rnd, random_text(rnd))
    if rnd.random() < 0.35:  # JSON is YAML too (flow style), and much faster to write
        text = json.dumps(data, indent=rnd.choice([None, 2]), ensure_ascii=rnd.random() < 0.5)
    else:
        text = yaml.dump(
            data,
            Dumper=yaml.CSafeDumper,
            allow_unicode=rnd.random() < 0.5,
            sort_keys=False,
            default_flow_style=rnd.choice([False, None, True]),
            width=rnd.choice([80, 10**6]),
        )
    for _ in range(rnd.choice([0, 0, 1, 1, 2, 3])):
        lines = text.split("\n")
        at = rnd.randrange(len(lines))
        op = rnd.choice(
            ["dup-line", "del-line", "swap", "indent", "snippet", "char", "anchor", "cut"]
        )
        if op == "dup-line":
            lines.insert(at, lines[at])
        elif op == "del-line":
            del lines[at]
        elif op == "swap":
            other = rnd.randrange(len(lines))
            lines[at], lines[other] = lines[other], lines[at]
        elif op == "indent":
            lines[at] = rnd.choice(["\t", " ", "   ", "      "]) + lines[at]
        elif op == "snippet":
            indent = re.match(r"\s*", lines[at]).group(0)  # type: ignore[union-attr]
            snippet = rnd.choice(SNIPPETS)
            lines.insert(at, "\n".join(indent + s for s in snippet.split("\n")))
        elif op == "char" and lines[at]:
            pos = rnd.randint(0, len(lines[at]))
            lines[at] = lines[at][:pos] + rnd.choice(ODD_CHARS) + lines[at][pos:]
        elif op == "anchor":  # give one value an anchor, and make another an alias of it
            values_at = [i for i, line in enumerate(lines) if re.search(r": \S", line)]
            if len(values_at) >= 2:
                a, b = rnd.choice(values_at), rnd.choice(values_at)
                lines[a] = re.sub(r": ", ": &fz ", lines[a], count=1)
                lines[b] = re.sub(r": .*", ": *fz", lines[b], count=1)
        elif op == "cut":
            lines = lines[: at + 1]
            lines[-1] = lines[-1][: rnd.randint(0, len(lines[-1]))]
        text = "\n".join(lines)
    encoding = rnd.choice(["utf-8"] * 8 + ["utf-16", "latin-1"])
    raw = text.encode(encoding, "replace")
    if rnd.randrange(10) == 0:  # splice random bytes in
        pos = rnd.randint(0, len(raw))
        raw = raw[:pos] + rnd.randbytes(rnd.randint(1, 16)) + raw[pos:]
    return raw


yaml_documents = values.map(
    lambda v: yaml.dump(v, Dumper=yaml.CSafeDumper, allow_unicode=True).encode("utf-8")
)
token_soup = st.lists(
    st.sampled_from(
        [
            "name",
            ":",
            " ",
            "  ",
            "\n",
            "- ",
            "[",
            "]",
            "{",
            "}",
            ",",
            "&a",
            "*a",
            "!!str",
            "!!python/object:os.system",
            "<<",
            "'",
            '"',
            "#",
            "|",
            ">",
            "?",
            "%",
            "---",
            "...",
            "\t",
            "inputs",
            "preprocess",
            "decode",
            "1e999",
            "0x1F",
            ".nan",
            "~",
            "\x00",
            "\ufeff",
        ]
    ),
    max_size=60,
).map(lambda parts: "".join(parts).encode("utf-8"))


# --- the property -------------------------------------------------------------------------------

# Errors about the document as a whole (or its top level) name no field.
DOCUMENT_LEVEL = (
    "invalid YAML",
    "not UTF-8",
    "the file is empty",
    "a manifest is a mapping",
    "missing required key",
    "expected a single document",
    "mapping key",
    "mapping keys must be plain strings",
    "duplicate merge key",
    "'<<' merges",
    "undefined alias",
    "anchor &",
    "the tag ",
    "document expands to more than",
    "the document has more than",
)
_ERROR = re.compile(rf"^{re.escape(SHOWN)}:(\d+): ")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@pytest.fixture(scope="module", autouse=True)
def rss_at_start() -> float:
    """Peak RSS (MiB) when this module starts."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def load_bytes(raw: bytes) -> Manifest:
    """What :func:`load_manifest` does after reading the file (the fuzzing skips the disk)."""
    data, lines = _yaml.load_yaml(raw, SHOWN)
    return parse_manifest(data, SHOWN, lines)


def check_input(
    folder: Path, raw: bytes, *, from_file: bool = False, limit: float | None = PER_INPUT_LIMIT_S
) -> Manifest | ManifestError:
    """Load ``raw`` as a manifest; assert the outcome is a manifest or one clear error."""
    path = folder / "fuzzed.yaml"
    if from_file:
        path.write_bytes(raw)
    # "Fails fast" is a bound on the work done: this thread's CPU time, which a loaded machine
    # does not inflate as it does the wall time (11 to 21 s of wall for a 1 s input, beside
    # other test processes on 2 cores).
    start, start_cpu = time.perf_counter(), time.thread_time()
    outcome: Manifest | ManifestError
    try:
        outcome = load_manifest(path, display=SHOWN) if from_file else load_bytes(raw)
    except ManifestError as exc:
        outcome = exc
    cpu, wall = time.thread_time() - start_cpu, time.perf_counter() - start
    assert limit is None or cpu < limit, f"took {cpu:.1f} s of CPU ({wall:.1f} s): {raw[:200]!r}"
    assert not (folder / MARKER).exists() and not Path(MARKER).exists(), "YAML was executed"
    if isinstance(outcome, ManifestError):
        text = str(outcome)
        match = _ERROR.match(text)
        assert match, f"no file:line at the start of {text!r}"
        assert outcome.line is not None and 1 <= outcome.line <= raw.count(b"\n") + 1, text
        assert int(match.group(1)) == outcome.line
        assert outcome.field or outcome.message.startswith(DOCUMENT_LEVEL), text
        assert "check() should raise" not in text, f"a built-in rule is broken: {text}"
        return outcome
    # A manifest that loads is usable: its pipeline is valid and a golden can record it.
    assert isinstance(outcome, Manifest)
    json.dumps(outcome.normalized(), allow_nan=False)
    assert outcome.pipeline.final is not None
    return outcome


def _run(folder: Path, raw: bytes) -> None:
    check_input(folder, raw)


@settings(FUZZ, max_examples=examples(3000))
@given(raw=mutated_text())
def test_mutated_manifests_load_or_fail_clearly(workdir: Path, raw: bytes) -> None:
    _run(workdir, raw)


@settings(FUZZ, max_examples=examples(300))
@given(raw=yaml_documents)
def test_random_yaml_documents_load_or_fail_clearly(workdir: Path, raw: bytes) -> None:
    _run(workdir, raw)


@settings(FUZZ, max_examples=examples(700))
@given(raw=token_soup)
def test_yaml_token_soup_fails_clearly(workdir: Path, raw: bytes) -> None:
    _run(workdir, raw)


@settings(FUZZ, max_examples=examples(750))
@given(raw=st.binary(max_size=512))
def test_random_bytes_fail_clearly(workdir: Path, raw: bytes) -> None:
    _run(workdir, raw)


def test_mutated_manifests_with_the_pure_python_parser(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same property where PyYAML has no libyaml (the pure-Python parser)."""
    monkeypatch.setattr(_yaml, "PARSER", yaml.SafeLoader)

    @settings(FUZZ, max_examples=examples(500))
    @given(raw=mutated_text())
    def fuzz(raw: bytes) -> None:
        _run(workdir, raw)

    fuzz()


# Marked ``hypothesis`` (as every @given test is), so that the slow tier's ``-m "slow or
# hypothesis"`` selects it too; it is not slow, so the fast tier runs it as well.
@pytest.mark.hypothesis
def test_fuzzing_reaches_both_outcomes(workdir: Path) -> None:
    """The mutation strategy reaches both outcomes: manifests that load and clear refusals (a
    generator that only ever produced errors, or only valid manifests, would test little).
    Self-contained: the strategy runs here, on whichever worker and in whichever tier."""
    loaded: list[bytes] = []
    refused: list[bytes] = []

    @settings(FUZZ, max_examples=examples(OUTCOME_SAMPLE))
    @given(raw=mutated_text())
    def fuzz(raw: bytes) -> None:
        outcome = check_input(workdir, raw)
        (loaded if isinstance(outcome, Manifest) else refused).append(raw)

    fuzz()
    total = len(loaded) + len(refused)
    print(f"fuzzed {total}: {len(loaded)} loaded, {len(refused)} refused")
    assert total == examples(OUTCOME_SAMPLE)
    assert len(loaded) >= total // 50, (len(loaded), len(refused))
    assert len(refused) >= total // 2, (len(loaded), len(refused))


def test_fuzzing_stays_within_bounded_memory(rss_at_start: float) -> None:
    """The process's peak RSS after all the inputs above: an alias bomb expanded once, or a
    document held many times over, would show as gigabytes. (Peak RSS only grows: a test run
    before this module that peaked higher hides nothing this module did beyond it.)"""
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert peak_mb < rss_at_start + RSS_GROWTH_LIMIT_MB, (rss_at_start, peak_mb)


# --- the worst inputs, measured one by one ------------------------------------------------------

WORST = {
    "alias bomb (9^9 strings)": ALIAS_BOMB.encode(),
    "alias bomb in a manifest field": BASES[0][0]
    .replace("description:", "description:\n  " + ALIAS_BOMB.replace("\n", "\n  ") + "\nx:", 1)
    .encode(),
    "100,000 nested lists": b"name: " + b"[" * 100_000 + b"]" * 100_000,
    "100,000 nested mappings": b"name: " + b"{a: " * 100_000 + b"1" + b"}" * 100_000,
    "deep block nesting": "".join(f"{' ' * i}k:\n" for i in range(1000)).encode(),
    "50,001 list items": b"x: [" + b"1," * 50_001 + b"]",
    "a 400 kB string": b"name: " + b"a" * 400_000,
    "a self-referencing alias": b"a: &a [*a, *a]\n",
    "a self-merging mapping": b"a: &a {<<: *a}\n",
    "an 8000-digit hex number": b"classes: 0x" + b"f" * 8000,
}


@pytest.mark.parametrize("parser", ["libyaml", "python"])
@pytest.mark.parametrize("name", sorted(WORST))
def test_worst_inputs_fail_fast_in_bounded_memory(
    workdir: Path, name: str, parser: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if parser == "python":
        monkeypatch.setattr(_yaml, "PARSER", yaml.SafeLoader)
    raw = WORST[name]
    assert isinstance(check_input(workdir, raw, from_file=True), ManifestError)
    if parser == "python":
        return  # the same composer and walker: memory measured once, with the default parser
    tracemalloc.start()  # tracing slows Python down several times: no time limit here
    try:
        outcome = check_input(workdir, raw, limit=None)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(outcome, ManifestError), name
    assert peak < 64 * 2**20, f"{name}: {peak / 2**20:.0f} MiB"


# --- what the fuzzing found, pinned -------------------------------------------------------------


def _error(text: str) -> ManifestError:
    with pytest.raises(ManifestError) as info:
        load_bytes(text.encode("utf-8"))
    return info.value


ONNX_EXAMPLE = (REPO / "manifests" / "efficientnet_lite0_onnx.yaml").read_text()
HUGE_HEX = "0x" + "f" * 5000  # 20,000 bits: more digits than Python prints in decimal


@pytest.mark.parametrize(
    ("text", "line", "field", "words"),
    [
        ("name: x\n2001-13-45: 1\n", 2, "", "month must be in 1..12"),  # was ValueError
        ("name: x\n!!int abc: 1\n", 2, "", "invalid literal for int()"),  # was ValueError
        ("name: x\nversion: a\x00b\n", 2, "", "control characters are not allowed"),  # no line
        ("name: x\n\x85version: [\n", 3, "", "invalid YAML"),  # NEL: a YAML line break only
        (
            "name: x\nx: !!python/object/apply:os.system ['touch p']\n",  # loaded as a list
            2,
            "x",
            "the tag '!!python/object/apply:os.system' is not allowed",
        ),
        ("a: &a {<<: *a}\n", 1, "a['<<']", "an alias refers to a value that contains it"),
        (ONNX_EXAMPLE + "'': 1\n", ONNX_EXAMPLE.count("\n") + 1, "['']", "unknown key"),
        (
            ONNX_EXAMPLE.replace("batch_size: 32", f"batch_size: {HUGE_HEX}"),
            next(n for n, row in enumerate(ONNX_EXAMPLE.splitlines(), 1) if "batch_size" in row),
            "runtime.batch_size",
            "integer <20000-bit integer> is out of range",  # repr() of it raised ValueError
        ),
    ],
    ids=["date key", "int key", "NUL", "NEL", "python tag", "self merge", "empty key", "huge"],
)
def test_found_by_fuzzing(text: str, line: int, field: str, words: str) -> None:
    exc = _error(text)
    assert (exc.line, exc.field) == (line, field), str(exc)
    assert words in exc.message, str(exc)


def test_an_anchor_reused_through_a_merge_key_is_not_a_duplicate() -> None:
    data, _ = _yaml.load_yaml("base: &b {x: 1}\none: &o {<<: *b, x: 2}\ntwo: *o\n", "m.yaml")
    assert data == {"base": {"x": 1}, "one": {"x": 2}, "two": {"x": 2}}
    merged, _ = _yaml.load_yaml("a: &a {x: 1, y: 1}\nb: &b {x: 2, z: 2}\nc: {<<: [*a, *b]}\n", "f")
    assert merged["c"] == {"x": 1, "y": 1, "z": 2}  # the first mapping listed wins


def test_a_custom_step_whose_rules_raise_the_wrong_exception_is_still_a_manifest_error(
    tmp_path: Path,
) -> None:
    """A registered step's check() or transition() that raises something other than Invalid
    refuses the manifest at that step's line, naming the class whose code to fix."""

    @dataclass(frozen=True)
    class BadCheck(pipeline.Step):
        op: ClassVar[str] = "bad_check"
        factor: float = 1.0

        def check(self) -> None:
            raise ZeroDivisionError("float division by zero")

    @dataclass(frozen=True)
    class BadTransition(pipeline.Step):
        op: ClassVar[str] = "bad_transition"

        def transition(self, state: pipeline.State) -> pipeline.State:
            raise KeyError("dtype")

    for cls in (BadCheck, BadTransition):
        pipeline.register_step(cls)
    try:
        for op, words in (
            ("bad_check", "BadCheck refused these values with ZeroDivisionError"),
            ("bad_transition", "BadTransition.transition() failed with KeyError"),
        ):
            text = ONNX_EXAMPLE.replace(
                "      - layout: {order: NCHW}",
                f"      - {op}: {{}}\n      - layout: {{order: NCHW}}",
            )
            assert op in text
            exc = _error(text)
            expected_line = next(n for n, row in enumerate(text.splitlines(), 1) if op in row)
            assert exc.line == expected_line and exc.field.startswith("inputs[0].preprocess["), exc
            assert words in exc.message, str(exc)
            # The fix it names is the public class (pytest_mlrepro.Invalid), not a private path.
            assert "should raise pytest_mlrepro.Invalid naming the" in exc.message, str(exc)
        assert pytest_mlrepro.Invalid is pipeline.Invalid
    finally:
        for cls in (BadCheck, BadTransition):
            pipeline.STEPS.pop(cls.op, None)
