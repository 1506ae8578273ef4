"""TF1 frozen graphs: a GraphDef run in its own session, the input a named placeholder and the
output named or the graph's one sink."""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import SignatureError
from ...manifest import Manifest
from .._signature import ModelSignature, check_signature
from .._warnings import loading
from ._config import Loaded, dims, tf_dtype_name


def load(tf: Any, manifest: Manifest, path: Path, tf_device: str) -> Loaded:
    v1 = tf.compat.v1
    graph_def = v1.GraphDef()
    with loading(manifest, f"{path.name} is not a TensorFlow GraphDef", error=SignatureError):
        graph_def.ParseFromString(path.read_bytes())
    graph = tf.Graph()
    with graph.as_default():
        v1.import_graph_def(graph_def, name="")
    input_tensor = _graph_tensor(graph, manifest.input.name, manifest, "input")
    if input_tensor.op.type != "Placeholder":
        raise SignatureError(
            f"{manifest.source}: {input_tensor.name!r} is a {input_tensor.op.type} op, not "
            "a Placeholder: name the graph's input"
        )
    if manifest.postprocess.output is not None:
        output_tensor = _graph_tensor(graph, manifest.postprocess.output, manifest, "output")
    else:
        sinks = _sink_tensors(graph)
        if len(sinks) != 1:
            raise SignatureError(
                f"{manifest.source}: a frozen graph declares no outputs and it ends in "
                f"{[t.name for t in sinks][:8]}: name the one with the class scores with "
                "postprocess.output (e.g. 'logits:0')"
            )
        output_tensor = sinks[0]
    runtime = manifest.runtime
    config = v1.ConfigProto(
        intra_op_parallelism_threads=runtime.intra_op_threads or 0,
        inter_op_parallelism_threads=runtime.inter_op_threads or 0,
        device_count={"GPU": 1 if tf_device.startswith("/GPU") else 0},
    )
    session = v1.Session(graph=graph, config=config)

    def call(batch: np.ndarray) -> np.ndarray:
        scores: np.ndarray = session.run(output_tensor, {input_tensor: batch})
        return scores

    weakref.finalize(call, session.close)
    # The graph found both tensors by name: the check holds the rest against the manifest.
    output = manifest.postprocess.output or output_tensor.name
    described = ModelSignature(
        "the frozen graph",
        _shape(input_tensor),
        inputs=[input_tensor.name],
        aliases=[input_tensor.op.name],
        dtype=tf_dtype_name(input_tensor.dtype),
        outputs={output: _shape(output_tensor)},
    )
    check_signature(manifest, described)
    # Per-session thread pools: a frozen graph gets the manifest's counts.
    threads = {
        "session_intra_op_threads": runtime.intra_op_threads or "default",
        "session_inter_op_threads": runtime.inter_op_threads or "default",
    }
    return Loaded(call, described, output_tensor.name, threads)


def _shape(tensor: Any) -> list[int | None]:
    return dims(tensor.shape.as_list()) if tensor.shape.rank is not None else []


def _graph_tensor(graph: Any, name: str, manifest: Manifest, what: str) -> Any:
    tensor_name = name if ":" in name else f"{name}:0"
    try:
        return graph.get_tensor_by_name(tensor_name)
    except (KeyError, ValueError):
        placeholders = [op.name for op in graph.get_operations() if op.type == "Placeholder"]
        known = f"; its placeholders: {placeholders[:8]}" if what == "input" else ""
        raise SignatureError(
            f"{manifest.source}: the frozen graph has no tensor {tensor_name!r} (the {what}){known}"
        ) from None


def _sink_tensors(graph: Any) -> list[Any]:
    """Outputs of ops that no other op consumes (constants and no-ops aside)."""
    consumed = {t.name for op in graph.get_operations() for t in op.inputs}
    return [
        t
        for op in graph.get_operations()
        if op.type not in ("Const", "NoOp", "Placeholder", "Assert")
        for t in op.outputs
        if t.name not in consumed
    ]
