"""Rewriting a float model into the QDQ format: QuantizeLinear/DequantizeLinear pairs
around the ops that an integer kernel would compute, everything else left float.

This is the form ONNX Runtime's quantizer writes and its CPU provider fuses into integer
kernels, and it stays a valid float model for any other runtime: each pair rounds a
tensor onto its 8-bit levels and back, so the model computes what an int8 deployment
would. Weights are stored as int8 initializers behind a DequantizeLinear (per output
channel), so the file is about a quarter of the float one.

:func:`plan` decides which nodes and tensors are quantized, before calibration, which
needs the list; :func:`rewrite` builds the new model once the ranges are known.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .errors import QuantizeError
from .qparams import activation_params, quantize_bias, quantize_weight

QUANTIZED_OPS = ("Conv", "Gemm", "MatMul")
MIN_OPSET = 13  # per-axis DequantizeLinear (and int32 bias) needs opset 13


@dataclass
class NodePlan:
    """One node to quantize: input slots quantized per tensor, the slot and channel axis
    of an int8 weight (an initializer), and the slot of a bias that may become int32."""

    index: int
    name: str
    op_type: str
    activations: list[int] = field(default_factory=list)
    weight: tuple[int, int] | None = None
    bias: int | None = None


@dataclass
class Plan:
    nodes: list[NodePlan]
    tensors: list[str]  # activations to calibrate, in first-use order
    outputs: list[str]  # compute-op outputs whose every consumer reads them quantized
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (node, why)


def with_opset(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` at default-domain opset >= 13, converted with ONNX's version converter."""
    version = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if version >= MIN_OPSET:
        return model
    try:
        from onnx import version_converter

        return version_converter.convert_version(model, MIN_OPSET)
    except Exception as e:
        raise QuantizeError(f"the model is at opset {version} and per-channel quantization "
                            f"needs opset {MIN_OPSET}; converting it failed ({e})") from None


def plan(model: onnx.ModelProto, op_types: Iterable[str] = QUANTIZED_OPS,
         quantize_outputs: bool = False) -> Plan:
    """Which nodes of the main graph get quantized, and which tensors need ranges."""
    graph = model.graph
    weights = {t.name: t for t in graph.initializer}
    types = _element_types(model)
    wanted = set(op_types)
    result = Plan([], [], [])
    for index, node in enumerate(graph.node):
        if node.op_type not in wanted or node.domain not in ("", "ai.onnx"):
            continue
        name = node.name or f"{node.op_type}#{index}"
        entry, why = _node_plan(index, name, node, weights, types)
        if entry is None:
            result.skipped.append((name, why))
            continue
        result.nodes.append(entry)
        result.tensors += [node.input[s] for s in entry.activations]
        if quantize_outputs:
            result.outputs += [o for o in node.output[:1] if o and types.get(o, 1) == 1]
    result.tensors = list(dict.fromkeys(result.tensors + result.outputs))
    return result


def _node_plan(index: int, name: str, node: onnx.NodeProto,
               weights: Mapping[str, onnx.TensorProto],
               types: Mapping[str, int]) -> tuple[NodePlan | None, str]:
    inputs = list(node.input)
    if len(inputs) < 2 or not inputs[0] or not inputs[1]:
        return None, "missing inputs"
    for slot in (0, 1):
        elem = weights[inputs[slot]].data_type if inputs[slot] in weights else types.get(
            inputs[slot], onnx.TensorProto.FLOAT)
        if elem != onnx.TensorProto.FLOAT:
            return None, f"input {inputs[slot]!r} is not float32"
    entry = NodePlan(index, name, node.op_type)
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    weight = weights.get(inputs[1])
    rank = len(weight.dims) if weight is not None else 0
    if node.op_type == "Conv" and weight is not None and rank >= 3:
        entry.weight = (1, 0)
    elif node.op_type == "Gemm" and weight is not None and rank == 2:
        entry.weight = (1, 0 if attrs.get("transB", 0) else 1)
    elif node.op_type == "MatMul" and weight is not None and rank >= 2:
        entry.weight = (1, rank - 1)
    elif weight is None:
        entry.activations.append(1)
    else:
        return None, f"weight {inputs[1]!r} of rank {rank} is not supported"
    if inputs[0] not in weights:
        entry.activations.insert(0, 0)
    if not entry.activations:
        return None, "no activation input"
    if len(inputs) > 2 and inputs[2] in weights and entry.weight and 0 in entry.activations:
        bias = weights[inputs[2]]
        channels = weight.dims[entry.weight[1]] if weight is not None else -1
        plain = node.op_type == "Conv" or (attrs.get("alpha", 1.0) == 1.0
                                           and attrs.get("beta", 1.0) == 1.0)
        if (bias.data_type == onnx.TensorProto.FLOAT and list(bias.dims) == [channels]
                and plain):
            entry.bias = 2
    return entry, ""


