"""The graph IR: a typed SSA dataflow graph of ops over tensors with static shapes.

A :class:`Graph` owns its nodes in topological order. Every :class:`Value` is produced
exactly once: by the graph's inputs, by a constant (its data rides along), or by one
output slot of a :class:`Node`. Nodes name ops of the registry in :mod:`.op_registry`;
the registry gives each op its type inference, NumPy reference and tensor compute.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import ModelError
from .host_sizes import ComputedSize
from .symbolic import Assumption, Dim, is_static, math_prod, shape_text

_ids = itertools.count()


@dataclass(eq=False)
class Value:
    """One tensor in the graph. ``data`` is set for constants (weights included)."""

    name: str
    shape: tuple[Dim, ...]  # ints, or symbolic sizes known at run time (symbolic.py)
    dtype: str
    producer: Node | None = None
    data: np.ndarray | None = None
    uid: int = field(default_factory=lambda: next(_ids))

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    @property
    def nbytes(self) -> Dim:
        return math_prod(self.shape) * np.dtype(self.dtype).itemsize

    @property
    def is_static(self) -> bool:
        """Whether every dim is known at compile time."""
        return is_static(self.shape)

    def __repr__(self) -> str:
        return f"%{self.name}: {self.dtype}{shape_text(self.shape)}"


@dataclass(eq=False)
class Node:
    """An application of a registered op; ``name`` keeps the source model's node name."""

    op: str
    inputs: list[Value]
    outputs: list[Value]
    attrs: dict[str, Any]
    name: str

    def __repr__(self) -> str:
        return f"Node({self.op} {self.name!r})"


@dataclass(eq=False)
class Check:
    """A value the executors test after every run: a nonzero ``flag`` (an int32 scalar)
    means the run was invalid, and the runtime raises ``message`` instead of returning
    outputs (see passes/index_checks.py, which adds these for out-of-range indices)."""

    flag: Value
    message: str


@dataclass(eq=False)
class CountedSize:
    """Symbol ``name`` is one more than ``count``, an int64 scalar that a kernel writes
    during the run: how many boxes NonMaxSuppression kept, how many elements NonZero
    found. Every symbol is at least 1, so the symbol is the count plus one and shapes
    write ``name - 1``, which may be 0.

    Until that kernel has run the executor knows only ``bound`` (a size of the other
    symbols, at least the count): the buffers of every value whose shape uses ``name``
    are placed for the bound, and the kernels after the count's producer run with the
    count itself. ``reason`` names the node, for the run's refusal of a count outside
    ``0..bound`` (a kernel that wrote garbage)."""

    name: str
    count: Value
    bound: Dim
    reason: str


