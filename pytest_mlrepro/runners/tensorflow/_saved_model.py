"""SavedModels: the folder as a tar, extracted safely, one signature called; and its layers,
the ops of the signature's graph that compute on the input."""

from __future__ import annotations

import functools
import tarfile
import tempfile
import weakref
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import IntegrityError, SignatureError
from ...manifest import Manifest
from .._signature import ModelSignature, check_signature
from ._config import DEFAULT_SIGNATURE, Loaded, dims, import_tensorflow, tf_dtype_name


def safe_extract(archive: Path, target: Path) -> None:
    """Extract a SavedModel tar: plain files and folders only, every path inside ``target``."""
    with tarfile.open(archive) as tar:
        members = tar.getmembers()
        for member in members:
            name = Path(member.name)
            if name.is_absolute() or ".." in name.parts or not (member.isfile() or member.isdir()):
                raise IntegrityError(
                    f"{archive}: refusing member {member.name!r}: a SavedModel archive holds "
                    "only plain files and folders inside it"
                )
        # members checked above; the "data" filter too where this Python has it
        if hasattr(tarfile, "data_filter"):
            tar.extractall(target, members=members, filter="data")
        else:
            tar.extractall(target, members=members)
    if not (target / "saved_model.pb").is_file():
        raise IntegrityError(f"{archive}: no saved_model.pb at the top of the archive")


def load(tf: Any, manifest: Manifest, path: Path, tf_device: str) -> Loaded:
    if not tarfile.is_tarfile(path):
        raise SignatureError(
            f"{manifest.source}: {path.name} is not a tar archive: a 'saved_model' file is "
            "the SavedModel folder as a tar (tar -C <folder> -cf model.tar .)"
        )
    folder = tempfile.TemporaryDirectory(prefix="mlrepro-savedmodel-")
    safe_extract(path, Path(folder.name))
    loaded = tf.saved_model.load(folder.name)
    name = manifest.model.signature or DEFAULT_SIGNATURE
    signatures = dict(loaded.signatures)
    if name not in signatures:
        raise SignatureError(
            manifest.error(
                ("model", "signature"),
                f"the SavedModel has signatures {sorted(signatures)}, the manifest asks for "
                f"{name!r} (model.signature)",
            ).format()
        )
    signature = signatures[name]
    _, specs = signature.structured_input_signature
    declared = manifest.input.name
    spec = specs.get(declared)  # None: the name check says so
    outputs = signature.structured_outputs
    described = ModelSignature(
        "the SavedModel",
        dims(spec.shape) if spec is not None else [],
        inputs=sorted(specs),
        dtype=tf_dtype_name(spec.dtype) if spec is not None else None,
        outputs={k: dims(v.shape) if hasattr(v, "shape") else None for k, v in outputs.items()},
    )
    output = check_signature(manifest, described)
    assert output is not None  # a signature names its outputs

    def call(batch: np.ndarray) -> np.ndarray:
        with tf.device(tf_device):
            scores: np.ndarray = signature(**{declared: tf.constant(batch)})[output].numpy()
            return scores

    # The loaded object and its files live as long as the runner's call does.
    # (The ignore: mypy has no attributes on a function object.)
    call.keep_alive = (loaded, folder)  # type: ignore[attr-defined]
    weakref.finalize(call, folder.cleanup)
    layers = functools.partial(layer_outputs, signature)
    return Loaded(call, described, output, {"signature": name}, layers)


# Ops that move or describe tensors without computing on their values: not layers.
_NOT_LAYERS = frozenset(
    {"Const", "Placeholder", "Identity", "IdentityN", "NoOp", "Shape", "StridedSlice", "Pack",
     "Reshape", "Squeeze", "ExpandDims", "Cast"}
)  # fmt: skip


def layer_outputs(signature: Any, batch: np.ndarray) -> list[tuple[str, str, np.ndarray]]:
    """The outputs of the ops of a signature that compute on its input, in graph order: frozen
    into constants and pruned to fetch them all in one run."""
    tf = import_tensorflow()
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    frozen = convert_variables_to_constants_v2(signature)
    graph_def = frozen.graph.as_graph_def()
    input_name = frozen.inputs[0].name

    def imported() -> None:
        tf.compat.v1.import_graph_def(graph_def, name="")

    wrapped = tf.compat.v1.wrap_function(imported, [])
    graph = wrapped.graph
    source = graph.get_tensor_by_name(input_name).op
    # Only ops downstream of the input: the weights' own arithmetic (batch-norm folding on
    # constants) is the same for every input and says nothing about where outputs diverge.
    reached = {source.name}
    layers = []
    for op in graph.get_operations():  # graph order is a topological order
        if op is source or not any(t.op.name in reached for t in op.inputs):
            continue
        reached.add(op.name)
        if op.type not in _NOT_LAYERS and op.outputs and op.outputs[0].dtype.is_floating:
            layers.append(op)
    if not layers:
        return []
    pruned = wrapped.prune(
        feeds=[graph.get_tensor_by_name(input_name)], fetches=[op.outputs[0] for op in layers]
    )
    values = pruned(tf.constant(batch))
    return [(op.name, op.type, np.asarray(v)) for op, v in zip(layers, values)]
