"""Channel-blocked activations for a CPU target's convolutions (``NCHW[b]c``).

In NCHW a window's vector lanes run along an image row: a stride-2 window then gathers
every other element, a small image leaves lanes idle, and lanes over output channels (what
dense layers prefer) write their results one image apart. Blocked, as ``[N, C / b, H, W,
b]`` with ``b`` the target's float lanes, the ``b`` channels of a pixel are one vector:
every tap of every window is one contiguous load at any stride, and a depthwise layer
multiplies whole vectors of channels.

This pass gives every convolution it can that layout, lets the layout flow through the
ops that do not care about it (elementwise ops, per-channel broadcasts, pooling windows,
spatial reductions, Concat of channels) and converts back only where a value meets an op
that needs NCHW or leaves the graph: the layout transforms stay at the edges. Weights and
per-channel constants are stored blocked by the build (no transform runs for them).

A batch known only at run time changes none of this: the layout reorders channels only,
so a value with a symbolic batch (or image size) is blocked like a static one, and its
kernels are the static ones with a loop over the images (schedules/cpu_dynamic.py). What
cannot be blocked is a value whose channels are known only at run time (a block needs
whole blocks of them): it stays NCHW, and so do the ops that read or write it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..dtypes import accumulator
from ..graph import Graph, Node, Value
from ..op_registry import Pattern, TensorType, get_op
from ..ops.conv import block_channels
from ..symbolic import Dim
from .dce import eliminate_dead_code

#: Channels-last to NCHW and back (ConvNeXt's LayerNorm runs channels-last): between a
#: blocked layout and channels-last whole blocks move, so no NCHW copy is made on the way.
TO_CHANNELS_LAST = [0, 2, 3, 1]
FROM_CHANNELS_LAST = [0, 3, 1, 2]


def block_layouts(graph: Graph, block: int) -> Graph:
    """``graph`` with its convolutions (and what follows them) on ``[N, C / block, H, W,
    block]`` activations; unchanged when ``block`` is 1 or no convolution qualifies."""
    if block <= 1 or not any(_convertible_conv(n, block) or _convertible_qconv(n, block)
                             for n in graph.nodes):
        return graph
    return eliminate_dead_code(_Rewriter(graph, block).run())


def _convertible_qconv(node: Node, block: int) -> bool:
    """An integer convolution (ops/integer.py) whose input and output channels are whole
    blocks: it reads its uint8 input blocked, each pixel's block of channels one run of
    bytes (four of them per dot step)."""
    if node.op != "qconv2d" or node.attrs.get("block"):
        return False
    x, w = node.inputs
    if len(x.shape) != 4 or not w.is_constant or not _static_channels(x):
        return False
    return x.shape[1] % block == 0 and w.shape[0] % block == 0 and block % 4 == 0


def _convertible_conv(node: Node, block: int) -> bool:
    """A float 2-D convolution (float32, or 16-bit with float32 sums: its blocks are as
    wide as the float32 accumulators) with a constant OIHW weight: dense with whole blocks of
    output channels, depthwise with whole blocks of channels, or grouped with whole
    blocks of input and of output channels per group (RegNet's groups of 8 on AVX2)."""
    if node.op != "conv2d" or len(node.inputs) != 2 or node.attrs.get("weight_transform"):
        return False
    x, w = node.inputs
    if len(x.shape) != 4 or not w.is_constant or len(w.shape) != 4 \
            or accumulator(x.dtype) != "float32":
        return False
    if not _static_channels(x) or not _static_channels(node.outputs[0]):
        return False
    groups, out_channels = node.attrs.get("groups", 1), w.shape[0]
    if groups == 1:
        return out_channels % block == 0
    if w.shape[1] == 1:  # depthwise
        return groups == x.shape[1] == out_channels and groups % block == 0
    return w.shape[1] % block == 0 and (out_channels // groups) % block == 0


class _Rewriter:
    """One walk over the nodes in order, building the new node list.

    ``blocked`` maps a value (by uid) to its blocked twin; ``plain`` to the value that
    holds it in NCHW, made on first need (the original Value object, now produced by the
    transform back, so graph outputs keep their names)."""

    def __init__(self, graph: Graph, block: int) -> None:
        self.graph, self.block = graph, block
        self.nodes: list[Node] = []
        self.blocked: dict[int, Value] = {}
        self.plain: dict[int, Value] = {}

    def run(self) -> Graph:
        for node in self.graph.nodes:
            if not self.convert(node):
                node.inputs = [self.nchw(v) for v in node.inputs]
                self.nodes.append(node)
                for v in node.outputs:
                    self.plain[v.uid] = v
        outputs = [self.nchw(v) for v in self.graph.outputs]
        return Graph(self.graph.inputs, self.nodes, outputs, self.graph.name,
                     self.graph.checks, self.graph.assumptions, self.graph.computed,
                     self.graph.counted)

    # -- the ops that run blocked ------------------------------------------------------
    def convert(self, node: Node) -> bool:
        """Add ``node``'s blocked form and return True, or return False (kept NCHW)."""
        if _convertible_qconv(node, self.block):
            self.emit(node, [self.to_blocked(node.inputs[0]), node.inputs[1]],
                      {**node.attrs, "block": self.block})
            return True
        if _convertible_conv(node, self.block):
            x = node.inputs[0]
            if (node.attrs.get("groups", 1) != 1 or x.uid in self.blocked
                    or self.channels_last_source(x) is not None):
                x = self.to_blocked(x)
            self.emit(node, [x, node.inputs[1]], {**node.attrs, "block": self.block})
            return True
        pattern = get_op(node.op).pattern
        ins = node.inputs
        if not any(v.uid in self.blocked for v in ins) or len(node.outputs) != 1:
            return False
        if not all(_static_channels(v) for v in (*ins, *node.outputs)):
            return False  # meets run-time channels: converted back to NCHW first
        out = node.outputs[0]
        if (node.op == "transpose" and node.attrs["perm"] == TO_CHANNELS_LAST
                and len(ins[0].shape) == 4):
            # [N, C/b, H, W, b] -> [N, H, W, C/b, b] is [N, H, W, C]: blocks move whole
            moved = self.add("transpose", [self.blocked[ins[0].uid]],
                             {"perm": [*TO_CHANNELS_LAST, 4]},
                             Value(out.name + "_blocks", _channels_last(
                                 self.blocked[ins[0].uid].shape), out.dtype), node.name)
            self.add("reshape", [moved], {"shape": list(out.shape)}, out,
                     node.name + "/reshape")
            self.plain[out.uid] = out
            return True
        if ((pattern == Pattern.ELEMWISE and len(ins) == 1) or node.op == "pool2d"
                or (node.op.startswith("reduce_") and _spatial_reduction(node))):
            self.emit(node, [self.blocked[ins[0].uid]], node.attrs)
            return True
        if pattern == Pattern.BROADCAST and len(out.shape) == 4:
            operands = [self.broadcast_operand(v, int(out.shape[1])) for v in ins]
            if all(o is not None for o in operands):
                self.emit(node, operands, node.attrs)  # type: ignore[arg-type]
                return True
            return False
        if (node.op == "concat" and len(out.shape) == 4 and node.attrs["axis"] % 4 == 1
                and all(v.uid in self.blocked for v in ins)):
            self.emit(node, [self.blocked[v.uid] for v in ins], node.attrs)
            return True
        return False

    def broadcast_operand(self, v: Value, channels: int) -> Value | None:
        """``v`` as an operand of a broadcasting op over blocked values of ``channels``
        channels: its twin, itself when it is all ones (a scalar), an added lane axis
        of one when it has one channel, or blocked when it has every channel."""
        if v.uid in self.blocked:
            return self.blocked[v.uid]
        if all(d == 1 for d in v.shape):
            return v
        if len(v.shape) > 4:
            return None
        shape = (1,) * (4 - len(v.shape)) + tuple(v.shape)
        if shape[1] == 1:
            return self.reshaped(v, (*shape, 1))
        if shape[1] != channels or channels % self.block:
            return None
        if v.is_constant:
            assert v.data is not None
            return Graph.constant(v.name + "_blocked",
                                  block_channels(np.asarray(v.data).reshape(shape), self.block))
        return self.to_blocked(self.reshaped(v, shape) if shape != v.shape else v)

    # -- layout transforms ----------------------------------------------------------------
    def to_blocked(self, v: Value) -> Value:
        """``v`` (NCHW) blocked: a reshape that splits the channels and a transpose that
        moves the lanes last (one kernel after fusion)."""
        if v.uid in self.blocked:
            return self.blocked[v.uid]
        n, c, h, w = v.shape
        b = self.block
        source = self.channels_last_source(v)
        if source is not None:  # [N, H, W, C] -> [N, H, W, C/b, b] -> [N, C/b, H, W, b]
            split, perm = self.reshaped(source, (n, h, w, c // b, b)), [*FROM_CHANNELS_LAST, 4]
        else:
            split, perm = self.reshaped(self.nchw(v), (n, c // b, b, h, w)), [0, 1, 3, 4, 2]
        twin = self.add("transpose", [split], {"perm": perm},
                        Value(v.name + "_blocked", (n, c // b, h, w, b), v.dtype),
                        v.name + "/to_blocked")
        self.blocked[v.uid] = twin
        return twin

    def channels_last_source(self, v: Value) -> Value | None:
        """The channels-last value ``v`` (NCHW) is a transpose of, if any."""
        v = self.plain.get(v.uid, v)
        node = v.producer
        if (node is None or node.op != "transpose" or node.attrs["perm"] != FROM_CHANNELS_LAST
                or len(v.shape) != 4 or v.shape[1] % self.block):
            return None
        return node.inputs[0]

    def nchw(self, v: Value) -> Value:
        """``v`` in NCHW, transformed back from its twin on first need."""
        if v.uid in self.plain or v.uid not in self.blocked:
            return self.plain.get(v.uid, v)
        twin = self.blocked[v.uid]
        n, cb, h, w, b = twin.shape
        lanes_second = self.add("transpose", [twin], {"perm": [0, 1, 4, 2, 3]},
                                Value(v.name + "_unblocking", (n, cb, b, h, w), v.dtype),
                                v.name + "/from_blocked")
        self.add("reshape", [lanes_second], {"shape": list(v.shape)}, v,
                 v.name + "/from_blocked_reshape")
        self.plain[v.uid] = v
        return v

    def reshaped(self, v: Value, shape: Sequence[Dim]) -> Value:
        if tuple(shape) == tuple(v.shape):
            return v
        if v.is_constant:
            assert v.data is not None
            return Graph.constant(v.name + "_reshaped", np.asarray(v.data).reshape(shape))
        return self.add("reshape", [v], {"shape": list(shape)},
                        Value(v.name + "_reshaped", tuple(shape), v.dtype), v.name + "/reshape")

    # -- node construction ------------------------------------------------------------------
    def emit(self, node: Node, inputs: list[Value], attrs: dict) -> None:
        """``node`` on blocked ``inputs``: its output is a new (rank-5) value, the twin of
        the original one."""
        out = node.outputs[0]
        ty = get_op(node.op).infer([TensorType(v.shape, v.dtype) for v in inputs],
                                       attrs)[0]
        twin = self.add(node.op, inputs, dict(attrs), Value(out.name + "_blocked", ty.shape,
                                                            ty.dtype), node.name)
        self.blocked[out.uid] = twin

    def add(self, op: str, inputs: list[Value], attrs: dict, out: Value, name: str) -> Value:
        node = Node(op, inputs, [out], attrs, name)
        out.producer = node
        self.nodes.append(node)
        return out


def _static_channels(v: Value) -> bool:
    """Whether ``v``'s channels are known when the model is compiled: the dim that lines
    up with NCHW's ``C`` (axis 1 of a 4-D value, axis 0 of a per-channel ``[C, 1, 1]``
    operand). A block needs whole blocks of channels; every other dim may be symbolic."""
    return len(v.shape) < 3 or isinstance(v.shape[len(v.shape) - 3], int)


def _channels_last(shape: Sequence[Dim]) -> tuple[Dim, ...]:
    n, cb, h, w, b = shape
    return (n, h, w, cb, b)


def _spatial_reduction(node: Node) -> bool:
    """A reduction over the image's axes only, keeping them (GlobalAveragePool)."""
    rank = len(node.inputs[0].shape)
    axes = node.attrs.get("axes")
    if rank != 4 or axes is None or not node.attrs.get("keepdims", True):
        return False
    return {a % rank for a in axes} <= {2, 3}