def rewrite(model: onnx.ModelProto, plan: Plan, ranges: Mapping[str, tuple[float, float]],
            activation_type: str = "uint8") -> tuple[onnx.ModelProto, Plan]:
    """The QDQ model, and the plan as carried out (nodes lacking a range skipped)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    weights = {t.name: t for t in graph.initializer}
    names = _Names(out)
    new_inits: list[onnx.TensorProto] = []
    prelude: list[onnx.NodeProto] = []
    after: dict[str, list[onnx.NodeProto]] = {}  # tensor -> Q/DQ nodes right after it
    qdq: dict[str, str] = {}  # float tensor -> its dequantized name
    scales: dict[str, np.float32] = {}
    inputs = {v.name for v in graph.input}
    replaced: set[str] = set()  # float initializers that have an integer version now

    def quantize_tensor(tensor: str) -> str:
        if tensor in qdq:
            return qdq[tensor]
        scale, zero = activation_params(*ranges[tensor], activation_type)
        s, z = names.new(f"{tensor}_scale"), names.new(f"{tensor}_zero_point")
        new_inits.append(numpy_helper.from_array(np.array(scale, np.float32), s))
        new_inits.append(numpy_helper.from_array(np.array(zero, activation_type), z))
        q, dq = names.new(f"{tensor}_quantized"), names.new(f"{tensor}_dequantized")
        nodes = [helper.make_node("QuantizeLinear", [tensor, s, z], [q], names.new(
                     f"{tensor}_QuantizeLinear")),
                 helper.make_node("DequantizeLinear", [q, s, z], [dq], names.new(
                     f"{tensor}_DequantizeLinear"))]  # fmt: skip
        (prelude if tensor in inputs else after.setdefault(tensor, [])).extend(nodes)
        qdq[tensor], scales[tensor] = dq, scale
        return dq

    done_weights: dict[tuple[str, int], tuple[str, np.ndarray]] = {}

    def dequantized_weight(name: str, axis: int) -> tuple[str, np.ndarray]:
        if (name, axis) not in done_weights:
            q, scale = quantize_weight(numpy_helper.to_array(weights[name]), axis)
            qn, sn, zn = (names.new(f"{name}_{s}") for s in ("quantized", "scale",
                                                              "zero_point"))
            new_inits.extend([numpy_helper.from_array(q, qn), numpy_helper.from_array(scale, sn),
                              numpy_helper.from_array(np.zeros(scale.shape, np.int8), zn)])
            dq = names.new(f"{name}_dequantized")
            prelude.append(helper.make_node("DequantizeLinear", [qn, sn, zn], [dq],
                                            names.new(f"{name}_DequantizeLinear"), axis=axis))
            done_weights[(name, axis)] = (dq, scale)
            replaced.add(name)
        return done_weights[(name, axis)]

    def dequantized_bias(name: str, x_scale: np.float32, w_scale: np.ndarray) -> str | None:
        quantized = quantize_bias(numpy_helper.to_array(weights[name]), x_scale, w_scale)
        if quantized is None:
            return None
        q, scale = quantized
        qn, sn, zn = (names.new(f"{name}_{s}") for s in ("quantized", "scale", "zero_point"))
        new_inits.extend([numpy_helper.from_array(q, qn), numpy_helper.from_array(scale, sn),
                          numpy_helper.from_array(np.zeros(scale.shape, np.int32), zn)])
        replaced.add(name)
        dq = names.new(f"{name}_dequantized")
        prelude.append(helper.make_node("DequantizeLinear", [qn, sn, zn], [dq],
                                        names.new(f"{name}_DequantizeLinear"), axis=0))
        return dq

    done = Plan([], [], [], list(plan.skipped))
    for entry in plan.nodes:
        node = graph.node[entry.index]
        lacking = [node.input[s] for s in entry.activations if node.input[s] not in ranges]
        if lacking:
            done.skipped.append((entry.name, f"no float32 calibration values of {lacking}"))
            continue
        x_scale = None
        for slot in entry.activations:
            tensor = node.input[slot]
            node.input[slot] = quantize_tensor(tensor)
            x_scale = scales[tensor] if slot == 0 else x_scale
        if entry.weight is not None:
            slot, axis = entry.weight
            node.input[slot], w_scale = dequantized_weight(node.input[slot], axis)
            if entry.bias is not None and x_scale is not None:
                node.input[entry.bias] = dequantized_bias(node.input[entry.bias], x_scale,
                                                          w_scale) or node.input[entry.bias]
        done.nodes.append(entry)
    for tensor in plan.outputs:
        if tensor in ranges and _consumers(graph, tensor):
            dq = quantize_tensor(tensor)
            for consumer in _consumers(graph, tensor):
                consumer.input[:] = [dq if i == tensor else i for i in consumer.input]
            done.outputs.append(tensor)
    done.tensors = list(qdq)

    ordered = list(prelude)
    for node in graph.node:
        ordered.append(node)
        for produced in node.output:
            ordered += after.get(produced, [])
    del graph.node[:]
    graph.node.extend(ordered)
    graph.initializer.extend(new_inits)
    _drop_unused(graph, replaced)
    return out, done


def _consumers(graph: onnx.GraphProto, tensor: str) -> list[onnx.NodeProto]:
    """Main-graph nodes reading ``tensor`` (its own Q/DQ pair is not in the graph yet)."""
    return [n for n in graph.node if tensor in n.input]


def _element_types(model: onnx.ModelProto) -> dict[str, int]:
    """ONNX element type by tensor name, where inputs or shape inference tell."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model).graph
    except Exception:
        inferred = model.graph
    infos = [*inferred.input, *inferred.value_info, *inferred.output]
    return {v.name: v.type.tensor_type.elem_type for v in infos
            if v.type.HasField("tensor_type") and v.type.tensor_type.elem_type}


