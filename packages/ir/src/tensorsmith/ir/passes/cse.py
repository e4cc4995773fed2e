"""Common-subexpression elimination: nodes with the same op, inputs and attributes
compute the same values once."""

from __future__ import annotations

import json

from ..graph import Graph, Node, Value


def _key(node: Node, ids: dict[int, int]) -> str:
    inputs = ",".join(str(ids.get(v.uid, v.uid)) for v in node.inputs)
    return f"{node.op}({inputs}){json.dumps(node.attrs, sort_keys=True, default=str)}"


def eliminate_common_subexpressions(graph: Graph) -> Graph:
    ids: dict[int, int] = {}  # value uid -> canonical value uid
    canonical: dict[int, Value] = {}
    seen: dict[str, Node] = {}
    kept: list[Node] = []
    for node in graph.nodes:
        node.inputs = [canonical.get(v.uid, v) for v in node.inputs]
        key = _key(node, ids)
        twin = seen.get(key)
        if twin is not None:
            for mine, theirs in zip(node.outputs, twin.outputs):
                canonical[mine.uid] = theirs
                ids[mine.uid] = theirs.uid
            continue
        seen[key] = node
        kept.append(node)
    graph.nodes = kept
    graph.outputs = [canonical.get(v.uid, v) for v in graph.outputs]
    return graph
