"""Algebraic simplification of the graph.

- reshape of a reshape is one reshape; a reshape to the same shape, a transpose by the
  identity permutation and a copy that nothing needs disappear;
- transpose of a transpose is one transpose (or none);
- a per-channel constant scale after conv2d or matmul (what BatchNormalization becomes)
  is folded into the constant weights, leaving only the bias add, which fuses as an
  epilogue;
- a float power by a constant 2 or 3 (the cube of the tanh GELU that GPT-2 exports) is
  multiplications: ``pow`` with a run-time exponent is a libm call per element, 5 ns
  each, where ``x * x * x`` is a few vector instructions (a 1-ulp difference).
Each rewrite keeps the graph's results equal under the interpreter (tested).
"""

from __future__ import annotations

import numpy as np

from ..dtypes import is_float
from ..graph import Graph, Node, Value
from .rewrite import replace_uses


def simplify_graph(graph: Graph) -> Graph:
    changed = True
    while changed:
        changed = False
        consumers = graph.consumers()
        for node in list(graph.nodes):
            if node not in graph.nodes:
                continue
            if _rewrite(graph, node, consumers):
                changed = True
                break
    return graph


def _only_reader(v: Value, consumers: dict[int, list[Node]], graph: Graph) -> bool:
    return len(consumers.get(v.uid, [])) == 1 and all(o is not v for o in graph.outputs)


def _drop(graph: Graph, node: Node, replacement: Value) -> bool:
    out = node.outputs[0]
    if any(o is out for o in graph.outputs) and any(i is replacement for i in graph.inputs):
        return False  # keep a node between a graph input and a graph output
    replace_uses(graph, out, replacement)
    graph.nodes.remove(node)
    return True


def _rewrite(graph: Graph, node: Node, consumers: dict[int, list[Node]]) -> bool:
    x = node.inputs[0] if node.inputs else None
    if x is None:
        return False
    if node.op == "reshape" and node.outputs[0].shape == x.shape:
        return _drop(graph, node, x)
    if node.op == "transpose" and list(node.attrs["perm"]) == list(range(len(x.shape))):
        return _drop(graph, node, x)
    if node.op == "pow":
        return _pow_as_products(graph, node)
    producer = x.producer
    if producer is None or x.is_constant:
        return False
    if node.op == "reshape" and producer.op == "reshape" and producer in graph.nodes:
        if not node.attrs.get("allowzero", True):  # its 0s copy dims of the input it loses
            node.attrs = {"shape": list(node.outputs[0].shape)}
        node.inputs = [producer.inputs[0]]
        return True
    if node.op == "transpose" and producer.op == "transpose" and producer in graph.nodes:
        inner, outer = producer.attrs["perm"], node.attrs["perm"]
        node.attrs = {"perm": [inner[p] for p in outer]}
        node.inputs = [producer.inputs[0]]
        return True
    if node.op == "mul" and producer.op in ("conv2d", "matmul") and _only_reader(
            x, consumers, graph):
        return _fold_scale(graph, node, producer, consumers)
    return False


def _fold_scale(graph: Graph, mul: Node, producer: Node, consumers: dict[int, list[Node]]
                ) -> bool:
    """y = op(x, W) * s with s constant and varying only along the output channel."""
    scale = next((v for v in mul.inputs if v.is_constant), None)
    weight = producer.inputs[1]
    if scale is None or not weight.is_constant or len(consumers.get(weight.uid, [])) != 1:
        return False
    assert scale.data is not None and weight.data is not None
    out = producer.outputs[0]
    s = scale.data
    if s.ndim > len(out.shape):
        return False
    s_full = s.reshape((1,) * (len(out.shape) - s.ndim) + s.shape)
    channel_axis = 1 if producer.op == "conv2d" else len(out.shape) - 1
    if any(n != 1 for d, n in enumerate(s_full.shape) if d != channel_axis):
        return False
    per_channel = s_full.reshape(-1)
    channels = out.shape[channel_axis]
    if not isinstance(channels, int) or per_channel.size not in (1, channels):
        return False  # (a symbolic channel axis: no constant weight has it)
    per_channel = np.broadcast_to(per_channel, (channels,)).astype(weight.dtype)
    if producer.op == "conv2d":
        folded = weight.data * per_channel[:, None, None, None]
    else:
        folded = weight.data * per_channel  # scales the last (column) axis of B
    if mul.outputs[0].shape != out.shape:
        return False
    new_w = Graph.constant(weight.name + "_scaled", folded.astype(weight.dtype))
    producer.inputs = [producer.inputs[0], new_w, *producer.inputs[2:]]
    replace_uses(graph, mul.outputs[0], out)
    graph.nodes.remove(mul)
    return True


#: Constant exponents a float ``pow`` is rewritten for, as products of its base.
SMALL_POWERS = (2, 3)


def _pow_as_products(graph: Graph, node: Node) -> bool:
    """``pow(x, 2)`` -> ``x * x`` and ``pow(x, 3)`` -> ``(x * x) * x`` for a float ``x``
    and a constant exponent of one element (a scalar, so the output has ``x``'s shape)."""
    x, exponent = node.inputs
    out = node.outputs[0]
    if (not exponent.is_constant or exponent.data is None or exponent.data.size != 1
            or not is_float(x.dtype) or out.shape != x.shape):
        return False
    power = float(exponent.data.reshape(-1)[0])
    if power not in SMALL_POWERS:
        return False
    if power == 2:
        node.op, node.inputs, node.attrs = "mul", [x, x], {}
        return True
    square = Value(f"{out.name}/square", x.shape, x.dtype)
    first = Node("mul", [x, x], [square], {}, f"{node.name}/square")
    square.producer = first
    graph.nodes.insert(graph.nodes.index(node), first)
    node.op, node.inputs, node.attrs = "mul", [square, x], {}
    return True
