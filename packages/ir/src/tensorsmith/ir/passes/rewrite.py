"""Small helpers shared by graph rewrites: replacing a value everywhere it is read."""

from __future__ import annotations

from ..graph import Graph, Value


def replace_uses(graph: Graph, old: Value, new: Value) -> None:
    """Make every reader of ``old`` (and the graph outputs) read ``new`` instead."""
    for node in graph.nodes:
        node.inputs = [new if v is old else v for v in node.inputs]
    graph.outputs = [new if v is old else v for v in graph.outputs]
