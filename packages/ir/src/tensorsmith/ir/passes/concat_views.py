"""Concat in place: the producers of a Concat's inputs write into the concatenated buffer.

Along an axis whose leading dimensions are all 1 (the channels of a batch-1 NCHW tensor,
the rows of a matrix), each input of a Concat is one contiguous byte range of the
result. An input that a kernel produces can then be written straight into its range, and
the Concat moves nothing: its result is a view of bytes already in place. DenseNet
concatenates all earlier feature maps before every layer: in place, each layer's output
is written once into its block's buffer, and every Concat of the block is a prefix of it.

Concats are visited last first, so a value read by several (DenseNet's features) is
placed by the widest, and the narrower ones find their inputs already side by side and
become views too. A Concat is left to copy, as before, when an input cannot be placed:
a weight, a graph input or output, a reshape (whose bytes are another value's), a value
placed elsewhere already, or one that appears twice.

Decided before fusion, because a Concat in place stays a group of its own that becomes
no kernel (``fuse_ops(standalone=...)``); the memory plan (``build._make_plan``) then
gives every placed value its range inside its root's buffer. Only for targets whose
runtime places every plan buffer by its offset in one workspace: the CPU runtime does;
the OpenCL one gives each plan buffer its own device buffer.

A Concat whose values have symbolic dims (sizes known only at run time) gets no views:
its parts' byte offsets would be expressions of those sizes, which the plan's fixed
offsets cannot hold, so it copies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..graph import Graph, Node, Value


@dataclass(frozen=True)
class View:
    """A value stored ``offset`` bytes into ``root``'s buffer; ``whole``: all of it (a
    reshape's view, the same bytes even where the two sizes are run-time expressions
    that only a run's assumption check equates)."""

    root: Value
    offset: int
    whole: bool = False


@dataclass
class ConcatViews:
    views: dict[int, View] = field(default_factory=dict)  # value uid -> where it lives
    nodes: set[int] = field(default_factory=set)  # id() of the Concat nodes done in place


def concat_views(graph: Graph) -> ConcatViews:
    """Which Concats of ``graph`` run in place, and where that puts their values."""
    found = ConcatViews()
    fixed = {v.uid for v in graph.inputs} | {v.uid for v in graph.results()}
    for node in reversed(graph.nodes):
        if (node.op != "concat" or not all(v.is_static for v in (*node.inputs, *node.outputs))
                or not _contiguous_parts(node)):
            continue
        out = node.outputs[0]
        offsets = _byte_offsets(node)
        placed = [found.views.get(v.uid) for v in node.inputs]
        if all(p is not None for p in placed):
            # placed side by side by a wider Concat: this one is a view of them
            first = placed[0]
            assert first is not None
            beside = all(p == View(first.root, first.offset + o)
                         for p, o in zip(placed, offsets, strict=True))
            if beside and found.views.setdefault(out.uid, first) == first:
                found.nodes.add(id(node))
            continue
        if any(p is not None for p in placed) or len({v.uid for v in node.inputs}) != len(
                node.inputs) or not all(_placeable(v, fixed) for v in node.inputs):
            continue
        base = found.views.get(out.uid, View(out, 0))
        for v, o in zip(node.inputs, offsets, strict=True):
            found.views[v.uid] = View(base.root, base.offset + o)
        found.nodes.add(id(node))
    return found


def _contiguous_parts(node: Node) -> bool:
    out = node.outputs[0]
    axis = int(node.attrs["axis"]) % len(out.shape)
    return int(np.prod(out.shape[:axis], dtype=np.int64)) == 1 and len(node.inputs) > 1


def _byte_offsets(node: Node) -> list[int]:
    offsets, at = [], 0
    for v in node.inputs:
        offsets.append(at)
        at += v.nbytes
    return offsets


def _placeable(v: Value, fixed: set[int]) -> bool:
    """A value a kernel writes, into whatever buffer the plan gives it."""
    return (not v.is_constant and v.producer is not None and v.uid not in fixed
            and v.producer.op != "reshape" and v.nbytes > 0)