def _drop_unused(graph: onnx.GraphProto, candidates: set[str]) -> None:
    """Remove the initializers among ``candidates`` that nothing reads any more."""
    used = _names_read(graph) | {v.name for v in graph.output}
    keep = [t for t in graph.initializer if t.name not in candidates or t.name in used]
    dropped = {t.name for t in graph.initializer} - {t.name for t in keep}
    del graph.initializer[:]
    graph.initializer.extend(keep)
    listed = [v for v in graph.input if v.name not in dropped]
    del graph.input[:]
    graph.input.extend(listed)


def _names_read(graph: onnx.GraphProto) -> set[str]:
    """Every tensor name a node reads, subgraphs included (they see the outer scope)."""
    read: set[str] = set()
    for node in graph.node:
        read.update(node.input)
        for attr in node.attribute:
            for sub in [attr.g, *attr.graphs] if attr.type in (
                    onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) else []:
                read |= _names_read(sub)
    return read


class _Names:
    """Fresh names for new tensors and nodes, never one the model already uses."""

    def __init__(self, model: onnx.ModelProto) -> None:
        g = model.graph
        self.used = {t.name for t in g.initializer} | {v.name for v in g.input}
        self.used |= {v.name for v in g.output} | _names_read(g)
        for node in g.node:
            self.used.update(node.output)
            self.used.add(node.name)

    def new(self, base: str) -> str:
        name, n = base, 1
        while name in self.used:
            n += 1
            name = f"{base}_{n}"
        self.used.add(name)
        return name
