"""Manifest loading: valid files load with defaults, invalid ones fail naming file:line and field.

Expected line numbers are computed from the YAML text itself (the line holding a marker) rather
than hard-coded, so the manifests can be edited freely.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from pytest_mlrepro._yaml import MAX_BYTES, MAX_DEPTH, MAX_NODES, load_yaml
from pytest_mlrepro.errors import ManifestError
from pytest_mlrepro.manifest._spec import Manifest, load_manifest, parse_manifest
from pytest_mlrepro.pipeline import _steps as pipeline

SHA = "0123456789abcdef" * 4

BASE = f"""\
# EfficientNet-Lite0 through ONNX Runtime
name: efficientnet-lite0
version: "1.0"
description: a test manifest
framework:
  name: onnxruntime             # @fw-name
  version: ">=1.17,<2"          # @fw-version
model:                          # @model
  format: onnx                  # @format
  file:                         # @model-file
    path: model.onnx
    sha256: {SHA}  # @sha
inputs:
  - name: images                # @input
    layout: NCHW                # @input-layout
    preprocess:                 # @preprocess
      - decode: {{backend: pil, order: RGB}}          # @decode
      - crop: {{fraction: 0.875, rounding: google}}   # @crop
      - resize:                 # @resize
          size: 224             # @size
          method: bilinear      # @method
      - cast: {{dtype: float32}}                      # @cast
      - normalize: {{mean: [127.0], std: [128.0]}}    # @normalize
      - layout: {{order: NCHW}}                       # @layout
dataset:                        # @dataset
  name: imagenet-sample
  checksums: SHA256SUMS         # @checksums
runtime:                        # @runtime
  batch_size: 8                 # @batch
