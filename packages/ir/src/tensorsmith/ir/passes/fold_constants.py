"""Constant folding: a node whose inputs are all constants becomes constants.

Uses the ops' NumPy references, so folding is exactly what the interpreter computes.
Large folded results are still folded: they are weights the kernels would otherwise
recompute on every run (a transposed weight, say).
"""

from __future__ import annotations

import numpy as np

from ..graph import Graph, Value
from ..op_registry import get_op


def fold_constants(graph: Graph) -> Graph:
    replaced: dict[int, Value] = {}
    kept = []
    for node in graph.nodes:
        node.inputs = [replaced.get(v.uid, v) for v in node.inputs]
        if node.inputs and all(v.is_constant for v in node.inputs):
            with np.errstate(all="ignore"):
                results = get_op(node.op).reference(
                    [v.data for v in node.inputs if v.data is not None], node.attrs)
            for v, r in zip(node.outputs, results):
                c = Graph.constant(v.name, np.asarray(r, dtype=v.dtype).reshape(v.shape))
                replaced[v.uid] = c
            continue
        kept.append(node)
    graph.nodes = kept
    graph.outputs = [replaced.get(v.uid, v) for v in graph.outputs]
    return graph
