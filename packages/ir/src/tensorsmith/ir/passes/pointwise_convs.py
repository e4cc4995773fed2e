"""Pointwise convolutions as matrix products, where the target's product kernel is the
better one (``build`` decides where: build._pointwise_products).

A 1x1 convolution with stride 1, no padding and one group is, per image, a matrix
product: ``Y[n] (O x HW) = W (O x C) @ X[n] (C x HW)``. On a GPU whose float16
products run on cooperative matrices (schedules/gpu_coop.py) that product runs on them,
where the convolution rule (gpu_conv.py) multiplies scalars; so the pass rewrites

    y = conv2d(x, w)                      # x [N, C, H, W], w [O, C, 1, 1]

into

    x3 = reshape(x, [N, C, H*W])          # a view: no kernel, no copy
    y3 = matmul(w2, x3)                   # w2 [O, C]: the weight, reshaped at build time
    y = reshape(y3, [N, O, H, W])

for each convolution whose product the target's kernel takes (``takes``: for the GPU
rule that is gpu_coop.takes_matmul, which asks the product's own conditions: K = C and
N = H*W multiples of 8, float16 operands, static sizes).

The elementwise ops after the convolution (its folded BatchNorm's bias add, a residual
add, the activation) must stay its epilogue, fused into the product's write-back: fusion
lets no reshape into a product's group (passes/fuse.py), so the pass moves the reshape
back past them. Each op of that chain (the convolution's only reader, then that op's
only reader, ...) runs on ``[N, O, H*W]`` instead, its other operands reshaped alike:
a constant at build time, a computed tensor by a reshape (a view again). The chain
stops at an op that reads more than one element of the chain value per output, that
reads an operand varying along H or W other than whole (a ``[1, 1, H, 1]`` row:
no 3-D form), or whose value is a graph result or has several readers; the reshape
back to 4-D goes after the last op taken, so every later reader sees the value it
read before. A commutative op gets the chain value as its first operand: fusion joins
an op to the group of its first input that can take it (the product's, then).

The pass runs after the precision pass (build.py): it must see the float16 graph,
since only float16 products run on cooperative matrices.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import ModelError
from ..graph import Graph, Node, Value
from ..op_registry import Pattern, TensorType, get_op
from ..symbolic import Dim
from .rewrite import fresh_names

#: Whether the target's product kernel takes ``A @ B`` of these types.
TakesProduct = Callable[[TensorType, TensorType], bool]
#: The attributes of a plain convolution; one with others (a blocked layout, a weight
#: transform, a widened input) is left as it is.
_PLAIN_ATTRS = frozenset({"strides", "pads", "dilations", "groups"})
#: Binary ops whose operands may be swapped.
_COMMUTATIVE = frozenset({"add", "mul", "max", "min"})


def pointwise_as_matmul(graph: Graph, takes: TakesProduct) -> Graph:
    """``graph`` (in place) with each pointwise convolution whose product ``takes``
    accepts computed as that product (see the module docstring)."""
    return _Rewrite(graph, takes).run()


def is_pointwise(conv: Node) -> bool:
    """Whether ``conv`` is a 1x1 convolution, stride 1, no padding, one group, of static
    NCHW sizes: a matrix product per image."""
    if conv.op != "conv2d" or len(conv.inputs) != 2 or set(conv.attrs) - _PLAIN_ATTRS:
        return False
    x, w = conv.inputs
    return (len(x.shape) == 4 and x.is_static and tuple(w.shape[2:]) == (1, 1)
            and list(conv.attrs.get("strides", [1, 1])) == [1, 1]
            and not any(conv.attrs.get("pads", [0, 0, 0, 0]))
            and conv.attrs.get("groups", 1) == 1)


@dataclass
class _Edit:
    """What replaces one node of the graph: nodes before it, itself (rewritten in
    place), nodes after it."""

    before: list[Node] = field(default_factory=list)
    after: list[Node] = field(default_factory=list)
    dropped: bool = False


class _Rewrite:
    def __init__(self, graph: Graph, takes: TakesProduct) -> None:
        self.graph, self.takes = graph, takes
        self.fresh = fresh_names(graph)
        self.readers = graph.consumers()
        self.results = {v.uid for v in graph.results()}
        self.edits: dict[int, _Edit] = {}
        # a constant reshaped once however many nodes read it (a weight, a bias shared
        # by layers): one copy in the artifact. Computed values are reshaped where each
        # reader is, as a view: a node placed for one reader may come after another.
        self.constants: dict[tuple[int, tuple[Dim, ...]], Value] = {}

    def run(self) -> Graph:
        for node in list(self.graph.nodes):
            if is_pointwise(node):
                self._conv(node)
        nodes: list[Node] = []
        for node in self.graph.nodes:
            edit = self.edits.get(id(node))
            if edit is None:
                nodes.append(node)
                continue
            nodes += [*edit.before, *([] if edit.dropped else [node]), *edit.after]
        self.graph.nodes = nodes
        return self.graph

    def _conv(self, conv: Node) -> None:
        x, w = conv.inputs
        y = conv.outputs[0]
        n, c, h, wd = x.shape
        o = w.shape[0]
        flat: tuple[Dim, ...] = (n, c, h * wd)
        if not self.takes(TensorType((o, c), w.dtype), TensorType(flat, x.dtype)):
            return
        edit = self.edits.setdefault(id(conv), _Edit())
        x3 = self._reshape(x, flat, edit.before, f"{x.name}_rows")
        w2 = self._as_shape(w, (o, c), edit.before)
        y3 = self._value(f"{y.name}_rows", (n, o, h * wd), y.dtype)
        edit.before.append(self._node("matmul", [w2, x3], y3, {}, f"{conv.name}/matmul"))
        edit.dropped = True
        last, value, value3 = edit, y, y3
        while (step := self._chain_step(value, value3, (h, wd))) is not None:
            last, value, value3 = step
        last.after.append(self._node("reshape", [value3], value, {"shape": list(value.shape)},
                                     f"{conv.name}/unflatten"))

    def _chain_step(self, value: Value, value3: Value, image: tuple[Dim, Dim]
                    ) -> tuple[_Edit, Value, Value] | None:
        """Move the elementwise reader of ``value`` (4-D) onto ``value3`` (its 3-D form):
        the reader's edit, its old output and its new one, or None where the chain
        stops (see the module docstring)."""
        readers = self.readers.get(value.uid, [])
        if value.uid in self.results or len(readers) != 1:
            return None
        node = readers[0]
        if (get_op(node.op).pattern > Pattern.BROADCAST or len(node.outputs) != 1
                or node.outputs[0].shape != value.shape or id(node) in self.edits):
            return None
        shapes = [value3.shape if v is value else _flat_shape(v.shape, image)
                  for v in node.inputs]
        if any(s is None for s in shapes):
            return None
        out = node.outputs[0]
        try:
            (ty,) = get_op(node.op).infer(
                [TensorType(s, v.dtype) for s, v in zip(shapes, node.inputs)], node.attrs)
        except ModelError:  # an op whose attributes name the 4-D shape (expand)
            return None
        if ty.shape != value3.shape:
            return None
        edit = self.edits.setdefault(id(node), _Edit())
        if node.op in _COMMUTATIVE and node.inputs[1] is value:
            # fusion joins an op to the group of its first input that can take it: the
            # product's, not the reshape's of the other operand
            node.inputs, shapes = node.inputs[::-1], shapes[::-1]
        node.inputs = [value3 if v is value else self._as_shape(v, s, edit.before)
                       for v, s in zip(node.inputs, shapes)]  # type: ignore[arg-type]
        out3 = self._value(f"{out.name}_rows", ty.shape, out.dtype)
        out3.producer, node.outputs = node, [out3]
        return edit, out, out3

    # -- building -------------------------------------------------------------------------
    def _as_shape(self, v: Value, shape: tuple[Dim, ...], before: list[Node]) -> Value:
        """``v`` with ``shape`` (as many elements): a constant reshaped now, else a
        reshape node added to ``before``."""
        if tuple(v.shape) == shape:
            return v
        if v.is_constant:
            assert v.data is not None
            key = (v.uid, shape)
            if key not in self.constants:
                self.constants[key] = Graph.constant(self.fresh(f"{v.name}_rows"),
                                                     v.data.reshape(shape))
            return self.constants[key]
        return self._reshape(v, shape, before, f"{v.name}_rows")

    def _reshape(self, v: Value, shape: tuple[Dim, ...], before: list[Node], name: str
                 ) -> Value:
        out = self._value(name, shape, v.dtype)
        before.append(self._node("reshape", [v], out, {"shape": list(shape)},
                                 f"{out.name}/flatten"))
        return out

    def _value(self, name: str, shape: tuple[Dim, ...], dtype: str) -> Value:
        return Value(self.fresh(name), shape, dtype)

    @staticmethod
    def _node(op: str, inputs: list[Value], out: Value, attrs: dict, name: str) -> Node:
        node = Node(op, inputs, [out], attrs, name)
        out.producer = node
        return node


def _flat_shape(shape: tuple[Dim, ...], image: tuple[Dim, Dim]) -> tuple[Dim, ...] | None:
    """The 3-D form ``[a, b, H*W or 1]`` of an operand broadcast against ``[N, O, H,
    W]``, or None where it varies along only part of the image; a scalar stays one."""
    if not shape:
        return shape
    if len(shape) > 4:
        return None
    a, b, *rest = (1,) * (4 - len(shape)) + tuple(shape)
    if tuple(rest) == (1, 1):
        return (a, b, 1)
    if tuple(rest) == tuple(image):
        return (a, b, image[0] * image[1])
    return None