"""


# --- helpers ------------------------------------------------------------------------------------


def line_of(text: str, marker: str) -> int:
    """The 1-based number of the one line of ``text`` that contains ``marker``."""
    pattern = re.compile(re.escape(marker) + r"(?![\w-])")  # '@input' is not '@input-layout'
    found = [n for n, line in enumerate(text.splitlines(), start=1) if pattern.search(line)]
    assert len(found) == 1, f"marker {marker!r} is on lines {found}"
    return found[0]


def replace_line(text: str, marker: str, new: str) -> str:
    """``text`` with the line holding ``marker`` replaced by ``new`` (which may be several lines
    or empty, to delete it)."""
    lines = text.splitlines(keepends=True)
    index = line_of(text, marker) - 1
    lines[index] = new + "\n" if new else ""
    return "".join(lines)


def write(tmp_path: Path, text: str | bytes, name: str = "m.yaml") -> Path:
    path = tmp_path / name
    if isinstance(text, str):
        path.write_text(text, encoding="utf-8")
    else:
        path.write_bytes(text)
    return path


def load(tmp_path: Path, text: str | bytes) -> Manifest:
    return load_manifest(write(tmp_path, text), display="m.yaml")


def fail(tmp_path: Path, text: str | bytes) -> ManifestError:
    with pytest.raises(ManifestError) as info:
        load(tmp_path, text)
    return info.value


def assert_error(exc: ManifestError, line: int | None, field: str, *words: str) -> None:
    where = f"m.yaml:{line}" if line is not None else "m.yaml"
    prefix = f"{where}: {field}: " if field else f"{where}: "
    assert str(exc).startswith(prefix), f"{str(exc)!r} does not start with {prefix!r}"
    assert (exc.file, exc.line, exc.field) == ("m.yaml", line, field)
    for word in words:
        assert word in str(exc), f"{word!r} not in {str(exc)!r}"


# --- valid manifests ----------------------------------------------------------------------------


def test_valid_manifest_loads(tmp_path: Path) -> None:
    m = load(tmp_path, BASE)
    assert m.name == "efficientnet-lite0" and m.version == "1.0"
    assert m.framework.name == "onnxruntime" and "1.17.1" in m.framework.specifier
    assert "2.0" not in m.framework.specifier
    assert m.model.format == "onnx" and m.model.file is not None
    assert m.model.file.path == "model.onnx" and m.model.file.sha256 == SHA
    assert m.input is m.inputs[0] and m.input.name == "images" and m.input.layout == "NCHW"
    assert [type(s) for s in m.input.preprocess] == [
        pipeline.Decode,
        pipeline.Crop,
        pipeline.Resize,
        pipeline.Cast,
        pipeline.Normalize,
        pipeline.Layout,
    ]
    resize = m.input.preprocess[2]
    assert resize == pipeline.Resize(size=224, method="bilinear")
    assert m.input.preprocess[4] == pipeline.Normalize(mean=(127.0,), std=(128.0,))
    assert m.pipeline.final == pipeline.State(order="RGB", layout="CHW", dtype="float32")
    assert m.runtime.batch_size == 8
    assert m.path == tmp_path / "m.yaml" and m.source == "m.yaml"


def test_normalized_fills_defaults(tmp_path: Path) -> None:
    data = load(tmp_path, BASE).normalized()
    assert json.loads(json.dumps(data)) == data  # plain data only
    assert data["task"] == "image-classification"
    assert data["golden"] is None
    assert data["postprocess"] == {"softmax": True, "top_k": 5, "output": None}
    assert data["tolerances"] == {"top1": 0.5, "top5": 0.5, "agreement": 0.99, "score": 1e-3}
    assert {
        "batch_size": 8,
        "intra_op_threads": None,
        "inter_op_threads": None,
        "devices": ["cpu", "cuda"],
    }.items() <= data["runtime"].items()
    # (a subset: other optional dataset fields may be added)
    assert {
        "name": "imagenet-sample",
        "checksums": "SHA256SUMS",
        "labels": "labels.csv",
        "file_column": "file",
        "label_column": "class_index",
        "classes": 1000,
        "class_names": None,
        "url": None,
        "limit": None,
    }.items() <= data["dataset"].items()
    assert data["model"]["file"] == {
        "sha256": SHA,
        "path": "model.onnx",
        "package": None,
        "cache": None,
        "build": None,
        "url": None,
    }
    assert data["model"]["builder"] is None and data["model"]["weights"] is None
    (inp,) = data["inputs"]
    assert inp["dtype"] == "float32"
    assert inp["preprocess"] == [
        # mode RGB filled in; convert, channels, dtype left out: they apply to other modes
        {"decode": {"backend": "pil", "order": "RGB", "exif_orientation": False, "mode": "RGB"}},
        {"crop": {"fraction": 0.875, "size": None, "rounding": "google"}},
        {
            "resize": {
                "size": 224,
                "shorter_side": None,
                "method": "bilinear",
                "backend": "pil",
                "antialias": None,
            }
        },
        {"cast": {"dtype": "float32"}},
        {"normalize": {"mean": [127.0], "std": [128.0], "on_uint8": "error"}},
        {"layout": {"order": "NCHW", "method": "transpose"}},
    ]
    # internal bookkeeping stays out of the normalised form
    assert not {"source", "path", "lines"} & set(data)


def test_minimal_manifest_and_bare_step_names(tmp_path: Path) -> None:
    text = f"""\
name: tiny
version: "0"
framework: {{name: torch}}
model: {{format: torchscript, file: {{cache: tiny.pt, sha256: {SHA}}}}}
inputs:
  - name: x
    layout: NHWC
    dtype: uint8
    preprocess:
      - decode
      - resize: {{size: [32, 48], backend: opencv, method: area}}
