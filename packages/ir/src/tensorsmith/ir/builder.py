"""Building graphs node by node with type inference and errors that name the node."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from .errors import ModelError, ShapeError
from .graph import CountedSize, Graph, Node, Value
from .host_sizes import ComputedSize, HostExpr
from .op_registry import TensorType, get_op, tensor_bytes
from .symbolic import Assumption, Dim, Sym, assuming, free_symbols, shape_text, symbol


class GraphBuilder:
    """Appends nodes in order; each output's type comes from the op's ``infer``.

    ``where`` (e.g. "node 'fc1' (MatMul, opset 17)") is prefixed to every shape error so
    the user learns which node of *their* model is at fault.
    """

    def __init__(self, name: str = "main") -> None:
        self.name = name
        self.inputs: list[Value] = []
        self.nodes: list[Node] = []
        self.assumptions: list[Assumption] = []
        self.computed: list[ComputedSize] = []
        self._computed_names: dict[str, Sym] = {}  # expression text -> its symbol
        self.counted: list[CountedSize] = []
        self._reserved: set[str] = set()  # counted symbols named before their count
        self._names: set[str] = set()

    def unique(self, name: str) -> str:
        base, n = name or "v", 0
        while name in self._names or not name:
            n += 1
            name = f"{base}_{n}"
        self._names.add(name)
        return name

    def input(self, name: str, shape: tuple[Dim, ...], dtype: str) -> Value:
        """A graph input; its size is checked like every inferred type's."""
        try:
            tensor_bytes(shape, dtype)
        except ShapeError as e:
            raise ShapeError(f"graph input '{name}': {e}") from None
        v = Value(self.unique(name), tuple(d if isinstance(d, Sym) else int(d) for d in shape),
                  dtype)
        self.inputs.append(v)
        return v

    def size(self, value: Dim | HostExpr, hint: str, reason: str) -> Dim:
        """``value`` as a dim: itself if it is one, else the symbol of a size computed on
        the host before each run (host_sizes.ComputedSize; one symbol per expression, so
        two nodes that compute the same size agree on it). ``reason`` names the node."""
        if not isinstance(value, HostExpr):
            return value
        if value.is_float:
            raise TypeError(f"a size must be an integer, not '{value}' (floor it first)")
        known = self._computed_names.get(value.text)
        if known is not None:
            return known
        name = self._fresh_symbol(hint)
        self.computed.append(ComputedSize(name, value.text, reason))
        self._computed_names[value.text] = symbol(name)
        return self._computed_names[value.text]

    def counted_symbol(self, hint: str) -> Sym:
        """A new symbol for a size a kernel will count (:meth:`counted_size` says which):
        named first, so that the counting node's own outputs can have it in their shapes
        (NonMaxSuppression's ``[n - 1, 3]``)."""
        name = self._fresh_symbol(hint)
        self._reserved.add(name)
        return symbol(name)

    def counted_size(self, counted: Sym, count: Value, bound: Dim, reason: str) -> Dim:
        """Make ``counted`` (from :meth:`counted_symbol`) the size that ``count`` (an int64
        scalar a kernel writes) holds once its node has run, at most ``bound``; it may be
        0. The symbol is the count plus one (graph.CountedSize), so the dim to write in
        shapes, returned, is ``counted - 1``. ``reason`` names the node.

        The counting node's outputs may have the size in their shapes only as their
        outermost axis (after axes of 1): buffers are placed for the bound, and only then
        are the rows the kernel writes where the count's shape puts them."""
        if count.dtype != "int64" or count.shape != () or count.producer is None:
            raise TypeError(f"a count is an int64 scalar a node computes, not {count!r}")
        for v in count.producer.outputs:
            axes = [d for d, n in enumerate(v.shape) if str(counted) in free_symbols(n)]
            if axes and (axes != [axes[0]] or any(n != 1 for n in v.shape[:axes[0]])):
                raise ValueError(f"{reason}: output {v!r} has the counted size '{counted}' "
                                 "inside it, not as its outermost axis")
        self.counted.append(CountedSize(str(counted), count, bound + 1, reason))
        return counted - 1

    def _fresh_symbol(self, hint: str) -> str:
        """A symbol name from ``hint`` that no input, computed or counted size has."""
        base = re.sub(r"\W", "_", hint) or "n"
        base = base if base[0].isalpha() else f"n_{base}"
        name, k = base, 0
        taken = ({c.name for c in (*self.computed, *self.counted)} | self._reserved
                 | {str(d) for v in self.inputs for d in v.shape if isinstance(d, Sym)})
        while name in taken:
            k += 1
            name = f"{base}_{k}"
        return name

    def constant(self, name: str, data: np.ndarray | float | int) -> Value:
        return Graph.constant(self.unique(name), np.asarray(data))

    def add(self, op: str, inputs: list[Value], attrs: dict[str, Any] | None = None,
            name: str = "", out_names: list[str] | None = None, where: str = "") -> list[Value]:
        opdef = get_op(op)
        attrs = dict(attrs or {})
        lo, hi = opdef.num_inputs
        where = where or f"node '{name}' ({op})"
        if not lo <= len(inputs) <= hi:
            raise ModelError(f"{where}: takes {lo}..{hi} inputs, got {len(inputs)}")
        try:
            with assuming(c.name for c in (*self.computed, *self.counted)) as assumed:
                types = opdef.infer([TensorType(v.shape, v.dtype) for v in inputs], attrs)
            self.assumptions += [Assumption(a.lhs, a.rhs, f"{where}: {a.reason}")
                                 for a in assumed]
        except ShapeError as e:
            shapes = ", ".join(f"{v.name}: {v.dtype}{shape_text(v.shape)}" for v in inputs)
            # the same class: a SymbolicDimError (a size known only at run time) stays one
            raise type(e)(f"{where}: {e} (inputs {shapes})") from None
        node = Node(op, list(inputs), [], attrs, name or op)
        for i, t in enumerate(types):
            oname = out_names[i] if out_names and i < len(out_names) else f"{name or op}_{i}"
            node.outputs.append(Value(self.unique(oname), t.shape, t.dtype, producer=node))
        self.nodes.append(node)
        return node.outputs

    def add1(self, op: str, inputs: list[Value], attrs: dict[str, Any] | None = None,
             name: str = "", where: str = "") -> Value:
        return self.add(op, inputs, attrs, name, where=where)[0]

    def finish(self, outputs: list[Value]) -> Graph:
        g = Graph(list(self.inputs), list(self.nodes), list(outputs), self.name,
                  assumptions=list(self.assumptions), computed=list(self.computed),
                  counted=list(self.counted))
        g.verify()
        return g
