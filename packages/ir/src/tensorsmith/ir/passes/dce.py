"""Dead-code elimination: drop nodes none of whose outputs reach a graph output."""

from __future__ import annotations

from ..graph import Graph


def eliminate_dead_code(graph: Graph) -> Graph:
    live = {v.uid for v in graph.results()}
    kept = []
    for node in reversed(graph.nodes):
        if any(v.uid in live for v in node.outputs):
            kept.append(node)
            live.update(v.uid for v in node.inputs)
    graph.nodes = kept[::-1]
    return graph