dataset: {{name: tiny, checksums: sums.txt}}
"""
    m = load(tmp_path, text)
    assert m.framework.version == "" and len(m.framework.specifier) == 0
    assert m.input.preprocess[0] == pipeline.Decode()
    resize = m.input.preprocess[1]
    assert isinstance(resize, pipeline.Resize) and resize.size == (32, 48)
    assert m.pipeline.final == pipeline.State(layout="HWC", dtype="uint8")
    data = m.normalized()
    assert data["inputs"][0]["preprocess"][1]["resize"]["size"] == [32, 48]
    assert data["tolerances"]["agreement"] == 0.99


def test_lines_are_recorded(tmp_path: Path) -> None:
    m = load(tmp_path, BASE)
    method = ("inputs", 0, "preprocess", 2, "resize", "method")
    assert m.lines[method] == line_of(BASE, "@method")
    assert m.lines[("runtime", "batch_size")] == line_of(BASE, "@batch")
    assert m.lines[("inputs", 0)] == line_of(BASE, "@input")
    err = m.error(method, "golden disagrees")
    line = line_of(BASE, "@method")
    assert str(err) == f"m.yaml:{line}: inputs[0].preprocess[2].resize.method: golden disagrees"


def test_crlf_line_endings_keep_line_numbers(tmp_path: Path) -> None:
    text = BASE.replace("method: bilinear", "method: bilnear")
    exc = fail(tmp_path, text.replace("\n", "\r\n").encode())
    assert exc.line == line_of(text, "@method")


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    m = load(tmp_path, b"\xef\xbb\xbf" + BASE.replace("a test manifest", "caf\u00e9").encode())
    assert m.description == "caf\u00e9"


def test_merge_keys_and_aliases_are_resolved(tmp_path: Path) -> None:
    text = BASE.replace("description: a test manifest", "description: &desc a test manifest")
    text += "postprocess:\n  <<: {top_k: 3, softmax: false}\n  output: *desc\n"
    m = load(tmp_path, text)
    assert m.postprocess.top_k == 3 and m.postprocess.softmax is False
    assert m.postprocess.output == "a test manifest"


def test_merge_key_override(tmp_path: Path) -> None:
    data, _ = load_yaml("base: &b {x: 1, y: 2}\nderived:\n  <<: *b\n  y: 3\n", "m.yaml")
    assert data["derived"] == {"x": 1, "y": 3}


def test_display_name_defaults_to_path(tmp_path: Path) -> None:
    path = write(tmp_path, BASE.replace("batch_size: 8", "batch_size: 0"))
    with pytest.raises(ManifestError) as info:
        load_manifest(path)
    assert str(info.value).startswith(f"{path}:{line_of(BASE, '@batch')}: runtime.batch_size: ")


def test_parse_manifest_direct(tmp_path: Path) -> None:
    data, lines = load_yaml(BASE, "x.yaml")
    m = parse_manifest(data, "x.yaml", lines)
    assert m == load(tmp_path, BASE)
    with pytest.raises(ManifestError, match="a manifest is a mapping"):
        parse_manifest(["not", "a", "mapping"], "x.yaml", {(): 1})


# --- errors name the file, line and field -------------------------------------------------------


def test_misspelt_literal_param(tmp_path: Path) -> None:
    text = BASE.replace("method: bilinear", "method: bilnear")
    exc = fail(tmp_path, text)
    line = line_of(text, "@method")
    assert f"m.yaml:{line}: inputs[0].preprocess[2].resize.method:" in str(exc)
    assert "did you mean 'bilinear'" in str(exc)
    assert_error(exc, line, "inputs[0].preprocess[2].resize.method", "'bilnear' is not one of")


def test_misspelt_top_level_key(tmp_path: Path) -> None:
    text = BASE + "tolerences:                     # @tol\n  top1: 1.0\n"
    exc = fail(tmp_path, text)
    assert_error(
        exc,
        line_of(text, "@tol"),
        "tolerences",
        "unknown key",
        "did you mean 'tolerances'",
        "known keys:",
    )


def test_misspelt_step_param_key(tmp_path: Path) -> None:
    text = BASE.replace("size: 224", "sise: 224")
    exc = fail(tmp_path, text)
    assert_error(
        exc,
        line_of(text, "@size"),
        "inputs[0].preprocess[2].resize.sise",
        "unknown key",
        "did you mean 'size'",
    )


def test_unknown_step_suggests(tmp_path: Path) -> None:
    text = BASE.replace("- resize:", "- resise:")
    exc = fail(tmp_path, text)
    assert_error(
        exc,
        line_of(text, "@resize"),
        "inputs[0].preprocess[2].resise",
        "unknown step",
        "did you mean 'resize'",
        "known steps:",
        "normalize",
    )


def test_misspelt_framework_name(tmp_path: Path) -> None:
    text = BASE.replace("name: onnxruntime", "name: onnxruntim")
    exc = fail(tmp_path, text)
    assert_error(exc, line_of(text, "@fw-name"), "framework.name", "did you mean 'onnxruntime'")


@pytest.mark.parametrize(
    ("marker", "new", "field", "words"),
    [
        ("@batch", '  batch_size: "32"', "runtime.batch_size", "expected an integer, got '32'"),
        ("@batch", "  batch_size: true", "runtime.batch_size", "expected an integer, got True"),
        ("@batch", "  batch_size: 8.5", "runtime.batch_size", "expected an integer"),
        ("@batch", "  batch_size: 0", "runtime.batch_size", "between 1 and 4096"),
        ("@batch", "  devices: cpu", "runtime.devices", "expected a list of"),
        ("@batch", "  devices: [cpu, tpu]", "runtime.devices[1]", "'tpu' is not one of"),
        (
            "@size",
            "          size: [224]",
            "inputs[0].preprocess[2].resize.size",
            "expected an integer or a list of 2 integers",
        ),
        ("@size", "          size: big", "inputs[0].preprocess[2].resize.size", "got 'big'"),
        ("@fw-version", "  version: 1.17", "framework.version", "expected a string, got 1.17"),
        ("@input-layout", "    layout: NCWH", "inputs[0].layout", "did you mean 'NCHW'"),
    ],
)
def test_wrong_types(tmp_path: Path, marker: str, new: str, field: str, words: str) -> None:
    text = replace_line(BASE, marker, new)
    exc = fail(tmp_path, text)
    assert_error(exc, line_of(BASE, marker), field, words)


def test_wrong_type_in_flow_list(tmp_path: Path) -> None:
    text = BASE.replace("mean: [127.0]", 'mean: ["127"]')
    exc = fail(tmp_path, text)
    assert_error(
        exc,
        line_of(text, "@normalize"),
        "inputs[0].preprocess[4].normalize.mean[0]",
        "expected a number, got '127'",
    )


def test_missing_required_key(tmp_path: Path) -> None:
    text = replace_line(BASE, "@checksums", "")
    exc = fail(tmp_path, text)
    assert_error(exc, line_of(text, "@dataset"), "dataset", "missing required key 'checksums'")


def test_missing_required_top_level_key(tmp_path: Path) -> None:
    text = replace_line(BASE, "name: efficientnet-lite0", "")
    exc = fail(tmp_path, text)
    first_key = line_of(text, 'version: "1.0"')
    assert_error(exc, first_key, "", "missing required key 'name'")


def test_missing_inputs(tmp_path: Path) -> None:
    text = BASE.split("inputs:")[0] + "dataset: {name: d, checksums: s}\n"
    exc = fail(tmp_path, text)
    assert_error(
        exc, line_of(text, "name: efficientnet-lite0"), "", "missing required key 'inputs'"
    )


def test_missing_preprocess(tmp_path: Path) -> None:
    start, end = line_of(BASE, "@preprocess"), line_of(BASE, "@layout")
    lines = BASE.splitlines(keepends=True)
    text = "".join(lines[: start - 1] + lines[end:])
    exc = fail(tmp_path, text)
    assert_error(exc, line_of(text, "@input"), "inputs[0]", "missing required key 'preprocess'")


def test_two_inputs_are_refused(tmp_path: Path) -> None:
    text = BASE.replace(
        "inputs:\n", "inputs:\n  - {name: extra, layout: NCHW, preprocess: [decode]}\n"
    )
    exc = fail(tmp_path, text)
    assert_error(exc, line_of(text, "inputs:"), "inputs", "one input")


@pytest.mark.parametrize(
    ("sha", "field"),
    [
        (SHA.upper(), "model.file.sha256"),
        (SHA[:-1], "model.file.sha256"),
        (SHA[:-1] + "g", "model.file.sha256"),
        (f"sha256:{SHA}", "model.file.sha256"),
    ],
)
def test_bad_sha256(tmp_path: Path, sha: str, field: str) -> None:
    text = replace_line(BASE, "@sha", f"    sha256: {sha}  # @sha")
    exc = fail(tmp_path, text)
    assert_error(exc, line_of(text, "@sha"), field, "expected 64 lowercase hex digits")


@pytest.mark.parametrize("version", ["1.17", ">=banana", ">=1.17;<2", "~=1"])
def test_invalid_pep440_specifier(tmp_path: Path, version: str) -> None:
    text = replace_line(BASE, "@fw-version", f'  version: "{version}"  # @fw-version')
    exc = fail(tmp_path, text)
    assert_error(
        exc,
        line_of(text, "@fw-version"),
        "framework.version",
        f"{version!r} is not a PEP 440 version specifier",
    )


def test_model_rules(tmp_path: Path) -> None:
    text = BASE.replace("format: onnx", "format: state_dict")
    exc = fail(tmp_path, text)
    assert_error(exc, line_of(text, "@model"), "model", "needs 'builder' and 'weights'")
    text = BASE.replace("path: model.onnx", "package: mymodels")
    exc = fail(tmp_path, text)
    assert_error(
        exc, line_of(text, "@model-file"), "model.file", "give exactly one of 'path' and 'cache'"
    )


@pytest.mark.parametrize(
    ("framework", "fmt", "refusal"),
    [
        ("tensorflow", "keras", None),
        ("tflite", "tflite", None),
        ("torch", "torchscript", None),
        ("tensorflow", "onnx", "framework 'tensorflow' does not read format 'onnx'"),
        ("onnxruntime", "tflite", "does not read format 'tflite' (framework 'tflite' does)"),
        ("tflite", "saved_model", "(framework 'tensorflow' does)"),
    ],
)
def test_framework_reads_format(
    tmp_path: Path, framework: str, fmt: str, refusal: str | None
) -> None:
    text = BASE.replace("name: onnxruntime", f"name: {framework}").replace(
        "format: onnx", f"format: {fmt}"
    )
    if refusal is None:
        assert load(tmp_path, text).model.format == fmt
    else:
        assert_error(fail(tmp_path, text), line_of(text, "@format"), "model.format", refusal)


def test_duplicate_key(tmp_path: Path) -> None:
    text = replace_line(
        BASE, "@fw-version", '  version: ">=1.17,<2"\n  name: torch                   # @dup'
    )
    exc = fail(tmp_path, text)
    assert_error(exc, line_of(text, "@dup"), "framework.name", "duplicate key")


def test_yaml_syntax_error_gives_line(tmp_path: Path) -> None:
    text = replace_line(BASE, "@fw-version", '   version: ">=1.17"          # @bad')
    exc = fail(tmp_path, text)
    assert exc.line == line_of(text, "@bad")
    assert str(exc).startswith(f"m.yaml:{exc.line}: invalid YAML: ")


def test_yaml_tab_indentation(tmp_path: Path) -> None:
    text = replace_line(BASE, "@batch", "\tbatch_size: 8  # @tab")
    exc = fail(tmp_path, text)
    assert exc.line == line_of(text, "@tab")
    assert "invalid YAML" in str(exc)


def test_alias_bomb_fails_fast(tmp_path: Path) -> None:
    rows = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        rows.append(f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]")
    text = "\n".join(rows) + "\n"
    assert len(text) < 1000  # ~ 9**9 = 387 million strings once expanded
    start = time.thread_time()  # CPU time: the work done, which a loaded machine does not inflate
    exc = fail(tmp_path, text)
    assert time.thread_time() - start < 2.0
    assert exc.file == "m.yaml" and exc.line is not None
    assert f"more than {MAX_NODES} values" in str(exc) and "alias bomb" in str(exc)


def test_alias_bomb_inside_a_manifest_field(tmp_path: Path) -> None:
    bomb = ["x1: &x1 [a, a, a, a, a, a, a, a, a]"]
    for n in range(2, 10):
        bomb.append(f"x{n}: &x{n} [{', '.join([f'*x{n - 1}'] * 9)}]")
    text = BASE.replace(
        "description: a test manifest", "description:\n" + "\n".join("  " + r for r in bomb)
    )
    start = time.thread_time()
    exc = fail(tmp_path, text)
    assert time.thread_time() - start < 2.0
    assert "alias bomb" in str(exc) and exc.field.startswith("description.")


def test_deep_nesting(tmp_path: Path) -> None:
    text = "name: " + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "\n"
    exc = fail(tmp_path, text)
    assert_error(exc, 1, exc.field, f"nested deeper than {MAX_DEPTH} levels")
    assert exc.field.startswith("name[0][0]")


def test_non_utf8_bytes(tmp_path: Path) -> None:
    raw = BASE.replace("a test manifest", "caf\u00e9").encode("latin-1")
    exc = fail(tmp_path, raw)
    assert exc.file == "m.yaml"
    assert "not UTF-8 text" in str(exc)
    assert f"(byte {raw.index(b'caf') + 3})" in str(exc)


@pytest.mark.parametrize("content", ["", "\n\n", "# only a comment\n", "---\n# nothing\n"])
def test_empty_file(tmp_path: Path, content: str) -> None:
    exc = fail(tmp_path, content)
    assert "m.yaml" in str(exc)
    if content == "---\n# nothing\n":  # an explicit empty document: a null, not a mapping
        assert "a manifest is a mapping" in str(exc)
    else:
        assert_error(exc, 1, "", "the file is empty")


def test_top_level_not_a_mapping(tmp_path: Path) -> None:
    exc = fail(tmp_path, "# a list\n- name: x\n")
    assert_error(exc, 2, "", "a manifest is a mapping")


def test_non_string_key(tmp_path: Path) -> None:
    text = BASE + "1: one                          # @intkey\n"
    exc = fail(tmp_path, text)
    assert exc.line == line_of(text, "@intkey")
    assert "mapping key 1 is not a string" in str(exc)


def test_file_too_large(tmp_path: Path) -> None:
    text = BASE + "#" * (MAX_BYTES + 1) + "\n"
    exc = fail(tmp_path, text)
    assert "larger than" in str(exc) and exc.file == "m.yaml"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"^m\.yaml: cannot read"):
        load_manifest(tmp_path / "absent.yaml", display="m.yaml")


# --- the pipeline is validated as part of the manifest ------------------------------------------


def test_pipeline_ending_in_wrong_layout(tmp_path: Path) -> None:
    text = replace_line(BASE, "@layout", "")
    exc = fail(tmp_path, text)
    assert_error(
        exc,
        line_of(text, "@preprocess"),
        "inputs[0].preprocess",
        "the steps end with HWC float32 data but the input is NCHW float32",
        "add a layout step",
    )


def test_pipeline_layout_when_input_is_nhwc(tmp_path: Path) -> None:
    text = replace_line(BASE, "@input-layout", "    layout: NHWC")
    exc = fail(tmp_path, text)
    assert_error(
        exc,
        line_of(text, "@preprocess"),
        "inputs[0].preprocess",
        "end with CHW float32 data but the input is NHWC float32",
        "add a layout step",
    )


def test_pipeline_ending_in_wrong_dtype(tmp_path: Path) -> None:
    text = replace_line(BASE, "@input-layout", "    layout: NCHW\n    dtype: float16")
    exc = fail(tmp_path, text)
    assert_error(
        exc,
        line_of(text, "@preprocess"),
        "inputs[0].preprocess",
        "CHW float32 data but the input is NCHW float16",
        "add a cast step",
    )


def test_pipeline_resize_after_layout(tmp_path: Path) -> None:
    text = replace_line(
        BASE, "@layout", "      - layout: {order: NCHW}\n      - resize: {size: 10}  # @late"
    )
    exc = fail(tmp_path, text)
    assert_error(
        exc, line_of(text, "@late"), "inputs[0].preprocess[6].resize", "before the layout step"
    )


def test_pipeline_normalize_without_cast(tmp_path: Path) -> None:
    text = replace_line(BASE, "@cast", "")
    exc = fail(tmp_path, text)
    assert_error(
        exc,
        line_of(text, "@normalize"),
        "inputs[0].preprocess[3].normalize",
        "normalize receives uint8 data",
        "cast: {dtype: float32}",
    )


def test_pipeline_decode_not_first(tmp_path: Path) -> None:
    decode = line_of(BASE, "@decode")
    crop = line_of(BASE, "@crop")
    lines = BASE.splitlines(keepends=True)
    lines[decode - 1], lines[crop - 1] = lines[crop - 1], lines[decode - 1]
    text = "".join(lines)
    exc = fail(tmp_path, text)
    assert_error(
        exc,
        line_of(text, "@crop"),
        "inputs[0].preprocess[0]",
        "the first preprocessing step must be 'decode'",
    )


def test_step_rule_between_params(tmp_path: Path) -> None:
    text = BASE.replace("method: bilinear", "method: area")
    exc = fail(tmp_path, text)
    assert_error(
        exc,
        line_of(text, "@method"),
        "inputs[0].preprocess[2].resize.method",
        "Pillow has no 'area' filter",
        "'box'",
    )


def test_step_rule_without_a_field(tmp_path: Path) -> None:
    text = BASE.replace("{fraction: 0.875, rounding: google}", "{rounding: google}")
    exc = fail(tmp_path, text)
    assert_error(
        exc,
        line_of(text, "@crop"),
        "inputs[0].preprocess[1].crop",
        "exactly one of 'fraction' and 'size'",
    )


@pytest.mark.parametrize("step", ["{resize: {size: 1}, crop: {size: 1}}", "[resize]", "42"])
def test_step_must_be_a_single_key_mapping(tmp_path: Path, step: str) -> None:
    text = replace_line(BASE, "@layout", f"      - layout: {{order: NCHW}}\n      - {step}  # @odd")
    exc = fail(tmp_path, text)
    assert_error(
        exc, line_of(text, "@odd"), "inputs[0].preprocess[6]", "each step is a mapping with one key"
    )


def test_empty_preprocess(tmp_path: Path) -> None:
    start, end = line_of(BASE, "@preprocess"), line_of(BASE, "@layout")
    lines = BASE.splitlines(keepends=True)
    text = "".join([*lines[: start - 1], "    preprocess: []   # @pre\n", *lines[end:]])
    exc = fail(tmp_path, text)
    assert_error(exc, line_of(text, "@pre"), "inputs[0].preprocess", "non-empty list of steps")


# --- names the file system cannot hold (issue 31, point 6) --------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "field", "words"),
    [
        (
            "path: model.onnx",
            f"cache: {'m' * 300}.onnx",
            "model.file.cache",
            ("is 305 bytes long", "a cache entry may have at most 200"),
        ),
        (
            "path: model.onnx",
            f"cache: {'m' * 196}.onnx",
            "model.file.cache",
            ("is 201 bytes long",),
        ),
        (
            "path: model.onnx",
            f"path: models/{'é' * 128}.onnx",
            "model.file.path",
            ("is 261 bytes long", "at most 255 bytes"),
        ),
        (
            "checksums: SHA256SUMS",
            f"checksums: {'s' * 256}",
            "dataset.checksums",
            ("is 256 bytes long",),
        ),
        (
            "description: a test manifest",
            f"description: a test manifest\ngolden: golden/{'g' * 300}.json",
            "golden",
            ("is 305 bytes long",),
        ),
    ],
    ids=["cache-300", "cache-201", "path-utf8", "checksums", "golden"],
)
def test_a_name_the_file_system_cannot_hold_is_a_manifest_error_at_its_line(
    tmp_path: Path, old: str, new: str, field: str, words: tuple[str, ...]
) -> None:
    text = BASE.replace(old, new, 1)
    key = field.rsplit(".", 1)[-1]
    line = next(n for n, t in enumerate(text.splitlines(), 1) if t.lstrip().startswith(key + ":"))
    assert_error(fail(tmp_path, text), line, field, *words)


def test_the_longest_names_a_file_system_holds_still_load(tmp_path: Path) -> None:
    text = BASE.replace("path: model.onnx", f"cache: {'m' * 195}.onnx", 1)
    file = load(tmp_path, text).model.file
    assert file is not None and file.cache == "m" * 195 + ".onnx"
