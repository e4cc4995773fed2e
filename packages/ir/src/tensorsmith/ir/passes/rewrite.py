"""Small helpers shared by graph rewrites: replacing a value everywhere it is read,
naming the values and nodes a rewrite adds."""

from __future__ import annotations

from collections.abc import Callable

from ..graph import Graph, Value


def replace_uses(graph: Graph, old: Value, new: Value) -> None:
    """Make every reader of ``old`` (and the graph outputs) read ``new`` instead."""
    for node in graph.nodes:
        node.inputs = [new if v is old else v for v in node.inputs]
    graph.outputs = [new if v is old else v for v in graph.outputs]


def fresh_names(graph: Graph) -> Callable[[str], str]:
    """A namer for what a rewrite adds to ``graph``: ``base``, or ``base_1``, ``base_2``...,
    never a name of one of its values nor one the namer gave before."""
    names = {v.name for v in graph.inputs} | {
        v.name for n in graph.nodes for v in (*n.inputs, *n.outputs)}

    def fresh(base: str) -> str:
        name, k = base, 0
        while name in names:
            k += 1
            name = f"{base}_{k}"
        names.add(name)
        return name

    return fresh
