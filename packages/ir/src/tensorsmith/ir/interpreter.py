"""The NumPy interpreter: runs any graph with each op's reference implementation.

It is the reference every pass and every backend is tested against.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .errors import ModelError
from .graph import Graph
from .op_registry import get_op


def run_graph(graph: Graph, inputs: Mapping[str, np.ndarray], keep_all: bool = False
              ) -> list[np.ndarray] | dict[str, np.ndarray]:
    """Evaluate ``graph``; with ``keep_all`` return every value by name (for debugging)."""
    env: dict[int, np.ndarray] = {}
    for v in graph.inputs:
        if v.name not in inputs:
            raise ModelError(f"interpreter: input '{v.name}' not given")
        env[v.uid] = np.asarray(inputs[v.name], dtype=v.dtype).reshape(v.shape)
    named: dict[str, np.ndarray] = {}
    for node in graph.nodes:
        args = [v.data if v.data is not None else env[v.uid] for v in node.inputs]
        with np.errstate(all="ignore"):
            results = get_op(node.op).reference(args, node.attrs)
        for v, r in zip(node.outputs, results):
            env[v.uid] = np.asarray(r)
            named[v.name] = env[v.uid]
    if keep_all:
        return named
    return [v.data if v.is_constant else env[v.uid] for v in graph.outputs]  # type: ignore[misc]
