"""Which operators got slower: ONNX Runtime's profile of a real (tiny) model has its nodes, the
comparison of two profiles says where the added time went (hand-built profiles: nothing here
depends on how fast this machine runs), the profile's JSON is the golden's (schema), and the
findings are the results file's ``operators`` and the report's words.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest

from pytest_mlrepro.goldens import _latency_store as latency_store
from pytest_mlrepro.goldens._store import SCHEMA_FILE
from pytest_mlrepro.latency import (
    NoProfile,
    OperatorProfile,
    OperatorTime,
    compare_profiles,
    findings_json,
    operator_findings,
    profile_from_json,
    profile_json,
    take_profile,
)
from pytest_mlrepro.latency._profile import (
    COVERED,
    EVEN_SLOWED,
    EVEN_SPREAD,
    MAX_LISTED,
    PROFILE_CALLS,
)
from pytest_mlrepro.report import operators_lead, operators_text
from pytest_mlrepro.results import Operators, record, results_schema
from pytest_mlrepro.runners._profiling import ort_operator_calls

# --- a real profile -----------------------------------------------------------------------------


def conv_bn_relu() -> bytes:
    """Conv → BatchNormalization → Relu, named nodes: what graph optimisation fuses."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype("f4"), "w")]
    for name, value in (("s", 1.0), ("b", 0.0), ("m", 0.0), ("v", 1.0)):
        weights.append(numpy_helper.from_array(np.full(8, value, "f4"), name))
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"], name="bn"),
        helper.make_node("Relu", ["n"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "conv_bn_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8, 16, 16])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


def ort_profile(level: str) -> OperatorProfile:
    import onnxruntime as ort

    from pytest_mlrepro.runners.onnx import OnnxRunner

    model = conv_bn_relu()
    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    runner = OnnxRunner(session, "x", ["N", 3, 16, 16], "y", model, options)
    runner.info = {"device": "cpu"}
    batch = np.random.default_rng(1).standard_normal((2, 3, 16, 16)).astype("f4")
    profile = take_profile(runner, batch, "onnxruntime")
    assert isinstance(profile, OperatorProfile), profile
    assert not options.enable_profiling  # the runner's own options are left as they were
    return profile


def test_onnx_runtime_profiles_every_node_of_a_real_model_and_fusion_shows() -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    unfused = ort_profile("ORT_DISABLE_ALL")
    assert [(o.name, o.kind) for o in unfused.operators] == [
        ("bn", "BatchNormalization"),
        ("conv", "Conv"),
        ("relu", "Relu"),
    ]
    assert {o.provider for o in unfused.operators} == {"CPUExecutionProvider"}
    assert unfused.calls == PROFILE_CALLS and unfused.runtime == "onnxruntime"
    assert all(o.ms >= 0 for o in unfused.operators) and unfused.call_ms > 0
    # With every optimisation the batch normalisation (and the activation) is fused into the
    # convolution: fewer nodes, no BatchNormalization node.
    fused = ort_profile("ORT_ENABLE_ALL")
    assert "BatchNormalization" not in {o.kind for o in fused.operators}
    assert "Conv" in {o.kind for o in fused.operators}
    c = compare_profiles(fused, unfused)
    assert {k.kind for k in c.new_kinds} >= {"BatchNormalization", "Relu"}
    assert c.now_nodes == 3 and c.unfused


def test_ort_trace_parsing_drops_warm_up_calls_and_sums_per_call() -> None:
    def run(ts: int, dur: int) -> dict[str, object]:
        return {"cat": "Session", "name": "model_run", "ts": ts, "dur": dur}

    def node(name: str, ts: int, dur: int, op: str = "Conv") -> dict[str, object]:
        args = {"op_name": op, "provider": "CPUExecutionProvider"}
        return {"cat": "Node", "name": f"{name}_kernel_time", "ts": ts, "dur": dur, "args": args}

    fence = {**node("a", 205, 1), "name": "a_fence_before"}  # synchronisation, not the operator
    events = [
        run(0, 100), node("a", 10, 90),  # warm-up
        run(200, 50), node("a", 210, 20), fence, node("b", 240, 5, "Add"),
        run(300, 50), node("a", 310, 30),
    ]  # fmt: skip
    calls = ort_operator_calls(events, skip=1)
    assert calls.call_seconds == pytest.approx((50e-6, 50e-6))
    by_name = {o.name: o for o in calls.operators}
    assert set(by_name) == {"a", "b"}
    assert by_name["a"].seconds == pytest.approx((20e-6, 30e-6))
    assert by_name["b"].seconds == pytest.approx((5e-6, 0.0)) and by_name["b"].kind == "Add"


def test_a_runtime_without_a_profiler_says_so() -> None:
    # The TensorFlow and TFLite runners have no operator_times: their Python APIs give no
    # per-operator times (docs/latency.md).
    found = take_profile(object(), np.zeros((1, 3)), "tflite")
    assert isinstance(found, NoProfile) and found.runtime == "tflite"
    findings = operator_findings(None, found)
    lines = operators_text(record(Operators, findings_json(findings)))
    assert lines == [f"  which operators got slower: no operator profile for tflite: {found.why}"]


# --- the comparison -----------------------------------------------------------------------------


def profile(ops: list[tuple[str, str, float]], runtime: str = "onnxruntime") -> OperatorProfile:
    operators = tuple(OperatorTime(n, k, "CPUExecutionProvider", ms) for n, k, ms in ops)
    total = sum(ms for _, _, ms in ops)
    return OperatorProfile(runtime, "hand-built", 15, total * 1.05, operators)


# A model of 20 convolutions and a few small ops, of uneven sizes.
MODEL = [(f"block{i}/Conv", "Conv", 0.2 + 0.05 * i) for i in range(20)] + [
    ("pool", "GlobalAveragePool", 0.05),
    ("fc", "Gemm", 0.3),
]


def test_one_thread_instead_of_two_is_most_operators_evenly() -> None:
    golden = profile(MODEL)
    # Each operator ×1.5–×1.9 slower (the way half the threads slow every parallel kernel).
    rng = np.random.default_rng(3)
    now = profile([(n, k, ms * rng.uniform(1.5, 1.9)) for n, k, ms in MODEL])
    c = compare_profiles(golden, now)
    assert c.by_node and c.matched == 1.0
    assert c.pattern == "evenly"
    assert c.slowed >= EVEN_SLOWED and c.spread >= EVEN_SPREAD and c.new_share == 0
    assert c.top3 < 0.5
    assert 1.5 <= c.ratios[0] <= c.ratios[1] <= c.ratios[2] <= 1.9
    # Spread over 22 operators: the list stops at its cap before it covers 80% of the time.
    assert len(c.operators) == MAX_LISTED and c.covered < COVERED
    assert sum(o.added_ms for o in c.operators) == pytest.approx(c.covered * c.added_ms)
    assert not c.unfused and not c.dequantised and not c.changes and not c.new_kinds
    text = "\n".join(operators_text(record(Operators, findings_json(operator_findings(
        profile_json(golden), now)))))  # fmt: skip
    assert "most operators, evenly" in text
    assert f"these {len(c.operators)} operators took {c.covered:.0%} of the added time" in text
    assert "by op type: Conv +" in text


def test_one_operator_much_slower_is_concentrated_and_named_first() -> None:
    golden = profile(MODEL)
    now = profile([(n, k, ms * (4 if n == "block7/Conv" else 1.01)) for n, k, ms in MODEL])
    c = compare_profiles(golden, now)
    assert c.pattern == "concentrated"
    assert c.operators[0].name == "block7/Conv" and c.operators[0].share > 0.8
    assert len(c.operators) == 1 and c.top3 > 0.9
    # That one operator holds 4% of the golden's time (its own share: the spread).
    assert c.spread == pytest.approx(0.55 / sum(ms for _, _, ms in MODEL))
    lead = operators_lead(record(Operators, findings_json(operator_findings(
        profile_json(golden), now))))  # fmt: skip
    assert lead == f"concentrated: 1 operator took {c.covered:.0%} of the added time"


# Graph optimisation "all" (as ONNX Runtime runs EfficientNet-Lite0): 10 fused convolutions in
# NCHWc layout renamed after their outputs, one reorder; "disabled": the original nodes, with
# the activations (Clip), additions and padding each a node of its own.
FUSED = [(f"/b{i}/Clip_output_0_nchwc", "Conv", 0.4) for i in range(10)] + [
    ("ReorderOutput", "ReorderOutput", 0.05),
    ("fc", "Gemm", 0.3),
]
UNFUSED = (
    [(f"/b{i}/conv/Conv", "Conv", 0.46) for i in range(10)]
    + [(f"/b{i}/Clip", "Clip", 0.12) for i in range(8)]
    + [(f"/b{i}/Add", "Add", 0.1) for i in range(3)]
    + [(f"/b{i}/Pad", "Pad", 0.05) for i in range(5)]
    + [("fc", "Gemm", 0.3)]
)


def test_optimisation_disabled_names_the_unfused_operators() -> None:
    c = compare_profiles(profile(FUSED), profile(UNFUSED))
    # The nodes were renamed: compared op type by op type.
    assert not c.by_node and c.matched < 0.5
    assert c.unfused and c.now_nodes == 27 and c.golden_nodes == 12
    assert [(k.kind, k.now_nodes) for k in c.new_kinds] == [("Clip", 8), ("Add", 3), ("Pad", 5)]
    assert [k.kind for k in c.gone_kinds] == ["ReorderOutput"]
    assert c.pattern == "concentrated" and c.new_share > 0.5
    assert c.operators[0].kind == "Clip" and c.operators[0].golden_ms is None
    assert {o.kind for o in c.operators} >= {"Clip", "Conv"}
    text = "\n".join(operators_text(record(Operators, findings_json(operator_findings(
        profile_json(profile(FUSED)), profile(UNFUSED))))))  # fmt: skip
    assert "the graph changed" in text and "op types are compared" in text
    assert "most operators" not in text  # op types were compared, not operators
    assert "fused operators split apart: 27 nodes run now, 12 in the golden" in text
    assert "op types the golden never ran: Clip (8 nodes, 0.96 ms), Add (3 nodes" in text
    assert "op types no longer run: ReorderOutput (1 node, 0.05 ms)" in text


RECORDED = Path(__file__).parents[1] / "data" / "profiles" / "efficientnet_lite0_ort.json"


def test_recorded_efficientnet_profiles_threads_and_optimisation() -> None:
    """Profiles of the example's model recorded on the development machine (the file says how):
    one thread instead of two is most operators, evenly; optimisation disabled names the
    unfused op types."""
    recorded = json.loads(RECORDED.read_text())
    golden = profile_from_json(recorded["golden"])
    threads = compare_profiles(golden, profile_from_json(recorded["threads1"]))
    assert threads.by_node and threads.pattern == "evenly"
    assert threads.golden_nodes == threads.now_nodes == 53 and not threads.unfused
    assert threads.kinds[0].kind == "Conv" and threads.kinds[0].share > 0.9
    assert len(threads.operators) == MAX_LISTED  # spread over more than ten operators
    disabled = compare_profiles(golden, profile_from_json(recorded["disabled"]))
    assert not disabled.by_node and disabled.unfused
    assert (disabled.golden_nodes, disabled.now_nodes) == (53, 234)
    assert {k.kind for k in disabled.new_kinds} >= {"Clip", "Pad", "Add", "Transpose"}
    assert [k.kind for k in disabled.gone_kinds] == ["ReorderOutput"]
    text = "\n".join(operators_text(record(Operators, findings_json(operator_findings(
        recorded["golden"], profile_from_json(recorded["disabled"]))))))  # fmt: skip
    assert "fused operators split apart: 234 nodes run now, 53 in the golden" in text
    assert "Clip (33 nodes" in text and "Pad (17 nodes" in text


def test_kind_changes_quantised_now_float_and_another_provider() -> None:
    golden = profile(
        [("c1", "QLinearConv", 0.2), ("c2", "Conv", 0.5), ("q", "QuantizeLinear", 0.1)]
    )
    now = OperatorProfile(
        "onnxruntime",
        "hand-built",
        15,
        2.0,
        (
            OperatorTime("c1", "Conv", "CPUExecutionProvider", 0.9),
            OperatorTime("c2", "Conv", "CUDAExecutionProvider", 0.5),
        ),
    )
    c = compare_profiles(golden, now)
    assert c.dequantised
    assert [(ch.name, ch.golden_kind, ch.now_kind, ch.change) for ch in c.changes] == [
        ("c1", "QLinearConv", "Conv", "quantised → float"),
        ("c2", "Conv", "Conv", "another provider"),
    ]
    text = "\n".join(operators_text(record(Operators, findings_json(operator_findings(
        profile_json(golden), now)))))  # fmt: skip
    assert "c1: QLinearConv → Conv (quantised → float)" in text
    assert (
        "c2: Conv → Conv, CPUExecutionProvider → CUDAExecutionProvider (another provider)" in text
    )
    assert "quantised operators now float" in text


def test_nothing_slower_in_the_operators_says_the_time_went_elsewhere() -> None:
    golden = profile(MODEL)
    c = compare_profiles(golden, golden)
    assert c.pattern == "none" and c.added_ms == 0 and c.operators == ()
    text = operators_text(record(Operators, findings_json(operator_findings(
        profile_json(golden), golden))))  # fmt: skip
    assert any("no operator took more time" in line for line in text)


def test_a_golden_without_a_profile_gives_the_enrich_command() -> None:
    findings = operator_findings(None, profile(MODEL))
    assert findings.missing == "golden" and findings.comparison is None
    ops = record(Operators, findings_json(findings))
    lines = operators_text(
        ops,
        "pytest 'm.yaml::latency[cpu-b1]' --mlrepro-enrich",
        "pytest 'm.yaml::latency[cpu-b1]' --mlrepro-update",
    )
    assert lines[0].endswith("add one with a run that reproduces the golden:")
    assert lines[1] == "    pytest 'm.yaml::latency[cpu-b1]' --mlrepro-enrich"
    assert lines[-1] == "    pytest 'm.yaml::latency[cpu-b1]' --mlrepro-update"


# --- the golden's JSON and the results file's --------------------------------------------------


def test_profile_json_round_trips_sorted_and_satisfies_the_golden_schema() -> None:
    shuffled = profile(list(reversed(MODEL)))
    raw = profile_json(shuffled)
    names = [o["name"] for o in raw["operators"]]
    assert names == sorted(names)  # stable order whatever the profiler's
    schema = json.loads(SCHEMA_FILE.read_text())
    jsonschema.Draft202012Validator(
        {"$defs": schema["$defs"], "$ref": "#/$defs/LatencyProfile"}
    ).validate(raw)
    back = profile_from_json(json.loads(json.dumps(raw)))
    assert back.operators == tuple(sorted(shuffled.operators, key=lambda o: o.name))
    # The store's own check: a hand-edited profile is named, a valid one passes.
    latency_store._check_profile(raw, "batch 1 profile")
    broken = {**raw, "operators": [{**raw["operators"][0], "ms": "fast"}]}
    with pytest.raises(ValueError, match=r"batch 1 profile\.operators\.0\.ms: expected a non-"):
        latency_store._check_profile(broken, "batch 1 profile")


def test_findings_are_a_valid_results_row_field() -> None:
    c = operator_findings(profile_json(profile(FUSED)), profile(UNFUSED))
    row: dict[str, Any] = {
        "nodeid": "manifests/m.yaml::latency[cpu-b1]",
        "outcome": "failed",
        "kind": "latency",
        "operators": findings_json(c),
    }
    document = {
        "format": 2,
        "machine": {"name": "m", "environment": {}},
        "shard": None,
        "results": [row],
    }
    jsonschema.Draft202012Validator(results_schema()).validate(json.loads(json.dumps(document)))
    typed = record(Operators, row["operators"])
    assert typed.compared and typed.unfused and typed.new_kinds[0].kind == "Clip"


def test_torch_profiler_gives_each_op_types_self_time() -> None:
    torch = pytest.importorskip("torch")
    from pytest_mlrepro.runners.torch import TorchRunner

    module = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU()).eval()
    runner = TorchRunner(module, torch.device("cpu"), {"device": "cpu"})
    batch = np.random.default_rng(2).standard_normal((2, 3, 16, 16)).astype("f4")
    found = take_profile(runner, batch, "torch")
    assert isinstance(found, OperatorProfile), found
    names = [o.name for o in found.operators]
    assert names == sorted(names) and all(o.name == o.kind for o in found.operators)
    assert any("conv" in n for n in names) and any("relu" in n for n in names), names
    assert found.calls == PROFILE_CALLS and found.source.startswith("torch.profiler")