class Graph:
    """A whole model: inputs, topologically ordered nodes, outputs, and the checks its
    runs must pass (computed like outputs, returned to nobody)."""

    def __init__(self, inputs: list[Value], nodes: list[Node], outputs: list[Value],
                 name: str = "main", checks: list[Check] | None = None,
                 assumptions: list[Assumption] | None = None,
                 computed: list[ComputedSize] | None = None,
                 counted: list[CountedSize] | None = None) -> None:
        self.inputs = inputs
        self.nodes = nodes
        self.outputs = outputs
        self.name = name
        self.checks = checks or []
        #: equalities of symbolic sizes that shape inference assumed (symbolic.py); every
        #: run checks them
        self.assumptions = assumptions or []
        #: symbols computed before each run from small inputs' values (host_sizes.py),
        #: in the order a run computes them
        self.computed = computed or []
        #: symbols counted by kernels during the run (data-dependent sizes), in the
        #: order the run learns them
        self.counted = counted or []

    def results(self) -> list[Value]:
        """What a run must compute and keep to its end: the outputs, the checks' flags
        and the counts of counted sizes. Fusion and memory planning treat them alike."""
        return [*self.outputs, *(c.flag for c in self.checks),
                *(c.count for c in self.counted)]

    def replace_results(self, replaced: dict[int, Value]) -> None:
        """Point the outputs, check flags and counts at ``replaced[uid]`` where a pass
        replaced the value they named (a common subexpression, a folded constant)."""
        self.outputs = [replaced.get(v.uid, v) for v in self.outputs]
        self.checks = [Check(replaced.get(c.flag.uid, c.flag), c.message) for c in self.checks]
        self.counted = [CountedSize(c.name, replaced.get(c.count.uid, c.count), c.bound,
                                    c.reason) for c in self.counted]

    # -- construction -------------------------------------------------------------
    @staticmethod
    def constant(name: str, data: np.ndarray) -> Value:
        data = np.asarray(data)
        if not data.flags.c_contiguous:  # (ascontiguousarray would make 0-d arrays 1-d)
            data = data.copy(order="C")
        return Value(name, tuple(int(d) for d in data.shape), str(data.dtype), data=data)

    # -- queries --------------------------------------------------------------------
    def constants(self) -> list[Value]:
        """Constants read by nodes or returned as outputs, in first-use order."""
        seen: dict[int, Value] = {}
        for node in self.nodes:
            for v in node.inputs:
                if v.is_constant:
                    seen.setdefault(v.uid, v)
        for v in self.outputs:
            if v.is_constant:
                seen.setdefault(v.uid, v)
        return list(seen.values())

    def consumers(self) -> dict[int, list[Node]]:
        """Map from value uid to the nodes that read it."""
        users: dict[int, list[Node]] = {}
        for node in self.nodes:
            for v in node.inputs:
                users.setdefault(v.uid, []).append(node)
        return users

    def copy(self) -> Graph:
        """A structural copy: new Node and Value objects, constant data shared."""
        inputs, nodes, results = copy_nodes(self.inputs, self.nodes, self.results())
        n, m = len(self.outputs), len(self.outputs) + len(self.checks)
        checks = [Check(flag, c.message) for flag, c in zip(results[n:m], self.checks)]
        counted = [CountedSize(c.name, count, c.bound, c.reason)
                   for count, c in zip(results[m:], self.counted)]
        return Graph(inputs, nodes, results[:n], self.name, checks, list(self.assumptions),
                     list(self.computed), counted)

    def verify(self) -> None:
        """Check SSA and topological order; raises ModelError naming the offending node."""
        defined = {v.uid for v in self.inputs}
        for node in self.nodes:
            for v in node.inputs:
                if not v.is_constant and v.uid not in defined:
                    raise ModelError(f"node '{node.name}' ({node.op}) reads '{v.name}' "
                                     "before it is produced")
            for v in node.outputs:
                if v.uid in defined:
                    raise ModelError(f"value '{v.name}' is produced twice "
                                     f"(again by node '{node.name}')")
                defined.add(v.uid)
        for v in self.results():
            if not v.is_constant and v.uid not in defined:
                raise ModelError(f"graph output '{v.name}' is never produced")

    def __str__(self) -> str:
        from .text import print_graph

        return print_graph(self)


def copy_nodes(inputs: list[Value], nodes: list[Node], outputs: list[Value],
               keep_data: bool = True) -> tuple[list[Value], list[Node], list[Value]]:
    """New Node and Value objects wired like ``nodes`` (constant data shared, or dropped
    with ``keep_data=False``): what a graph copy and a detached fused group both need."""
    vmap: dict[int, Value] = {}

    def clone(v: Value) -> Value:
        if v.uid not in vmap:
            vmap[v.uid] = Value(v.name, v.shape, v.dtype, data=v.data if keep_data else None)
        return vmap[v.uid]

    new_inputs = [clone(v) for v in inputs]
    new_nodes = []
    for n in nodes:
        new = Node(n.op, [clone(v) for v in n.inputs], [], dict(n.attrs), n.name)
        for v in n.outputs:
            c = clone(v)
            c.producer = new
            new.outputs.append(c)
        new_nodes.append(new)
    return new_inputs, new_nodes, [clone(v) for v in outputs]
