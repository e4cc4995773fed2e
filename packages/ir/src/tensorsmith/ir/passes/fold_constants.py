"""Constant folding: a node whose inputs are all constants becomes constants.

Uses the ops' NumPy references, so folding is exactly what the interpreter computes.
Large folded results are still folded: they are weights the kernels would otherwise
recompute on every run (a transposed weight, say). Only a result far larger than its
inputs (a broadcast of a scalar to a billion elements) is left to run as a kernel; see
:func:`worth_folding`. A node whose result has symbolic dims (a constant expanded to
``[batch, 64]``) is not folded: its size is known only at run time.
"""

from __future__ import annotations

import numpy as np

from ..graph import Graph, Value
from ..op_registry import get_op

FOLD_GROWTH = 8
"""A folded result may take this many times its inputs' bytes: the widest cast (int8 or
bool to float64), so no cast or elementwise map of a weight is ever left unfolded."""

FOLD_SMALL_BYTES = 2**26
"""Results up to 64 MiB are folded however much they grow (a mask broadcast to
[1, 1, 4096, 4096] is one of these): that much memory at compile time is no risk."""


def worth_folding(inputs: list[Value], outputs: list[Value]) -> bool:
    """Whether folding keeps the constants' memory bounded: a result that only grows
    (Expand, Tile of a constant) is computed by a kernel instead of in compile-time memory,
    where a model could ask for terabytes."""
    grown = FOLD_GROWTH * sum(v.nbytes for v in inputs)
    return all(v.nbytes <= max(grown, FOLD_SMALL_BYTES) for v in outputs)


def fold_constants(graph: Graph) -> Graph:
    replaced: dict[int, Value] = {}
    kept = []
    for node in graph.nodes:
        node.inputs = [replaced.get(v.uid, v) for v in node.inputs]
        if (node.inputs and all(v.is_constant for v in node.inputs)
                and all(v.is_static for v in node.outputs)
                and worth_folding(node.inputs, node.outputs)):
            with np.errstate(all="ignore"):
                results = get_op(node.op).reference(
                    [v.data for v in node.inputs if v.data is not None], node.attrs)
            for v, r in zip(node.outputs, results):
                c = Graph.constant(v.name, np.asarray(r, dtype=v.dtype).reshape(v.shape))
                replaced[v.uid] = c
            continue
        kept.append(node)
    graph.nodes = kept
    graph.replace_results(replaced)
    return graph
