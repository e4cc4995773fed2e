"""Operator fusion: partition the graph's nodes into groups that become one kernel each.

Rules by fusion pattern (the ops' ``Pattern``), applied in topological order:
- an elementwise or broadcast node joins the group of a producer whose every output is
  consumed by this node alone (epilogues: matmul+add+relu, reduction+divide, chains);
- an injective node joins such a group when the group holds no reduction or
  out-elementwise-fusable anchor (data movement before an anchor stays cheap and
  inlinable; after one it would force the anchor's result through scratch memory twice);
- a reduction joins such a group when the group is elementwise/injective only
  (prologues: exp -> sum);
- opaque ops and out-elementwise-fusable anchors (matmul, conv) start their own group;
- ``standalone`` nodes (Concats done in place, see concat_views.py) and ops whose kernel
  is written directly as tensor IR (ir/direct.py: no schedule could add an epilogue to
  it) are a group of their own that nothing joins;
- an elementwise node that closes a diamond (``x * sigmoid(x)``, GELU's ``x * (1 +
  erf(x / sqrt 2))``, or ``(x * 0.5) * (1 + tanh(..x..))`` whose both sides are groups
  of their own) joins the group of ``x`` together with the elementwise groups on the
  other side, when those read only that group's values and feed only this node.
Joining only producers whose outputs have no other consumer guarantees the groups form
a DAG; they are returned in an order that runs each after the groups it reads.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from ..graph import Graph, Node, Value
from ..op_registry import Pattern, get_op


@dataclass(eq=False)
class FusedGroup:
    nodes: list[Node] = field(default_factory=list)
    inputs: list[Value] = field(default_factory=list)
    outputs: list[Value] = field(default_factory=list)

    @property
    def pattern(self) -> Pattern:
        return max(get_op(n.op).pattern for n in self.nodes)

    @property
    def name(self) -> str:
        ops = []
        for n in self.nodes:
            if n.op not in ops:
                ops.append(n.op)
        return "fused_" + "_".join(ops[:4])


def _can_join(node_pattern: Pattern, group_pattern: Pattern) -> bool:
    if node_pattern <= Pattern.BROADCAST:
        return True
    if node_pattern == Pattern.INJECTIVE:
        return group_pattern <= Pattern.INJECTIVE
    if node_pattern == Pattern.REDUCTION:
        return group_pattern <= Pattern.INJECTIVE
    return False


def fuse_ops(graph: Graph, enabled: bool = True,
             standalone: AbstractSet[int] = frozenset()) -> list[FusedGroup]:
    """The groups of ``graph``'s nodes; ``standalone`` holds ``id()`` of nodes that must
    stay alone."""
    standalone = {*standalone, *(id(n) for n in graph.nodes if get_op(n.op).kernel is not None)}
    consumers = graph.consumers()
    output_ids = {v.uid for v in graph.results()}
    position = {id(n): i for i, n in enumerate(graph.nodes)}
    group_of: dict[int, FusedGroup] = {}  # node id -> group
    groups: list[FusedGroup] = []
    for node in graph.nodes:
        target = None
        pattern = get_op(node.op).pattern
        if enabled and id(node) not in standalone and pattern <= Pattern.BROADCAST:
            target = _close_diamond(node, group_of, groups, consumers, output_ids, standalone,
                                    position)
        if target is None and enabled and id(node) not in standalone:
            for v in node.inputs:
                if v.producer is None or v.is_constant or id(v.producer) in standalone:
                    continue
                g = group_of.get(id(v.producer))
                if g is None or not _can_join(pattern, g.pattern):
                    continue
                if _sole_consumer(g, node, consumers, output_ids):
                    target = g
                    break
        if target is None:
            target = FusedGroup()
            groups.append(target)
        target.nodes.append(node)
        group_of[id(node)] = target
    # A node may join an earlier group while reading a value of a later one (relu(x) *
    # neg(x)). Values leave a group only from its last node, so ordering groups by their
    # last node's position is a valid schedule.
    groups.sort(key=lambda g: position[id(g.nodes[-1])])
    for g in groups:
        _fill_boundary(g, consumers, output_ids)
    return groups


def _close_diamond(node: Node, group_of: dict[int, FusedGroup], groups: list[FusedGroup],
                   consumers: dict[int, list[Node]], output_ids: set[int],
                   standalone: AbstractSet[int], position: dict[int, int]
                   ) -> FusedGroup | None:
    """The group ``node`` joins by closing a diamond, or None.

    ``x * sigmoid(x)`` after a convolution: the sigmoid could not join the convolution's
    group (x has a second reader, the multiply), so it started a group of its own; the
    multiply reads both. When every group ``node`` reads (besides one, the anchor's) is
    elementwise, reads nothing but the anchor's values and constants, and feeds nothing
    but ``node``, those groups and ``node`` all join the anchor's group: one kernel, the
    activation computed at the anchor's write-back."""
    distinct = _groups_read(node.inputs, group_of)
    if len(distinct) < 2 or any(id(n) in standalone for g in distinct for n in g.nodes):
        return None  # (an in-place Concat's group runs no kernel: nothing joins it)
    # The anchor is a group ``node`` reads, or one that feeds every group it reads: the
    # tanh GELU, x * 0.5 * (1 + tanh(c (x + k x^3))), multiplies two elementwise groups
    # that both read x, the product before it.
    feeders = [g for g in _groups_read([v for n in distinct[0].nodes for v in n.inputs],
                                       group_of)
               if all(g is not d for d in distinct)
               and not any(id(n) in standalone for n in g.nodes)]
    for anchor in [*distinct, *feeders]:
        sides = [g for g in distinct if g is not anchor]
        if not all(g.pattern <= Pattern.BROADCAST for g in sides):
            continue
        anchor_ids = {id(n) for n in anchor.nodes}
        if not all(_fed_by(g, anchor_ids) for g in sides):
            continue
        inside = anchor_ids | {id(n) for g in sides for n in g.nodes} | {id(node)}
        if any(v.uid in output_ids or any(id(c) not in inside for c in consumers.get(v.uid, []))
               for g in (anchor, *sides) for n in g.nodes for v in n.outputs):
            continue
        for g in sides:
            anchor.nodes.extend(g.nodes)
            for n in g.nodes:
                group_of[id(n)] = anchor
            groups.remove(g)
        anchor.nodes.sort(key=lambda n: position[id(n)])
        return anchor
    return None


def _groups_read(values: list[Value], group_of: dict[int, FusedGroup]) -> list[FusedGroup]:
    """The distinct groups that produce ``values`` (constants and graph inputs aside)."""
    read = [group_of[id(v.producer)] for v in values
            if v.producer is not None and not v.is_constant and id(v.producer) in group_of]
    return list({id(g): g for g in read}.values())


def _fed_by(g: FusedGroup, anchor: set[int]) -> bool:
    """Whether ``g`` reads only constants, its own values and the anchor's."""
    own = {id(n) for n in g.nodes}
    return all(v.is_constant or (v.producer is not None and (id(v.producer) in own
                                                              or id(v.producer) in anchor))
               for n in g.nodes for v in n.inputs)


def _sole_consumer(g: FusedGroup, node: Node, consumers: dict[int, list[Node]],
                   output_ids: set[int]) -> bool:
    """True when every value ``g`` produces is read by members of ``g`` or ``node`` only."""
    members = {id(n) for n in g.nodes} | {id(node)}
    for n in g.nodes:
        for v in n.outputs:
            if v.uid in output_ids:
                return False
            if any(id(c) not in members for c in consumers.get(v.uid, [])):
                return False
    return True


def _fill_boundary(g: FusedGroup, consumers: dict[int, list[Node]], output_ids: set[int]) -> None:
    members = {id(n) for n in g.nodes}
    produced = {v.uid for n in g.nodes for v in n.outputs}
    seen: set[int] = set()
    for n in g.nodes:
        for v in n.inputs:
            if v.uid not in produced and v.uid not in seen:
                seen.add(v.uid)
                g.inputs.append(v)
    for n in g.nodes:
        for v in n.outputs:
            external = any(id(c) not in members for c in consumers.get(v.uid, []))
            if external or v.uid in output_ids:
                g.outputs.append(v)
