"""Merge matrix products that share their left operand into one wider product.

An attention layer's queries, keys and values are three products of the same activations
with three weight matrices. One product with the weights side by side reads the
activations once, runs one kernel instead of three, and gives its schedule three times
the columns to tile (small products leave a register tile's rows and a thread's share
short). Each original result becomes a slice of the merged one along the last axis; the
slice fuses into whatever reads it (the heads' reshape and transpose), so nothing is
copied. A constant bias added to every product is merged the same way. Each output
element is the same sum as before, so the results are bit-identical.
"""

from __future__ import annotations

import numpy as np

from ..graph import Graph, Node, Value
from .rewrite import replace_uses


def merge_parallel_matmuls(graph: Graph) -> Graph:
    consumers = graph.consumers()
    outputs = {v.uid for v in graph.outputs}
    groups: dict[tuple[int, str], list[Node]] = {}
    for node in graph.nodes:
        if _weight_product(node):
            groups.setdefault((node.inputs[0].uid, node.inputs[1].dtype), []).append(node)
    for group in groups.values():
        if len(group) >= 2:
            _merge(graph, group, consumers, outputs)
    return graph


def _weight_product(node: Node) -> bool:
    """``activations @ W`` with W a constant matrix (what merging can widen)."""
    return (node.op == "matmul" and len(node.inputs) == 2 and not node.inputs[0].is_constant
            and node.inputs[1].is_constant and len(node.inputs[1].shape) == 2
            and len(node.inputs[0].shape) >= 2)


def _bias_of(node: Node, consumers: dict[int, list[Node]], outputs: set[int]
             ) -> tuple[Node, np.ndarray] | None:
    """The ``add`` of a constant vector that is the product's only reader, and that
    vector, if any."""
    out = node.outputs[0]
    users = consumers.get(out.uid, [])
    if len(users) != 1 or out.uid in outputs or users[0].op != "add":
        return None
    add = users[0]
    other = [v for v in add.inputs if v is not out]
    if len(other) != 1 or not other[0].is_constant or other[0].dtype != out.dtype:
        return None
    bias = other[0]
    n = out.shape[-1]
    if add.outputs[0].shape != out.shape or bias.shape[-1:] != (n,) or any(
            d != 1 for d in bias.shape[:-1]):
        return None
    assert bias.data is not None
    return add, np.asarray(bias.data).reshape(-1)


def _merge(graph: Graph, group: list[Node], consumers: dict[int, list[Node]],
           outputs: set[int]) -> None:
    first = group[0]
    lhs = first.inputs[0]
    found = [_bias_of(n, consumers, outputs) for n in group]
    biases = [b for b in found if b is not None]
    with_bias = len(biases) == len(group)
    widths = [n.inputs[1].shape[1] for n in group]
    weight = Graph.constant(f"{first.name}/merged_weight",
                            np.concatenate([n.inputs[1].data for n in group], axis=1))
    merged_shape = (*first.outputs[0].shape[:-1], sum(widths))
    dtype = first.outputs[0].dtype
    product = Value(f"{first.name}/merged", merged_shape, dtype)
    new_nodes = [Node("matmul", [lhs, weight], [product], {}, f"{first.name}/merged")]
    results = [n.outputs[0] for n in group]
    removed = {id(n) for n in group}
    if with_bias:
        bias = Graph.constant(f"{first.name}/merged_bias",
                              np.concatenate([vector for _, vector in biases]))
        summed = Value(f"{first.name}/merged_add", merged_shape, dtype)
        new_nodes.append(Node("add", [product, bias], [summed], {}, f"{first.name}/merged_add"))
        product = summed
        results = [add.outputs[0] for add, _ in biases]
        removed |= {id(add) for add, _ in biases}
    offset, rank = 0, len(merged_shape)
    for original, width in zip(results, widths):
        attrs = {"begin": [0] * (rank - 1) + [offset],
                 "end": [*merged_shape[:-1], offset + width], "step": [1] * rank}
        piece = Value(original.name, original.shape, original.dtype)
        new_nodes.append(Node("slice", [product], [piece], attrs, f"{original.name}/slice"))
        replace_uses(graph, original, piece)
        offset += width
    for node in new_nodes:
        node.outputs[0].producer = node
    # The merged nodes go where the first product was: everything they read exists there.
    at = sum(1 for n in graph.nodes[:graph.nodes.index(first)] if id(n) not in removed)
    kept = [n for n in graph.nodes if id(n) not in removed]
    graph.nodes = kept[:at] + new_nodes + kept[at:]
