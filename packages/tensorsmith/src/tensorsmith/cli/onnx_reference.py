"""ONNX Runtime as the reference for ``tensorsmith compare``, every intermediate exposed.

ONNX Runtime computes only what a model returns, so a copy of the model returns the
output of every node too. Its own graph optimizations are switched off: fused or
rewritten nodes would still produce the requested values, but the point is to see each
ONNX node computed as the standard defines it, as plainly as possible.

onnxruntime is an optional dependency (``pip install 'tensorsmith[compare]'``).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx


class ReferenceUnavailable(ImportError):
    """onnxruntime is not installed; the message says how to install it."""


def node_outputs(model: onnx.ModelProto) -> list[str]:
    """The output names of the main graph's nodes, in node order, without empty names."""
    return [name for node in model.graph.node for name in node.output if name]


def with_all_outputs(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` whose graph also returns every node output.

    Types come from ONNX shape inference where it knows them; onnxruntime infers the rest
    (an output without a type is accepted by it).
    """
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    try:
        inferred = onnx.shape_inference.infer_shapes(copy)
        known = {vi.name: vi for vi in inferred.graph.value_info}
    except Exception:  # inference is a convenience here, never a requirement
        known = {}
    present = {vi.name for vi in copy.graph.output}
    for name in node_outputs(copy):
        if name in present:
            continue
        present.add(name)
        info = onnx.ValueInfoProto()
        if name in known:
            info.CopyFrom(known[name])
        else:
            info.name = name
        copy.graph.output.append(info)
    return copy


def run_reference(
    model: onnx.ModelProto, inputs: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """Every node output (and graph output) of ``model`` on ``inputs``, by name."""
    try:
        import onnxruntime as ort
    except ImportError:
        raise ReferenceUnavailable(
            "comparing needs ONNX Runtime as the reference, and onnxruntime is not "
            "installed: pip install 'tensorsmith[compare]' (or pip install onnxruntime)"
        ) from None
    exposed = with_all_outputs(model)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3  # warnings about unused initializers are noise here
    session = ort.InferenceSession(
        exposed.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    wanted = {i.name for i in session.get_inputs()}
    feed = {name: value for name, value in inputs.items() if name in wanted}
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feed), strict=True))
