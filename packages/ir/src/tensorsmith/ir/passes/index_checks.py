"""Run-time index checks: an out-of-range index is an error, as in ONNX, not a clamp.

Gather, GatherElements, GatherND, ScatterElements and ScatterND take indices that may
only be known at run time (token ids, argmax results). Their kernels clamp every index
into the data, so a bad one can never read or write outside a buffer; but a clamped
index gives a plausible, wrong answer where ONNX Runtime reports an error. This pass
adds, for each such node, a small reduction that flags whether any index lies outside
``[-n, n-1]`` (``n`` the extent it indexes), and records it as a :class:`Check` of the
graph: computed like an output, tested by every executor after each run, which then
raises the check's message naming the node instead of returning outputs.

Indices that are constants are checked here, once, and a bad one is a ``ModelError`` at
compile time. ``build(..., index_checks=False)`` (``--no-index-checks``) leaves the
checks out, for a model whose indices are known good: the kernels still never touch
memory outside their buffers, but an out-of-range index then gives an unspecified result
(a gather clamps it to the nearest valid one, a scatter may drop its update).

An axis of symbolic extent (``seq``, known only at run time) is not checked for now: the
flag compares with constants, and no graph op yields a size at run time. Such an axis
gets bounds no index can fail (the widest of int64) beside the checked ones of a
GatherND or ScatterND; a node indexing only such axes gets no check, and its constant
indices are checked only where the extent is static. Its kernel still clamps every index
into the data.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ModelError
from ..graph import Check, Graph, Node, Value
from ..op_registry import TensorType, get_op
from ..symbolic import Dim, shape_text
from .rewrite import fresh_names

#: The ops whose second input holds indices into their first: for the values True, the
#: last axis of the indices holds coordinates into several axes of the data (GatherND,
#: ScatterND); otherwise each index counts along the one ``axis``.
INDEXED_OPS = {"gather": False, "gather_elements": False, "scatter_elements": False,
               "gather_nd": True, "scatter_nd": True}


def indexed_axes(node: Node) -> list[int]:
    """The axes of the data that ``node``'s indices count in: one, or one per coordinate
    of the indices' last axis (GatherND, ScatterND)."""
    data, indices = node.inputs[0], node.inputs[1]
    if INDEXED_OPS[node.op]:
        first = int(node.attrs.get("batch_dims", 0))
        return list(range(first, first + indices.shape[-1]))
    return [int(node.attrs.get("axis", 0)) % len(data.shape)]


def _message(node: Node, indices: Value, axes: list[int]) -> str:
    data = node.inputs[0]
    ranges = ", ".join(f"[{-data.shape[a]}, {data.shape[a] - 1}] for axis {a}" for a in axes)
    return (f"node '{node.name}' ({node.op}): an index in '{indices.name}' is out of range "
            f"(ONNX allows {ranges} of '{data.name}' {data.dtype}{shape_text(data.shape)}); check "
            "the values given to the model (--no-index-checks, or build(index_checks=False), "
            "leaves this check out)")


def _out_of_range(indices: np.ndarray, bounds: list[int | None]) -> bool:
    """Whether an index lies outside its bound (None: a symbolic one, not checked)."""
    if all(n is None for n in bounds):
        return False
    idx = indices.astype(np.int64)
    if len(bounds) > 1:  # coordinates along the last axis, one per bound
        keep = [i for i, n in enumerate(bounds) if n is not None]
        idx, bounds = idx[..., keep], [bounds[i] for i in keep]
    n = np.asarray(bounds, dtype=np.int64)
    return bool(np.any((idx < -n) | (idx >= n)))


def add_index_checks(graph: Graph) -> Graph:
    """Add a :class:`Check` to ``graph`` for each indexed node whose indices come at run
    time; raise ``ModelError`` for constant indices out of range."""
    fresh = fresh_names(graph)
    added: list[Node] = []

    def add(op: str, inputs: list[Value], attrs: dict[str, Any], name: str) -> Value:
        types = get_op(op).infer([TensorType(v.shape, v.dtype) for v in inputs], attrs)
        node = Node(op, inputs, [], attrs, name)
        node.outputs = [Value(fresh(name), t.shape, t.dtype, producer=node) for t in types]
        added.append(node)
        return node.outputs[0]

    for node in graph.nodes:
        if node.op not in INDEXED_OPS:
            continue
        indices = node.inputs[1]
        axes = indexed_axes(node)
        bounds = [_static(node.inputs[0].shape[a]) for a in axes]
        if indices.data is not None:
            if _out_of_range(indices.data, bounds):
                raise ModelError(_message(node, indices, axes))
            continue
        if (0 in indices.shape or all(n is None for n in bounds)
                or _never_out_of_range(indices.dtype, bounds)):
            continue
        # flag = max(int32(indices < lowest | indices >= end)): 1 if any is out of range
        prefix = f"{node.name}_index_check"
        if None in bounds or max(b for b in bounds if b is not None) > np.iinfo(
                np.dtype(indices.dtype)).max:  # a limit the type lacks
            indices = add("cast", [indices], {"dtype": "int64"}, f"{prefix}_wide")
        lowest, end = _limits(indices.dtype, bounds)
        below = add("lt", [indices, Graph.constant(fresh(f"{prefix}_lowest"), lowest)], {},
                    f"{prefix}_below")
        above = add("ge", [indices, Graph.constant(fresh(f"{prefix}_end"), end)], {},
                    f"{prefix}_above")
        outside = add("or", [below, above], {}, f"{prefix}_outside")
        as_int = add("cast", [outside], {"dtype": "int32"}, f"{prefix}_int")
        flag = add("reduce_max", [as_int], {"keepdims": False}, f"{prefix}_any")
        if not indices.is_static:  # no indices at all (a count of 0): max's identity is
            flag = add("max", [flag, Graph.constant(fresh(f"{prefix}_none"),  # not 0
                                                    np.int32(0))], {}, f"{prefix}_none")
        graph.checks.append(Check(flag, _message(node, indices, axes)))
    graph.nodes += added
    return graph


def _static(n: Dim) -> int | None:
    """An axis's extent where the flag can compare with it: None for a symbolic one."""
    return n if isinstance(n, int) else None


def _never_out_of_range(dtype: str, bounds: list[int | None]) -> bool:
    """Whether every value of ``dtype`` is a valid index (an int32 index into an axis of
    more than 2**31 elements can never be out of range; nor is one checked on an axis
    of symbolic extent)."""
    info = np.iinfo(np.dtype(dtype))
    return all(n is None or (-n <= info.min and info.max <= n - 1) for n in bounds)


def _limits(dtype: str, bounds: list[int | None]) -> tuple[np.ndarray, np.ndarray]:
    """The lowest valid index and one past the highest, in ``dtype``: scalars for one
    bound, vectors along the indices' last axis for several. A symbolic bound (None,
    with ``dtype`` int64) gets int64's extremes: no index of an axis that fits in memory
    reaches those, so it passes, and the maximum itself is rightly flagged."""
    wide = np.iinfo(np.int64)
    lowest = np.asarray([wide.min if n is None else -n for n in bounds], dtype=dtype)
    end = np.asarray([wide.max if n is None else n for n in bounds], dtype=dtype)
    if len(bounds) == 1:
        return lowest.reshape(()), end.reshape(())
    return lowest, end
